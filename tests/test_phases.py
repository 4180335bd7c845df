"""Where a process's time goes: phases from the worker's and the launcher's marks, the tables that
show them, the caches kept between processes, and the next process started ahead, never beside a
measured window."""
import json
import os
import time

import pytest

from bench.core import phases
from bench.harness import launch
from bench.harness.launch import run_case
from bench.present.phases_table import phase_table
from bench.store import query

MARKS = {"entered": 99.0, "imported": 102.0, "go": 103.5, "first_step_start": 104.0, "first_step_end": 106.0,
         "span_start": 107.0, "span_end": 113.0, "returned": 113.5}


def test_phases_from_marks_by_hand():
    p = phases.process_phases(MARKS, {"spawned": 98.0, "go": 103.0, "ended": 114.0})
    assert p == pytest.approx({"startup_s": 0.5, "setup_s": 0.5, "first_step_s": 2.0, "warmup_s": 1.0,
                               "windows_s": 6.0, "after_s": 0.5, "teardown_s": 0.5, "started_ahead_s": 5.0})
    # 11 s from go to the end, 6 of them measured
    assert phases.windows_share_pct(p) == pytest.approx(100 * 6 / 11)
    failed = phases.process_phases({"go": 1.0, "first_step_start": 2.0}, {"spawned": 0.0, "go": 0.0, "ended": 9.0})
    assert set(failed) == {"startup_s", "setup_s", "started_ahead_s"}  # nothing past where it failed


def test_summary_line_names_the_largest_shares():
    p = {"startup_s": 3.0, "setup_s": 0.2, "first_step_s": 2.0, "windows_s": 5.0, "teardown_s": 0.1}
    assert phases.summary_text(p, 2) == "2 process(es), 10 s: measured windows 49%; start-up 29%, first step 19%"
    assert phases.total([{"a": 1.0}, {"a": 2.0, "b": 1.0}]) == {"a": 3.0, "b": 1.0}


