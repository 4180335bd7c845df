"""What a rank's input costs the storage under it: the bytes its process tree made the kernel fetch from
storage (/proc/<pid>/io read_bytes: a read the page cache answers adds nothing), and emptying the page
cache of a data folder's files, so that their next reads come from storage (cold reads)."""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..core import procfs


def tree_read_bytes(root_pid: int | None = None, proc: Path = Path("/proc"), table: dict | None = None) -> int | None:
    """Bytes fetched from storage by this process and every live process it started (a DataLoader's
    workers), or None where the kernel keeps no I/O accounting here. `table`: a listing
    (core/procfs.process_table) the caller has just read."""
    pids = procfs.tree(root_pid or os.getpid(), procfs.process_table(proc) if table is None else table)
    total, seen = 0, False
    for pid in pids:
        try:
            lines = (proc / str(pid) / "io").read_text().splitlines()
        except OSError:
            continue  # gone, or another user's
        for line in lines:
            if line.startswith("read_bytes:"):
                total, seen = total + int(line.split()[1]), True
    return total if seen else None


def evict(files: list[str]) -> float:
    """Drop the files' pages from the page cache (their dirty pages written back first, which
    DONTNEED would otherwise keep); the seconds it took. Needs no root: only the caller's own reads of
    these files are affected, and a file the kernel cannot drop (tmpfs) simply stays."""
    t = time.perf_counter()
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue  # a file gone since the scan: the loader skips it too
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return time.perf_counter() - t


def data_facts(files: list[str]) -> dict:
    """The data set's size beside the host's memory: a set that fits is read from the page cache once
    warm, whatever the storage under it."""
    size = 0
    for f in files:
        try:
            size += os.path.getsize(f)
        except OSError:
            continue
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = None
    return {"data_set_bytes": size, "host_memory_bytes": memory}
