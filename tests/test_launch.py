"""Real runs in fresh processes on the CPU: single, dp, ddp through torchrun with gloo, and
every failure the launcher must contain."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core import lifeline, sweeps
from bench.harness import launch
from bench.harness.dist import DistArgs
from bench.harness.launch import run_case

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


def as_in_a_terminal() -> None:
    """For a launched child (Popen's preexec_fn): the stop signals at their defaults, as a command typed
    in a terminal gets them, whatever this test session was started with (a background job ignores
    SIGINT, `nohup` SIGHUP)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def leftovers(wait_s: float = 0.0) -> list[int]:
    """Processes still carrying a run token of this test session (conftest's prefix): any of them
    means a case left something behind. Other bench jobs on the machine are not ours to count."""
    from conftest import TOKEN_PREFIX, forkserver_pids
    needle = f"{launch.TOKEN_VAR}={TOKEN_PREFIX}".encode()
    servers = forkserver_pids()  # the workers they fork count
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid() and int(entry.name) not in servers:
                try:
                    if any(v.startswith(needle) for v in (entry / "environ").read_bytes().split(b"\0")):
                        found.append(int(entry.name))
                except OSError:
                    pass
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def test_single_case_end_to_end(tiny, tiny_run):
    r = tiny_run[0]
    assert r["status"] == "ok", r
    m = r["metrics"]
    assert m["images_per_s"] > 0 and m["images_per_s_per_gpu"] == m["images_per_s"]
    assert len(m["images_per_s_repeats"]) == tiny.repeats
    assert [len(x) for x in r["ranks"][0]["step_times_s"]] == [tiny.steps] * tiny.repeats
    assert m["compute_dtypes"] == {"cpu": "float32"}
    assert m["peak_memory_kind"] == "host_max_rss" and m["peak_memory_bytes"] > 0
    # rank 0 counts (or finds counted) the FLOPs of the model it trained, for the report's MFU
    assert r["ranks"][0]["model_flops_per_image"] == pytest.approx(222.1e6, rel=0.01)  # 3x its forward


def test_dp_on_the_cpu_runs_the_seed_knobs_in_bf16(small_net):
    case = sweeps.seed_optimized(small_net, 1)  # the small network: emulated bf16 made ResNet-18 take seconds
    assert case.dp_loss_in_forward and case.precision == "bf16"
    r = run_case(case)
    assert r["status"] == "ok", r
    # autocast is entered inside the DataParallel module, so the replica really ran bf16
    assert r["metrics"]["compute_dtypes"] == {"cpu": "bfloat16"}


@pytest.mark.parametrize("ranks", [2, 4])
def test_ddp_over_gloo_ranks_through_torchrun(small_net, ranks, request):
    # two ranks: the run the start-ahead test reads too (conftest.ddp_pair, ResNet-18); four train the small
    # network, whose gradients gloo sums in a fraction of ResNet-18's 45 MB time
    r = (request.getfixturevalue("ddp_pair")[0] if ranks == 2
         else run_case(small_net.replace(strategy="ddp", gpus=ranks)))
    assert r["status"] == "ok", r
    assert sorted(x["rank"] for x in r["ranks"]) == list(range(ranks))
    assert r["metrics"]["global_batch"] == 4 * ranks
    agent = "bench.worker.torchrun" if os.environ.get(lifeline.FORKSERVER_VAR) else "torch.distributed.run"
    assert f"-m {agent} " in r["command"] and f"--nproc-per-node={ranks}" in r["command"]
    # global figure = every rank's images over the slowest rank's window, per repeat
    rep0 = sum(x["images"][0] for x in r["ranks"]) / max(x["windows_s"][0] for x in r["ranks"])
    assert r["metrics"]["images_per_s_repeats"][0] == pytest.approx(rep0)
    assert r["ranks"][0]["backend"] == "gloo"


def test_torchrun_is_started_as_is_unless_the_test_suites_fork_server_is_set(tiny, monkeypatch, tmp_path):
    case = tiny.replace(strategy="ddp", gpus=2)
    monkeypatch.delenv(lifeline.FORKSERVER_VAR, raising=False)
    plain = launch.worker_command(case, tmp_path / "case.json", tmp_path / "ranks", DistArgs())
    assert plain[1:4] == ["-m", "torch.distributed.run", "--nproc-per-node=2"]
    assert plain[-6:-4] == ["-m", "bench.worker"]
    monkeypatch.setenv(lifeline.FORKSERVER_VAR, str(tmp_path))
    forked = launch.worker_command(case, tmp_path / "case.json", tmp_path / "ranks", DistArgs())
    assert forked[1:3] == ["-m", "bench.worker.torchrun"] and forked[3:] == plain[3:]


def test_accumulation_all_reduce_counts(small_net):
    """The article's loop all-reduces on every micro-batch; no_sync only on the last one."""
    base = small_net.replace(strategy="ddp", gpus=2, accumulation_steps=4, steps=1, repeats=1)
    article = run_case(base.replace(accumulation_mode="article"))
    no_sync = run_case(base.replace(accumulation_mode="no_sync"))
    for r in (article, no_sync):
        assert r["status"] == "ok", r
    buckets = no_sync["metrics"]["allreduce_calls_per_step"]  # one sync of every bucket per step
    assert buckets >= 1
    assert article["metrics"]["allreduce_calls_per_step"] == 4 * buckets
    assert article["metrics"]["images_per_step"] == 4 * 2 * 4


def test_two_nodes_meet_at_a_loopback_rendezvous(tmp_path):
    """Two torchrun invocations with --nnodes 2, as two machines would run them; node 0 hosts the
    rendezvous store (static rendezvous, so which node hosts it is never a race)."""
    import socket
    with socket.socket() as sock:  # a port nobody holds
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = []
    for node in (0, 1):
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench", "run", "--device", "cpu", "--model", "resnet18", "--num-classes", "10",
             "--batch-size", "4", "--image-size", "32", "--warmup-steps", "1", "--steps", "2", "--repeats", "1",
             "--strategy", "ddp", "--gpus", "2", "--nnodes", "2", "--node-rank", str(node),
             "--master-addr", "127.0.0.1", "--master-port", str(port),
             "--results", str(tmp_path), "--sweep-name", "two-nodes"],
            # two machines' ranks on one 2-core host: a thread each (two each, spinning in OpenMP, made a
            # step 1.8 s here against 0.16 s)
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, OMP_NUM_THREADS="1")))
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    # node 1's records hold its own rank's share: it prints no figure of the case, node 0 does
    assert "ok on node 1: its ranks ran; node 0 stores the case and prints its figure" in outs[1]
    assert "images/s" not in outs[1] and "  ok: " in outs[0] and "images/s (" in outs[0]
    stored = list(tmp_path.rglob("two-nodes/*/*.json"))
    assert len(stored) == 1  # node 0 stores the merged result; node 1 stores nothing
    rec = json.loads(stored[0].read_text())
    assert rec["status"] == "ok" and sorted(r["rank"] for r in rec["ranks"]) == [0, 1]
    assert "--nnodes=2" in rec["launch_command"] and f"--master-port={port}" in rec["launch_command"]


