"""What a case's processes left behind, turned into one status with a reason: ok with merged
metrics, or oom, error, timeout or skipped, naming the rank that failed first and what it was doing."""
from __future__ import annotations

import json
import re
import signal
from pathlib import Path

from ..core import stats
from ..core.case import Case
from .dist import DistArgs


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


def exit_codes(launcher_lines: list[str]) -> dict[int, int]:
    """Every rank torchrun lists as failed, with its exit code (a negative one is a signal)."""
    text = "\n".join(launcher_lines)
    return {int(r): int(c) for r, c in re.findall(r"^\s*rank\s*:\s*(\d+).*\n\s*exitcode\s*:\s*(-?\d+)", text, re.M)}


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
                # torchrun's first failure was a rank that still wrote its record (its echo): the one that
                # left none died first, with its own exit code where torchrun lists it
                dead = next(i for i in local if i not in seen)
                code = exit_codes(launcher_tail).get(dead, code) if case.launcher == "torchrun" else code
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
