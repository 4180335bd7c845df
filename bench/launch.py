"""Run one case in fresh processes with a timeout: a plain process (single, dp) or torchrun (ddp).

The launcher knows nothing of models: it starts `bench.worker`, waits, kills what overstays,
and turns the per-rank records (or their absence) into one status with a reason.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import lifeline, stats
from .case import Case
from .env import REPO_ROOT

TOKEN_VAR = "BENCH_RUN_TOKEN"
TOKEN_PREFIX_VAR = "BENCH_TOKEN_PREFIX"
"""A prefix for every case token this process starts, so a test (or a wrapper) can follow exactly
the processes it started, however many other bench jobs run on the machine."""
CASE_DIR_PREFIX = "bench-case-"
OWNER_FILE = "owner.pid"


@dataclass(frozen=True)
class DistArgs:
    """torchrun's own rendezvous, passed through so one case can span several machines."""
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str = ""
    master_addr: str = ""
    master_port: int = 0

    def nproc_per_node(self, case: Case) -> int:
        if case.gpus % self.nnodes:
            raise ValueError(f"gpus={case.gpus} does not divide over nnodes={self.nnodes}")
        return case.gpus // self.nnodes


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


def tail(path: Path, lines: int = 20) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


_NOISE = re.compile(r"Warning|warnings\.warn|^\s*$|^[=\-*#_ ]{5,}$|^[WI]\d{4} ")


def meaningful(lines: list[str], keep: int = 12) -> list[str]:
    """The last lines worth reading: no warnings (nor the source lines they echo), no rulers, no blanks."""
    out, after_warning = [], False
    for ln in lines:
        if "Warning" in ln or "warnings.warn" in ln:
            after_warning = True
            continue
        if after_warning and ln.startswith((" ", "\t")):
            continue  # the source line a warning quotes
        after_warning = False
        if not _NOISE.search(ln):
            out.append(ln.rstrip())
    return out[-keep:]


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