def test_oom_is_stored_with_the_batch_size_that_failed(small_net):
    # a real allocation failure of the CPU allocator (a RuntimeError, not torch.OutOfMemoryError)
    r = run_case(small_net.replace(strategy="ddp", gpus=2, fault="oom", fault_rank=1))
    assert r["status"] == "oom"
    assert r["reason"].startswith("rank 1: out of memory at batch_size=4 per rank: ")
    assert "DefaultCPUAllocator: can't allocate memory" in r["reason"]
    assert not leftovers()


@pytest.mark.fresh_processes
def test_a_dying_rank_does_not_hang_the_others(small_net):
    started = time.monotonic()
    r = run_case(small_net.replace(strategy="ddp", gpus=2, fault="crash", fault_rank=1, timeout_s=120))
    assert r["status"] == "error"
    assert r["reason"].startswith("rank 1 died") and "injected fault: rank 1 crashes" in r["reason"]
    assert any("rank 1 crashes" in ln for ln in r["stderr_tail"])
    assert time.monotonic() - started < 100  # torchrun stopped rank 0, the timeout did not
    assert not leftovers()


@pytest.mark.fresh_processes
def test_a_crash_in_a_single_process_case_is_stored_with_its_last_words(small_net):
    r = run_case(small_net.replace(fault="crash"))
    assert r["status"] == "error" and "rank 0 died (exit code 3)" in r["reason"]
    assert "injected fault: rank 0 crashes" in r["reason"]


def test_an_exception_keeps_its_traceback(tiny, tmp_path):
    r = run_case(tiny.replace(loader="torch", data_dir=str(tmp_path / "vanished")))
    assert r["status"] == "error"
    assert r["reason"].startswith("rank 0: DataError: data folder") and "does not exist" in r["reason"]
    assert any("Traceback" in ln for ln in r["stderr_tail"]) or r["ranks"][0]["traceback_tail"]


