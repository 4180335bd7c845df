"""The test suite's fork server (bench/worker/forkserver.py): a worker it forks runs the case as a fresh one
would, says in its record that it was forked, and its client (what the launcher or torchrun watches)
exits as the worker did; a client that goes takes its worker with it."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core import procfs
from bench.harness import launch
from bench.worker import forkclient
from conftest import ROOT, forkserver_pids

pytestmark = pytest.mark.slow


def test_a_forked_worker_runs_the_case_and_its_record_says_so(tiny):
    forked = launch.run_case(tiny)
    crashed = launch.run_case(tiny.replace(fault="crash"))
    assert forked["status"] == "ok" and forked["metrics"]["images_per_s"] > 0
    marks = forked["ranks"][0]["phase_marks"]
    assert marks["entered"] <= marks["forked"] <= marks["imported"] <= marks["go"] < marks["returned"]
    assert marks["imported"] - marks["forked"] < 1.0  # torch was imported before the fork
    # the client exits with the worker's code, and the launcher reads the failure a fresh worker's gives
    # (test_launch's crash test, in a fresh process)
    assert crashed["status"] == "error"
    assert crashed["reason"].startswith("rank 0 died (exit code 3) during warm-up, ")
    assert "injected fault: rank 0 crashes" in crashed["reason"]


def _hanging_client(tiny, tmp_path: Path) -> tuple[subprocess.Popen, int]:
    """A client whose forked worker hangs in its warm-up, and that worker's pid."""
    (tmp_path / "ranks").mkdir(parents=True)
    (tmp_path / "case.json").write_text(json.dumps(tiny.replace(fault="hang", timeout_s=60).to_dict()))
    client = subprocess.Popen([sys.executable, "-m", "bench.worker", "--case", str(tmp_path / "case.json"),
                               "--out", str(tmp_path / "ranks")], cwd=ROOT, env=launch.cached_env(ROOT))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = [p for server in forkserver_pids() for p in procfs.tree(server, procfs.process_table())[1:]]
        beat = tmp_path / "ranks" / "rank0.heartbeat"
        if len(workers) == 1 and beat.exists() and json.loads(beat.read_text())["phase"] == "warm-up":
            return client, workers[0]
        time.sleep(0.1)
    client.kill()
    raise AssertionError("no forked worker reached its warm-up")


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if procfs.stat_fields(Path(f"/proc/{pid}/stat").read_text())[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_worker_killed_by_a_signal_is_a_client_killed_by_it(tiny, tmp_path, sig):
    client, worker = _hanging_client(tiny, tmp_path)
    assert worker != client.pid
    os.kill(worker, sig)
    assert client.wait(timeout=30) == -sig


def test_what_the_client_is_sent_reaches_the_worker_and_a_killed_client_takes_it_along(tiny, tmp_path):
    client, worker = _hanging_client(tiny, tmp_path / "a")
    client.send_signal(signal.SIGTERM)  # torchrun stopping a rank, say
    assert client.wait(timeout=30) == -signal.SIGTERM and _gone(worker)
    client, worker = _hanging_client(tiny, tmp_path / "b")
    client.kill()  # nothing of the client's can run: the server sees its connection close
    client.wait(timeout=30)
    assert _gone(worker)


def test_no_folder_no_server(monkeypatch, tmp_path):
    monkeypatch.delenv(forkclient.FOLDER_VAR, raising=False)
    assert forkclient.hand_over(time.time()) is None
    # a folder nobody prepared (no owner named) starts no server, and the worker runs itself
    assert forkclient.connect(tmp_path, ROOT) is None and forkclient.server_pids(tmp_path) == []
    # nor does one whose socket's path would be too long for a Unix socket
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    (deep / forkclient.OWNER_FILE).write_text(str(os.getpid()))
    assert forkclient.connect(deep, ROOT) is None and not list(deep.glob("*.starting"))


def test_a_forked_recipe_runs_as_from_a_shell_and_cannot_lean_on_the_suite(tmp_path):
    """tests/forked_python.py: the script's folder first on sys.path, its arguments, its exit code and output;
    bench not importable, as in a user's shell."""
    from forked_python import run_script
    (tmp_path / "helper.py").write_text("WORD = 'beside'\n")
    script = tmp_path / "recipe.py"
    script.write_text("import sys, os, helper, torch\nprint(helper.WORD, sys.argv[1:], os.getppid())\n"
                      "print('to stderr', file=sys.stderr)\ntry:\n    import bench\nexcept ImportError:\n"
                      "    sys.exit(3)\nprint('bench', bench.__file__)\n")
    ran = run_script(script, "--steps", 2)
    assert (ran.returncode, ran.stdout.split()[:3], ran.stderr) == (3, ["beside", "['--steps',", "'2']"], "to stderr\n")
    if os.environ.get(forkclient.FOLDER_VAR):  # forked by this session's server, not started by this process
        assert int(ran.stdout.split()[-1]) in forkserver_pids()
    script.write_text("raise RuntimeError('recipe broke')\n")
    broke = run_script(script)
    assert broke.returncode == 1 and "RuntimeError: recipe broke" in broke.stderr
