"""The hold of a test that runs alone (tests/conftest.py) under three or more xdist workers: the other workers'
shared holds, taken one after another, must not keep it waiting until they have all finished."""
import subprocess
import sys
import time

from conftest import ROOT

WORKER = """
import sys, time, fcntl
from pathlib import Path
sys.path[:0] = [{root!r}, {tests!r}]
import conftest
conftest.ALONE_LOCK, conftest.ALONE_GATE = Path({lock!r}), Path({lock!r} + ".gate")
{body}
"""
# one shared hold after another, each 0.1 s, with no gap between them: a test on each of two workers
SHARED = """
start, end = float(sys.argv[1]), float(sys.argv[2])
while time.time() < start:
    time.sleep(0.01)
while time.time() < end:
    conftest._hold(fcntl.LOCK_SH)
    time.sleep(0.1)
    conftest._release()
"""
ALONE = """
while time.time() < float(sys.argv[1]):
    time.sleep(0.01)
asked = time.time()
conftest._hold(fcntl.LOCK_SH)  # its own set-up's
conftest._hold(fcntl.LOCK_EX)
print(time.time() - asked)
"""


def test_a_test_that_runs_alone_gets_the_machine_while_two_other_workers_keep_testing(tmp_path):
    lock = str(tmp_path / "tests.lock")

    def worker(body, *argv):
        code = WORKER.format(root=str(ROOT), tests=str(ROOT / "tests"), lock=lock, body=body)
        return subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], stdout=subprocess.PIPE, text=True)
    start = time.time() + 1.5  # after the three have imported
    shared = [worker(SHARED, start + offset, start + 2.5) for offset in (0.0, 0.05)]
    alone = worker(ALONE, start + 0.3)
    waited = float(alone.communicate(timeout=30)[0])
    assert all(p.wait(timeout=30) == 0 for p in shared)
    # the shared holds then running end within 0.1 s; without the gate it waited for the others' last one (2.2 s)
    assert waited < 1.0
