"""Run one case in fresh processes with a timeout: a plain process (single, dp) or torchrun (ddp).

The launcher knows nothing of models: it starts `bench.worker`, waits, kills what overstays,
and turns the per-rank records (or their absence) into one status with a reason.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import stats
from .case import Case
from .env import REPO_ROOT

TOKEN_VAR = "BENCH_RUN_TOKEN"


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


def kill_all(proc: subprocess.Popen, token: str, grace_s: float = 5.0) -> None:
    """SIGTERM the case's process group and every process carrying its token, then SIGKILL."""
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


def run_case(case: Case, dist: DistArgs = DistArgs()) -> dict:
    """Run the case; return status, reason, merged metrics and per-rank records."""
    token = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="bench-case-") as tmp:
        tmp = Path(tmp)
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
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True)
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
        result = merge(case, out, proc.returncode, timed_out, tail(log, 60), dist)
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


def root_cause_rank(launcher_lines: list[str]) -> int | None:
    """The rank torchrun names as the first observed failure, if it printed one."""
    text = "\n".join(launcher_lines)
    m = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", text, re.S)
    return int(m.group(1)) if m else None


def merge(case: Case, out: Path, returncode, timed_out: bool, launcher_tail: list[str], dist: DistArgs) -> dict:
    ranks = read_ranks(out)
    expected = case.gpus if case.launcher == "torchrun" else 1
    if dist.nnodes > 1 and dist.node_rank != 0:
        expected = dist.nproc_per_node(case)
    by_status = {}
    for r in ranks:
        by_status.setdefault(r["status"], []).append(r)
    result = {"ranks": ranks, "metrics": {}, "returncode": returncode}
    if timed_out:
        done = sorted(r["rank"] for r in ranks)
        result.update(status="timeout", reason=f"no result within timeout_s={case.timeout_s:g}; every process of the case was killed"
                      + (f" (ranks {done} had finished)" if done else ""))
    elif "oom" in by_status:
        r = by_status["oom"][0]
        result.update(status="oom", reason=f"rank {r['rank']}: {r['reason']}")
    elif len(ranks) < expected and (returncode != 0 or not ranks):
        # a rank that left no record died first; errors on the others are its echo
        seen = {r["rank"] for r in ranks}
        dead = root_cause_rank(launcher_tail)
        if dead is None or dead in seen:
            dead = next(i for i in range(expected) if i not in seen)
        lines = tail(out / f"rank{dead}.stderr") or launcher_tail
        last = next((ln for ln in reversed(lines) if ln.strip()), "no output")
        result.update(status="error", reason=f"rank {dead} died (exit code {returncode}): {last.strip()[:300]}",
                      stderr_tail=lines)
    elif "error" in by_status:
        r = by_status["error"][0]
        result.update(status="error", reason=f"rank {r['rank']}: {r['reason']}",
                      stderr_tail=tail(out / f"rank{r['rank']}.stderr"))
    elif "skipped" in by_status:
        result.update(status="skipped", reason=by_status["skipped"][0]["reason"])
    elif returncode != 0 or len(ranks) < expected:
        result.update(status="error", reason=f"the launcher exited with code {returncode} after {len(ranks)} of "
                      f"{expected} rank record(s)", stderr_tail=launcher_tail)
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
