"""The runs of the suite measuring on this machine's GPUs now, whatever checkout started them: each
writes a small file into one folder of the machine's temporary directory while it runs. NVML sees
another run only while one of its processes holds a GPU; between two of its processes (a few seconds
of start-up) the GPU is free. On one H100 a second `make bench` started in such a gap measured its
noise floor alone while the first, at its next process, found it and stopped: this file lets the
second refuse instead, naming the first. Entries are data from other users: read, checked, never run."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..core import untrusted
from ..core.procfs import stat_fields

FOLDER_NAME = "gpu-bench-runs"


def folder() -> Path:
    """<temporary directory>/gpu-bench-runs, shared by every user of the machine; BENCH_RUN_REGISTRY names
    another (the test suite keeps its own)."""
    return Path(os.environ.get("BENCH_RUN_REGISTRY") or Path(tempfile.gettempdir()) / FOLDER_NAME)


def start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot), so a reused pid is not taken for the run."""
    try:
        return int(stat_fields(Path(f"/proc/{pid}/stat").read_text())[19])  # proc(5)'s field 22, starttime
    except (OSError, ValueError, IndexError):
        return None


def register(run_id: str, gpus: list[str], checkout: str) -> Path | None:
    """This process's entry for its run on these GPUs (NVML ids); None where the folder cannot be written."""
    where = folder()
    try:
        where.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(where, 0o1777)  # every user's runs register here; each may remove only its own
        except PermissionError:
            pass
        entry = {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()), "run_id": run_id, "gpus": gpus,
                 "checkout": checkout}
        path = where / f"{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        tmp.replace(path)
        return path
    except OSError:
        return None


def release(path: Path | None) -> None:
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def others(gpus: list[str]) -> list[dict]:
    """The live runs of the suite, other than this process's, on any of these GPUs."""
    found = []
    for f in sorted(folder().glob("*.json")):
        try:
            e = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(e, dict) or untrusted.problem(e) or not isinstance(e.get("pid"), int) \
                or not isinstance(e.get("gpus"), list):
            continue
        if e["pid"] == os.getpid() or not set(map(str, e["gpus"])) & set(gpus):
            continue
        started = start_ticks(e["pid"])
        if started is None or started != e.get("start_ticks"):
            continue  # ended without removing its entry (killed), or its pid now names another process
        found.append({"pid": e["pid"], "run_id": str(e.get("run_id", ""))[:60],
                      "checkout": str(e.get("checkout", ""))[:200], "gpus": [str(g) for g in e["gpus"]]})
    return found