def test_phase_table_sums_each_case_and_the_floors():
    from stored import fixture_dicts  # a stored record as today's code keeps it
    per = phases.process_phases(MARKS, {"spawned": 98.0, "go": 103.0, "ended": 114.0})
    rec = fixture_dicts()[0]
    rec["processes"] = [{"status": "ok", "images_per_s": 1.0, "phases_s": per}] * 2
    records = [query.wrap(rec)]
    text = phase_table(records)
    row = next(line for line in text.splitlines() if line.startswith(f"| {rec['case']['name']} x2 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # start = start-up + set-up, end = after + exit, each summed over the two processes
    assert cells[1:] == ["22.0", "2.0", "4.0", "2.0", "12.0", "2.0", "55"]
    assert max(len(line) for line in text.splitlines()) <= 120


def test_worker_env_keeps_caches_and_lets_bytecode_be_written(tiny, monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    env = launch.worker_env(tiny, tmp_path / "tree", {"X": "1"}, "tok")
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache") and "PYTHONDONTWRITEBYTECODE" not in env
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "tree") and env["X"] == "1"
    # what an import of Inductor in this process set (torchvision imports it): torch's default, not the user's
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir
    cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == default_cache_dir()
    assert launch.worker_env(tiny, tmp_path, {}, "t")["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/mine")  # a user's own choice stands
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/mine-too")
    env = launch.worker_env(tiny, tmp_path, {}, "t")
    assert env["PYTHONPYCACHEPREFIX"] == "/mine" and env["TORCHINDUCTOR_CACHE_DIR"] == "/mine-too"


@pytest.mark.slow
def test_the_next_process_starts_ahead_but_never_beside_a_window(tiny, ddp_pair):
    from test_launch import leftovers
    # two gloo ranks under torchrun: past its windows the case stays in its teardown long enough for the
    # launcher's 50 ms poll to see it (a one-process case of 2 short windows could exit between two polls,
    # and then nothing is started ahead: about 1 run in 5 here)
    first, second = ddp_pair
    assert first["status"] == second["status"] == "ok"
    m1, m2 = first["ranks"][0]["phase_marks"], second["ranks"][0]["phase_marks"]
    l1, l2 = first["launch_marks"], second["launch_marks"]
    assert l2["spawned"] < l2["go"]  # it existed before it was let go: started ahead
    assert l2["spawned"] >= m1["span_end"]  # only once the first was past its windows
    assert l2["go"] >= l1["ended"] and m2["go"] >= l1["ended"]  # and it touched nothing before the first ended
    assert m2["imported"] < m2["go"]  # its imports were done while it waited
    assert phases.process_phases(m2, l2)["started_ahead_s"] > 0
    # a process started ahead for another case is ended, not used
    run_case(tiny, then=tiny.replace(seed=1))
    third = run_case(tiny)
    assert third["launch_marks"]["spawned"] == third["launch_marks"]["go"]
    assert leftovers(wait_s=5) == []


@pytest.mark.fresh_processes
@pytest.mark.slow
def test_the_run_first_process_starts_ahead_while_the_harness_prepares(tiny, monkeypatch):
    """start_ahead: the floor's first process imports while the data is made, waits untouched, and is the
    one run_case lets go; none is started where start-ahead is off."""
    from test_launch import leftovers
    launch.start_ahead(tiny)
    time.sleep(3)  # the harness making its data
    r = run_case(tiny)
    m, marks = r["ranks"][0]["phase_marks"], r["launch_marks"]
    assert r["status"] == "ok" and marks["spawned"] + 2.5 < marks["go"] and m["imported"] < m["go"]
    monkeypatch.setenv("BENCH_START_AHEAD", "0")
    launch.start_ahead(tiny)
    assert launch._ahead is None
    assert leftovers(wait_s=5) == []


def test_a_dead_rank_gets_its_own_exit_code_not_its_echos():
    """A worker that skips the interpreter's teardown can end (exit 1, its collective broken) before
    torchrun notices the rank that really died: torchrun's root cause is then the echo."""
    from bench.harness.dist import DistArgs
    from bench.harness.outcome import exit_codes, merge
    log = ["bench.worker FAILED", "Failures:", "[1]:", "  rank      : 1 (local_rank: 1)",
           "  exitcode  : -9 (pid: 22)  (SIGKILL)", "Root Cause (first observed failure):", "[0]:",
           "  rank      : 0 (local_rank: 0)", "  exitcode  : 1 (pid: 21)"]
    assert exit_codes(log) == {1: -9, 0: 1}
    import tempfile
    from pathlib import Path

    from conftest import TINY
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "rank0.json").write_text(json.dumps({"rank": 0, "status": "error", "reason": "gloo: peer gone"}))
        r = merge(TINY.replace(strategy="ddp", gpus=2), Path(d), 1, False, log, DistArgs())
    assert r["status"] == "error" and r["reason"].startswith("rank 1 died (killed by SIGKILL)")


@pytest.mark.slow
def test_progress_inside_a_case_follows_its_phases(tiny_run):
    import io

    from bench.harness.run import Run
    from bench.store.tree import Store
    r, heard = tiny_run
    assert r["status"] == "ok"
    assert any(t.startswith("first step") for t in heard) and any(t.startswith("window 1 of 2") for t in heard)
    assert heard.index(next(t for t in heard if t.startswith("first step"))) < \
        heard.index(next(t for t in heard if t.startswith("window 1")))
    out = io.StringIO()
    run = Run(Store("/nonexistent"), out=out, live=True)
    run.progress("window 1 of 3, step 4, 12 s after start " + "x" * 200)
    run.progress(None)
    lines = out.getvalue().split("\r")
    assert all(len(line.replace("\033[K", "")) <= 120 for line in lines) and lines[-1] == "\033[K"
    assert Run(Store("/nonexistent"), out=io.StringIO()).live is False  # not a terminal: logs stay clean
