"""Run one case in fresh processes with a timeout: a plain process (single, dp) or torchrun (ddp).

The launcher knows nothing of models: it starts `bench.worker`, waits, kills what overstays,
and turns the per-rank records (or their absence) into one status with a reason.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ..core import lifeline
from ..core.case import Case
from .dist import DistArgs
from .env import REPO_ROOT
from .outcome import merge, tail

TOKEN_VAR = "BENCH_RUN_TOKEN"
TOKEN_PREFIX_VAR = "BENCH_TOKEN_PREFIX"
"""A prefix for every case token this process starts, so a test (or a wrapper) can follow exactly
the processes it started, however many other bench jobs run on the machine."""
CASE_DIR_PREFIX = "bench-case-"
OWNER_FILE = "owner.pid"


def worker_command(case: Case, case_file: Path, out: Path, dist: DistArgs) -> list[str]:
    worker = ["-m", "bench.worker", "--case", str(case_file), "--out", str(out)]
    if case.launcher != "torchrun":
        return [sys.executable, *worker]
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={dist.nproc_per_node(case)}",
           f"--nnodes={dist.nnodes}", f"--node-rank={dist.node_rank}", "--max-restarts=0"]
    if dist.rdzv_endpoint:
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={dist.rdzv_endpoint}", f"--rdzv-id={case.case_id}"]
    elif dist.master_addr:
        cmd += [f"--master-addr={dist.master_addr}", f"--master-port={dist.master_port or 29500}"]
    else:
        cmd += ["--standalone"]
    return cmd + worker


def processes_with_token(token: str) -> list[int]:
    """Every live process started for this case, found by the token in its environment."""
    needle = f"{TOKEN_VAR}={token}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def kill_all(proc: subprocess.Popen, token: str, grace_s: float = 5.0) -> None:
    """SIGTERM the case's process group and every process carrying its token, then SIGKILL. A second
    Ctrl-C (or SIGTERM, SIGHUP) while this runs waits until it is done, so it cannot leave half."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        _kill_all(proc, token, grace_s)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _kill_all(proc: subprocess.Popen, token: str, grace_s: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        for pid in processes_with_token(token):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (proc.poll() is None or processes_with_token(token)):
            time.sleep(0.1)
        if proc.poll() is not None and not processes_with_token(token):
            return


def reap_stale_case_folders(base: Path | None = None) -> list[Path]:
    """Remove case folders whose owning launcher is gone (killed before it could clean up)."""
    base = Path(base or tempfile.gettempdir())
    removed = []
    for d in base.glob(CASE_DIR_PREFIX + "*"):
        try:
            pid = int((d / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not ours to judge, or still being created
        if not _alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_case(case: Case, dist: DistArgs = DistArgs()) -> dict:
    """Run the case; return status, reason, merged metrics and per-rank records."""
    token = os.environ.get(TOKEN_PREFIX_VAR, "") + uuid.uuid4().hex
    reap_stale_case_folders()
    with tempfile.TemporaryDirectory(prefix=CASE_DIR_PREFIX) as tmp:
        tmp = Path(tmp)
        (tmp / OWNER_FILE).write_text(str(os.getpid()))
        case_file = tmp / "case.json"
        case_file.write_text(json.dumps(case.to_dict()))
        out = tmp / "ranks"
        out.mkdir()
        log = tmp / "launcher.log"
        env = dict(os.environ, **{TOKEN_VAR: token, "PYTHONPATH": _pythonpath()})
        env.update({k: str(v) for k, v in case.nccl_env})
        cmd = worker_command(case, case_file, out, dist)
        started = time.monotonic()
        with open(log, "wb") as logf:
            # its own session, so one signal reaches the whole group; the kernel kills it if we die
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=lifeline.preexec)
            timed_out = False
            try:
                proc.wait(timeout=case.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_all(proc, token)
            except BaseException:  # Ctrl-C: leave nothing running behind
                kill_all(proc, token)
                raise
            if not timed_out and processes_with_token(token):
                kill_all(proc, token)  # a rank that outlived torchrun
        wall = time.monotonic() - started
        result = merge(case, out, proc.returncode, timed_out, tail(log, 200), dist)
        result["wall_s"] = wall
        result["command"] = " ".join(cmd[1:])
        return result


def _pythonpath() -> str:
    parts = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(parts)