def read_ranks(out: Path) -> list[dict]:
    gathered = out / "ranks.json"
    if gathered.is_file():
        return json.loads(gathered.read_text())["ranks"]
    ranks = []
    for f in sorted(out.glob("rank*.json")):
        try:
            ranks.append(json.loads(f.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(ranks, key=lambda r: r["rank"])


def root_cause(launcher_lines: list[str]) -> tuple[int | None, int | None]:
    """(rank, exit code) of the failure torchrun names first; a negative code is a signal."""
    text = "\n".join(launcher_lines)
    m = re.search(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", text, re.S)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def exit_text(code: int | None) -> str:
    """`exit code 3`, or the signal's name for a negative code (`killed by SIGKILL`)."""
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def read_heartbeat(out: Path, rank: int) -> dict:
    try:
        return json.loads((out / f"rank{rank}.heartbeat").read_text())
    except (OSError, ValueError):
        return {}


def doing(beat: dict) -> str:
    if not beat:
        return "no heartbeat (before start-up)"
    step = f", step {beat['step'] + 1}" if beat.get("step") is not None else ""
    return f"{beat['phase']}{step}, {beat.get('elapsed_s', 0):.0f} s after start"


def oom_killer_hint(beat: dict) -> str:
    """SIGKILL is what the kernel's out-of-memory killer sends: say what memory the rank held."""
    rss = beat.get("max_rss_bytes")
    total = _mem_total_bytes()
    if not rss:
        return "; SIGKILL is also what the kernel's out-of-memory killer sends (`dmesg` says if it did)"
    share = f" of {total / 2**30:.0f} GiB" if total else ""
    return (f"; SIGKILL is also what the kernel's out-of-memory killer sends: the rank held "
            f"{rss / 2**30:.1f} GiB{share} at its last heartbeat (`dmesg` says if it did)")


def _mem_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def merge(case: Case, out: Path, returncode, timed_out: bool, launcher_tail: list[str], dist: DistArgs) -> dict:
    ranks = read_ranks(out)
    expected = case.gpus if case.launcher == "torchrun" else 1
    first_rank = 0
    if dist.nnodes > 1:
        expected = dist.nproc_per_node(case)
        first_rank = dist.node_rank * expected
    local = range(first_rank, first_rank + expected)
    by_status = {}
    for r in ranks:
        by_status.setdefault(r["status"], []).append(r)
    result = {"ranks": ranks, "metrics": {}, "returncode": returncode}
    seen = {r["rank"] for r in ranks}
    if timed_out:
        running = [i for i in local if i not in seen]
        result.update(status="timeout", reason=f"no result within timeout_s={case.timeout_s:g}; every process of the case "
                      "was killed; still running then: " + "; ".join(f"rank {i} ({doing(read_heartbeat(out, i))})"
                                                                    for i in running),
                      stderr_tail=[f"rank {i}: {ln}" for i in running for ln in meaningful(tail(out / f"rank{i}.stderr", 200), 6)])
    elif "oom" in by_status:
        r = by_status["oom"][0]
        result.update(status="oom", reason=f"rank {r['rank']}: {r['reason']}")
    elif len(ranks) < expected and (returncode != 0 or not ranks):
        # a rank that left no record died first; errors on the others are its echo
        dead, code = root_cause(launcher_tail) if case.launcher == "torchrun" else (first_rank, returncode)
        if case.launcher == "torchrun" and returncode is not None and returncode < 0:
            dead, code, who = None, returncode, f"the launcher (torchrun) was {exit_text(returncode)}"
        else:
            if dead is None or dead in seen:
                dead = next(i for i in local if i not in seen)
            who = f"rank {dead} died ({exit_text(code)})"
        beat = read_heartbeat(out, first_rank if dead is None else dead)
        lines = meaningful(tail(out / f"rank{dead}.stderr", 200)) if dead is not None else []
        last = lines[-1].strip()[:300] if lines else "no output"
        hint = oom_killer_hint(beat) if code == -signal.SIGKILL and dead is not None else ""
        result.update(status="error", reason=f"{who} during {doing(beat)}: {last}{hint}",
                      stderr_tail=lines or meaningful(launcher_tail, 20))
    elif "error" in by_status:
        r = by_status["error"][0]
        result.update(status="error", reason=f"rank {r['rank']}: {r['reason']}",
                      stderr_tail=meaningful(tail(out / f"rank{r['rank']}.stderr", 200)))
    elif "skipped" in by_status:
        result.update(status="skipped", reason=by_status["skipped"][0]["reason"])
    elif returncode != 0 or len(ranks) < expected:
        result.update(status="error", reason=f"the launcher ended ({exit_text(returncode)}) after {len(ranks)} of "
                      f"{expected} rank record(s)", stderr_tail=meaningful(launcher_tail, 20))
    else:
        result.update(status="ok", reason="", metrics=summarise(case, ranks))
    return result


def summarise(case: Case, ranks: list[dict]) -> dict:
    m = stats.merge_ranks(ranks, case.gpus)
    steps = sorted(t for r in ranks for rep in r["step_times_s"] for t in rep)
    m["step_time_median_s"] = steps[len(steps) // 2]
    m["peak_memory_bytes"] = max(r["peak_memory_bytes"] for r in ranks)
    m["peak_memory_kind"] = ranks[0]["peak_memory_kind"]
    m["first_step_s"] = max(r["first_step_s"] for r in ranks)
    m["allreduce_calls_per_step"] = ranks[0].get("allreduce_calls_per_step")
    m["compute_dtypes"] = {k: v for r in ranks for k, v in r.get("compute_dtypes", {}).items()}
    m["steps_per_window"] = ranks[0].get("steps_per_window")
    m["global_batch"] = case.global_batch
    m["images_per_step"] = case.images_per_step
    return m
