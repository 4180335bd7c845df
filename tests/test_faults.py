"""Faults injected as a user (or a scheduler, or the kernel) would: each behaves as README's fault
table says, and nothing of a case outlives it."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.harness import launch, outcome
from bench.core.errors import StoreError
from bench.store import tree as results
from bench.harness.signals import Stopped, terminate_as_interrupt
from test_launch import as_in_a_terminal, leftovers

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
# a 2-rank DDP case whose windows last long enough to be interrupted; its network is tests/smallnets.py's, whose
# ranks import no torchvision
LONG_DDP = ["--device", "cpu", "--model", "tests.smallnets:conv_bn", "--num-classes", "10", "--batch-size", "4",
            "--image-size", "32",
            "--strategy", "ddp", "--gpus", "2", "--warmup-steps", "2", "--steps", "2", "--min-window-s", "30"]


def _start(tmp_path, *extra, results_dir=None):
    return subprocess.Popen([sys.executable, "-m", "bench", "run", *LONG_DDP, "--results", str(results_dir or tmp_path / "r"),
                             *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=as_in_a_terminal)


def _workers_of(pid: int) -> list[int]:
    """Every process below pid (torchrun and its ranks)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout.split()
    children = {}
    for p, pp in zip(out[::2], out[1::2]):
        children.setdefault(int(pp), []).append(int(p))
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _phases(launcher_pid: int) -> list[str]:
    """What each rank of this launcher's case says it is doing, from its heartbeat file."""
    phases = []
    for d in Path("/tmp").glob(launch.CASE_DIR_PREFIX + "*"):
        owner = d / launch.OWNER_FILE
        if owner.is_file() and owner.read_text() == str(launcher_pid):
            phases += [outcome.read_heartbeat(d / "ranks", r).get("phase", "") for r in (0, 1)]
    return phases


def _wait_for_ranks(p, timeout=180):
    """Until both ranks are inside their measured windows: a fixed sleep raced a loaded machine's start-up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        phases = _phases(p.pid)
        if len(phases) == 2 and all(ph.startswith("window") for ph in phases):
            time.sleep(1)
            return
        time.sleep(0.3)
    raise AssertionError(f"the case did not reach its windows: {_phases(p.pid)}")


@pytest.mark.fresh_processes
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["sigkill", "sighup"])
def test_killing_or_hanging_up_the_launcher_leaves_nothing_running(tmp_path, sig):
    p = _start(tmp_path)
    _wait_for_ranks(p)
    # this launcher's case folders only: another bench job on the machine has its own, still in use
    case_dirs = {d for d in Path("/tmp").glob(launch.CASE_DIR_PREFIX + "*")
                 if (d / launch.OWNER_FILE).is_file() and (d / launch.OWNER_FILE).read_text() == str(p.pid)}
    os.kill(p.pid, sig)
    out, _ = p.communicate(timeout=60)
    assert not leftovers(wait_s=10), "a rank or torchrun outlived the launcher"
    if sig == signal.SIGHUP:  # a closed terminal: the clean stop of Ctrl-C, with its own exit code
        assert p.returncode == 128 + signal.SIGHUP and "interrupted (SIGHUP)" in out
    else:  # SIGKILL leaves its folder behind; the next start of a case reaps it
        assert p.returncode == -signal.SIGKILL
        stale = [d for d in case_dirs if d.exists()]
        launch.reap_stale_case_folders()
        assert stale and not any(d.exists() for d in stale)


def _stop_says_one_line(p, sig: signal.Signals, code: int) -> None:
    """Ctrl-C reaches the whole terminal group, SIGTERM (a scheduler, `timeout`) the launcher alone."""
    os.killpg(p.pid, sig) if sig == signal.SIGINT else os.kill(p.pid, sig)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == code, out
    assert "Traceback" not in out and f"interrupted ({sig.name})" in out
    assert not leftovers(wait_s=10)


def test_a_stop_signal_started_ignored_stays_ignored():
    """`nohup bench sweep ... &` keeps running when its terminal closes; SIGTERM still stops it."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with terminate_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing raised
            time.sleep(0.2)
            with pytest.raises(Stopped) as stopped:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            assert stopped.value.exit_code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back as it was
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.fresh_processes
def test_ctrl_c_on_bench_run_says_one_line(tmp_path):
    p = _start(tmp_path)
    _wait_for_ranks(p)
    _stop_says_one_line(p, signal.SIGINT, 130)