SWEEP_SCRIPT = """
import signal
import sys
# a shell that starts a job in the background without job control leaves SIGINT ignored, and Python
# then keeps it ignored; a terminal's Ctrl-C reaches a process that has the default handler
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
from bench.core.case import Case
from bench.harness.run import Run, run_cases
from bench.store.tree import Store
tiny = Case(device="cpu", num_classes=10, batch_size=4, image_size=32, warmup_steps=1, steps=2, repeats=1,
            timeout_s=300.0, **{model!r})
cases = [tiny.replace(name="first"), tiny.replace(name="stuck", fault="hang"), tiny.replace(name="third")]
with Run(Store({store!r})) as run:
    run_cases(run, cases, "interrupted", resume={resume})
"""


@pytest.mark.fresh_processes
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_keeps_finished_results_and_resume_skips_them(tmp_path, sig, small_net):
    """Ctrl-C in a terminal, or SIGTERM from a scheduler or `timeout`: the same clean stop."""
    script = tmp_path / "sweep.py"
    # the small network's fields: its ranks import no torchvision
    model = {k: v for k, v in small_net.to_dict().items() if k.startswith("model")}
    script.write_text(SWEEP_SCRIPT.format(root=str(ROOT), store=str(tmp_path / "r"), resume=False, model=model))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True, preexec_fn=as_in_a_terminal)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((tmp_path / "r").rglob("interrupted/first-*/*.json")):
        time.sleep(0.5)
    time.sleep(3)  # the hanging case is now running
    os.killpg(p.pid, sig)
    out, _ = p.communicate(timeout=60)
    assert p.returncode != 0
    stored = sorted(f.parent.name.split("-")[0] for f in (tmp_path / "r").rglob("interrupted/*/*.json"))
    assert stored == ["first"], out
    assert not leftovers()
    if sig != signal.SIGINT:
        return  # what a resume does is the same after either signal

    script.write_text(SWEEP_SCRIPT.format(root=str(ROOT), store=str(tmp_path / "r"), resume=True, model=model)
                      .replace('tiny.replace(name="stuck", fault="hang"), ', ""))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120).stdout
    assert "already stored, skipped (--resume)" in out
    assert sorted(f.parent.name.split("-")[0] for f in (tmp_path / "r").rglob("interrupted/*/*.json")) == ["first", "third"]


def test_worker_command_passes_rendezvous_through(tiny):
    case = tiny.replace(strategy="ddp", gpus=4)
    cmd = launch.worker_command(case, Path("c.json"), Path("o"), DistArgs(nnodes=2, node_rank=1, master_addr="10.0.0.1", master_port=1234))
    joined = " ".join(cmd)
    assert "--nproc-per-node=2" in joined and "--nnodes=2" in joined and "--node-rank=1" in joined
    assert "--master-addr=10.0.0.1" in joined and "--master-port=1234" in joined
    with pytest.raises(ValueError, match="gpus=4 does not divide over nnodes=3"):
        DistArgs(nnodes=3).nproc_per_node(case)


@pytest.mark.parametrize("scope,precision,optimizer,options", [("model", "bf16", "default", ""),
                                                                ("step", "bf16", "fused", "conv_1x1_as_mm")])
def test_compile_knob_runs_and_reports_its_first_step(small_net, scope, precision, optimizer, options):
    """torch.compile as a case knob, of the model or of the whole forward + loss: compilation lands in
    the first step, not in the window, and the label is checked against what the compiled graph computed
    and the Inductor settings it was compiled with."""
    r = run_case(small_net.replace(compile="default", compile_scope=scope, precision=precision, optimizer_impl=optimizer,
                              inductor_options=options, warmup_steps=2, repeats=1, timeout_s=240))
    assert r["status"] == "ok", r
    m = r["metrics"]
    assert m["first_step_s"] > 5 * m["step_time_median_s"]
    # checked after the windows (a hook would force recompiles in them)
    assert m["compute_dtypes"] == {"cpu": {"fp32": "float32", "bf16": "bfloat16"}[precision]}
    assert r["ranks"][0]["cpp_wrapper_graphs"] == 0  # Inductor's Python wrapper, as the label says
    held = r["ranks"][0]["inductor_settings"]
    assert [n for n, on in held.items() if on] == ([options] if options else []) and len(held) == 4


def test_a_precision_label_that_did_not_run_fails_the_case():
    from bench.core.case import Case
    from bench.worker.dtype_check import LabelMismatch, check_label
    check_label(Case(precision="bf16"), {"cuda:0": "bfloat16", "cuda:1": "bfloat16"})
    with pytest.raises(LabelMismatch, match="precision=bf16 means bfloat16 logits, but {'cuda:1': 'float16'}"):
        check_label(Case(precision="bf16"), {"cuda:0": "bfloat16", "cuda:1": "float16"})
    with pytest.raises(LabelMismatch):
        check_label(Case(precision="fp32"), {})  # nothing observed is no proof
