"""Run one case in fresh processes with a timeout: a plain process (single, dp) or torchrun (ddp).

The launcher knows nothing of models: it starts `bench.worker`, waits, kills what overstays,
and turns the per-rank records (or their absence) into one status with a reason.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..core import lifeline
from ..core.case import Case
from ..core.case_checks import CUDA_CONNECTIONS_VAR
from ..core.host_cache import INDUCTOR_CACHE_VAR, cache_root, inductor_cache
from .dist import DistArgs
from .env import REPO_ROOT
from .outcome import doing, merge, read_heartbeat, tail

TOKEN_VAR, TOKEN_PREFIX_VAR = lifeline.TOKEN_VAR, lifeline.TOKEN_PREFIX_VAR
CASE_DIR_PREFIX = "bench-case-"
OWNER_FILE = "owner.pid"


def worker_command(case: Case, case_file: Path, out: Path, dist: DistArgs) -> list[str]:
    worker = ["-m", "bench.worker", "--case", str(case_file), "--out", str(out)]
    if case.launcher != "torchrun":
        return [sys.executable, *worker]
    # the test suite's fork server forks torchrun too (bench/worker/torchrun.py); a measured run starts it as is
    agent = "bench.worker.torchrun" if os.environ.get(lifeline.FORKSERVER_VAR) else "torch.distributed.run"
    cmd = [sys.executable, "-m", agent, f"--nproc-per-node={dist.nproc_per_node(case)}",
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
        if not lifeline.alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


START_AHEAD_VAR = "BENCH_START_AHEAD"
"""`0` turns off starting the next process ahead (see run_case)."""
PAST_THE_WINDOWS = ("after the windows", "teardown")


@dataclass
class _Process:
    """One launched case process (a worker, or torchrun and its ranks) and its private folder."""
    key: tuple
    case: Case
    dist: DistArgs
    token: str
    tmp: Path
    proc: subprocess.Popen
    command: list
    spawned_at: float
    go: Path | None

    @property
    def out(self) -> Path:
        return self.tmp / "ranks"

    def discard(self) -> None:
        """End it and everything it started, and remove its folder."""
        if self.proc.poll() is None or processes_with_token(self.token):
            kill_all(self.proc, self.token)
        shutil.rmtree(self.tmp, ignore_errors=True)


_ahead: _Process | None = None
"""The next process, started while the current one was past its measured windows, waiting to be told
to go (imports done, no device touched)."""


def _key(case: Case, dist: DistArgs, root: Path, env: dict) -> tuple:
    return json.dumps(case.to_dict(), sort_keys=True), dist, str(root), tuple(sorted(env.items()))


def _spawn(case: Case, dist: DistArgs, root: Path, env: dict, ahead: bool) -> _Process:
    token = os.environ.get(TOKEN_PREFIX_VAR, "") + uuid.uuid4().hex
    tmp = Path(tempfile.mkdtemp(prefix=CASE_DIR_PREFIX))
    (tmp / OWNER_FILE).write_text(str(os.getpid()))
    case_file = tmp / "case.json"
    case_file.write_text(json.dumps(case.to_dict()))
    (tmp / "ranks").mkdir()
    go = tmp / "go" if ahead else None
    cmd = worker_command(case, case_file, tmp / "ranks", dist) + (["--go", str(go)] if go else [])
    full_env = worker_env(case, root, env, token)
    spawned_at = time.time()
    with open(tmp / "launcher.log", "wb") as logf:
        # its own session, so one signal reaches the whole group; the kernel kills it if we die
        proc = subprocess.Popen(cmd, cwd=root, env=full_env, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lifeline.preexec)
    return _Process(_key(case, dist, root, env), case, dist, token, tmp, proc, cmd, spawned_at, go)


def worker_env(case: Case, root: Path, env: dict, token: str) -> dict:
    """The variables a case's processes get: this process's, the case's token, the tree to import the
    worker from, the caches kept between processes, the case's NCCL and CUDA settings and the side's own."""
    out = dict(cached_env(root), **{TOKEN_VAR: token})
    out.update({k: str(v) for k, v in case.nccl_env})
    if case.cuda_max_connections:
        out[CUDA_CONNECTIONS_VAR] = str(case.cuda_max_connections)
    out.update(env)
    return out


def cached_env(root: Path) -> dict:
    """This process's variables with the tree at `root` to import from and the caches kept between
    processes: every process the suite starts gets them."""
    out = dict(os.environ, PYTHONPATH=_pythonpath(root))
    out[INDUCTOR_CACHE_VAR] = inductor_cache(out)
    if "PYTHONPYCACHEPREFIX" not in out:
        # compiled bytecode kept outside every tree: an image that forbids writing it (one H200 image sets
        # PYTHONDONTWRITEBYTECODE and ships no .pyc) compiles torch at each start, 8 s instead of 3
        out["PYTHONPYCACHEPREFIX"] = str(cache_root() / "pycache")
        out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def start_ahead(case: Case, dist: DistArgs = DistArgs(), root: Path | None = None) -> None:
    """Start the run's first process ahead, while the harness prepares (its data, the machine's
    priming): it imports, then waits, touching no device, until run_case lets it go."""
    global _ahead
    if _ahead is None and os.environ.get(START_AHEAD_VAR, "1") != "0" and dist.nnodes == 1 \
            and not dist.master_addr and not dist.rdzv_endpoint:
        _ahead = _spawn(case, dist, Path(root or REPO_ROOT), {}, ahead=True)


def discard_ahead() -> None:
    """End the process started ahead, if any (the run ended, or the next case is another)."""
    global _ahead
    if _ahead is not None:
        _ahead.discard()
        _ahead = None


atexit.register(discard_ahead)


def _may_start_ahead(current: _Process) -> bool:
    """The next process may start its imports once every local rank of the current one is past its
    measured windows (past its timed extra windows too, where it has some): it never runs beside a
    window. Not across nodes, whose rendezvous port two torchruns cannot share."""
    if os.environ.get(START_AHEAD_VAR, "1") == "0" or current.dist.nnodes > 1 or current.dist.master_addr \
            or current.dist.rdzv_endpoint:
        return False
    case = current.case
    timed_extras = case.overhead_check or case.profile_steps or (case.strategy == "ddp" and case.gpus > 1)
    wanted = ("teardown",) if timed_extras else PAST_THE_WINDOWS
    ranks = range(case.gpus) if case.launcher == "torchrun" else range(1)
    return all(read_heartbeat(current.out, r).get("phase") in wanted for r in ranks)


def run_case(case: Case, dist: DistArgs = DistArgs(), root: Path | None = None, env: dict | None = None,
             then: Case | None = None, then_root: Path | None = None, then_env: dict | None = None,
             on_phase=None) -> dict:
    """Run the case (its worker from the tree at `root`, this suite's by default, with `env` added);
    return status, reason, merged metrics, per-rank records and the launcher's marks. `then`, the case
    run next, is started ahead once this one is past its windows, so its interpreter and imports
    overlap this one's teardown; it waits, touching no device, until this process has ended
    (`then_root` and `then_env`: its tree and variables, where they are not this one's). `on_phase(text)`
    hears what rank 0 is doing (phase and step, from its heartbeat) whenever that changes."""
    global _ahead
    root, env = Path(root or REPO_ROOT), dict(env or {})
    reap_stale_case_folders()
    key = _key(case, dist, root, env)
    if _ahead is not None and _ahead.key == key and _ahead.proc.poll() is None:
        p, _ahead = _ahead, None
        go_at = time.time()
        p.go.touch()
    else:
        discard_ahead()
        p = _spawn(case, dist, root, env, ahead=False)
        go_at = p.spawned_at
    started = time.monotonic()
    timed_out, said = False, None
    try:
        while True:
            try:
                p.proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                if on_phase is not None:
                    beat = read_heartbeat(p.out, 0)
                    if beat and (beat.get("phase"), beat.get("step")) != said:
                        said = (beat.get("phase"), beat.get("step"))
                        on_phase(doing(beat))
                if time.monotonic() - started > case.timeout_s:
                    timed_out = True
                    kill_all(p.proc, p.token)
                    break
                if then is not None and _ahead is None and _may_start_ahead(p):
                    _ahead = _spawn(then, dist, Path(then_root or root), env if then_env is None else dict(then_env),
                                    ahead=True)
        if not timed_out and processes_with_token(p.token):
            kill_all(p.proc, p.token)  # a rank that outlived torchrun
        ended_at = time.time()
        wall = time.monotonic() - started
        result = merge(case, p.out, p.proc.returncode, timed_out, tail(p.tmp / "launcher.log", 200), dist)
    except BaseException:  # Ctrl-C: leave nothing running behind
        p.discard()
        discard_ahead()
        raise
    p.discard()
    result["wall_s"] = wall
    result["command"] = " ".join(p.command[1:])
    result["launch_marks"] = {"spawned": p.spawned_at, "go": go_at, "ended": ended_at}
    return result


def _pythonpath(root: Path) -> str:
    parts = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(parts)