@pytest.mark.fresh_processes
def test_a_second_run_is_refused_beside_a_first_whose_rank_the_kernel_kills_and_names(tmp_path):
    p = _start(tmp_path)
    _wait_for_ranks(p)
    # two runs at once on one machine: the second refuses before any work
    second = subprocess.run([sys.executable, "-m", "bench", "run", *LONG_DDP, "--results", str(tmp_path / "r")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert "another run is measuring on" in second.stderr and f"pid {p.pid}" in second.stderr
    # then the kernel kills one of the first run's ranks
    ranks = [c for c in _workers_of(p.pid) if b"bench.worker" in Path(f"/proc/{c}/cmdline").read_bytes()]
    rank1 = next(c for c in ranks if b"RANK=1\0" in Path(f"/proc/{c}/environ").read_bytes())
    os.kill(rank1, signal.SIGKILL)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 1, out
    (path,) = (tmp_path / "r").rglob("run/*/*.json")
    rec = json.loads(path.read_text())
    assert rec["status"] == "error"
    assert rec["reason"].startswith("rank 1 died (killed by SIGKILL) during window 1 of 3, step ")
    assert "out-of-memory killer" in rec["reason"] and "GiB" in rec["reason"]
    assert not leftovers(wait_s=10)


@pytest.mark.fresh_processes
def test_a_hanging_rank_is_killed_with_its_whole_group_and_the_timeout_names_what_each_did(small_net):
    # rank 1 hangs; rank 0 then waits for it in the gradient all-reduce: both are running at the timeout
    # (20 s: beside another test's work, fresh ranks were still starting up after 12)
    started = time.monotonic()
    r = launch.run_case(small_net.replace(strategy="ddp", gpus=2, fault="hang", fault_rank=1, timeout_s=20))
    assert r["status"] == "timeout"
    assert r["reason"].startswith("no result within timeout_s=20; every process of the case was killed")
    assert "still running then: rank 0 (" in r["reason"] and "rank 1 (" in r["reason"]
    assert "start-up" not in r["reason"]  # both were past their start-up: the hang, not a slow start, timed out
    assert "s after start" in r["reason"]
    assert time.monotonic() - started < 60
    assert not leftovers(wait_s=10)


def test_a_results_folder_that_cannot_be_written_is_refused_before_anything_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "bench", "run", *LONG_DDP, "--results", str(blocker)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and time.monotonic() - started < 30
    assert out.stderr.strip().startswith("error: results folder ") and "cannot be written" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "[1/1]" not in out.stdout


def test_a_full_results_disk_is_refused_before_anything_runs(tmp_path, monkeypatch):
    import shutil
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(100, 99, 1 << 20))
    with pytest.raises(StoreError, match="1 MiB free, less than the 64 MiB a run needs"):
        results.Store(tmp_path).check_writable("m", "c")


def test_a_result_that_cannot_be_stored_after_its_measurement_goes_to_a_fallback(tmp_path, tiny, monkeypatch, capsys):
    import io

    from bench.harness.run import Run, run_cases
    monkeypatch.setenv("BENCH_SKIP_PEAK", "1")
    store = results.Store(tmp_path)

    def full(record):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(store, "save", full)
    log = io.StringIO()
    with Run(store, out=log) as run:
        records = run_cases(run, [tiny.replace(name="first"), tiny.replace(name="second")], "s")
    assert [r["status"] for r in records] == ["ok", "ok"]  # the sweep went on
    saved = [ln.rsplit(" ", 1)[1] for ln in log.getvalue().splitlines() if "could not store the result" in ln]
    assert len(saved) == 2
    kept = json.loads(Path(saved[0]).read_text())
    assert kept["status"] == "ok" and "No space left on device" in kept["unsaved_because"]


def test_gpus_that_do_not_divide_over_the_nodes_are_refused_before_the_sweep(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench", "run", "--device", "cpu", "--strategy", "ddp", "--gpus", "3",
                          "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29999", "--results", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "gpus=3, which does not divide over --nnodes=2" in out.stderr + out.stdout
    assert not list(tmp_path.rglob("*/run/*"))


def test_a_jpeg_dali_cannot_decode_is_named(tmp_path):
    pytest.importorskip("nvidia.dali")
    from bench.data.generate import make_dataset
    make_dataset(tmp_path / "d", 16, 2)  # every image is read in every epoch of 4 batches
    victim = sorted((tmp_path / "d").rglob("*.jpg"))[5]
    raw = bytearray(victim.read_bytes())
    sof = raw.find(b"\xff\xc0")
    raw[sof + 5:sof + 9] = b"\0\0\0\0"  # a frame of 0 x 0 pixels: the markers look fine, no decoder takes it
    victim.write_bytes(bytes(raw))
    r = launch.run_case(launch.Case(device="cpu", model="resnet18", num_classes=10, batch_size=4, image_size=32,
                                    loader="dali", dali_device="cpu", data_dir=str(tmp_path / "d"), warmup_steps=2,
                                    steps=4, repeats=2, timeout_s=120))
    assert r["status"] == "error"
    assert f"DataError: DALI could not decode {victim} (shard 0 of 1, after " in r["reason"]


def test_undecodable_without_a_name_from_dali_is_found_by_pil(tmp_path):
    from bench.worker.loaders.dali import undecodable
    good = tmp_path / "good.jpg"
    from PIL import Image
    Image.new("RGB", (8, 8)).save(good)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff garbage \xff\xd9")
    text = undecodable("nvImageCodec failure: '#3'", [str(good), str(bad)], (0, 1), 256)
    assert text == f"DALI could not decode {bad} (shard 0 of 1, after 256 images delivered): nvImageCodec failure: '#3'; remove or replace the file"
    # shard 1 of 2 holds only the second half of the list
    assert str(bad) in undecodable("decode error", [str(good), str(bad)], (1, 2), 0)
