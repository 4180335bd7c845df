"""Plots drawn once per set of records: a report drew each machine and commit's PNGs again on every call
(7.8 s of `bin/bench report`'s 11.3 under a profiler on a 2-core machine, for 36 plots), though the stored
records they show rarely changed. The PNGs are kept in the suite's cache folder under a digest of everything that decides them:
the records as stored, the titles' machine and commit, the suite's own code and matplotlib's version.
Any change to one of them draws them again."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from importlib import metadata
from pathlib import Path

from ..core.host_cache import cache_root
from ..store.record import READ_PATH

KEEP = 400
"""Sets of plots kept; the least recently used beyond it are removed."""
OFF_VAR = "BENCH_PLOT_CACHE"  # "0": always draw


@functools.cache
def code_digest() -> str:
    """The suite's source as it is now: a plot's look and its verdict colours come from it."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for f in sorted(package.rglob("*.py")):
        h.update(str(f.relative_to(package)).encode() + b"\0" + f.read_bytes())
    try:
        h.update(metadata.version("matplotlib").encode())
    except metadata.PackageNotFoundError:
        pass
    return h.hexdigest()


def key(records, where: tuple) -> str:
    # the records as stored: the file's own path, added as it is read, would give each checkout of
    # one tree plots of its own (14.7 s of drawing for `bench report` in a fresh clone, against 2.9 s)
    data = sorted(json.dumps(stored(r.data), sort_keys=True, default=str) for r in records)
    h = hashlib.sha256(json.dumps([code_digest(), list(where), data]).encode())
    return h.hexdigest()[:32]


def stored(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != READ_PATH}


def folder(digest: str) -> Path:
    return cache_root() / "plots" / digest


def fetch(digest: str, out: Path) -> list[Path] | None:
    """The plots kept under `digest`, copied into `out`; None where none are kept (or the cache is off)."""
    if os.environ.get(OFF_VAR, "1") == "0":
        return None
    kept = folder(digest)
    try:
        names = json.loads((kept / "plots.json").read_text())
        made = []
        for name in names:
            if Path(name).name != name or name.startswith("."):
                return None  # only the plain file names it wrote
            out.mkdir(parents=True, exist_ok=True)
            made.append(Path(shutil.copyfile(kept / name, out / name)))
    except (OSError, ValueError):
        return None
    os.utime(kept)  # recently used
    return made


def keep(digest: str, made: list[Path]) -> None:
    """Keep what was just drawn; a cache that cannot be written is no error (the plots are in `out`)."""
    if os.environ.get(OFF_VAR, "1") == "0":
        return
    kept = folder(digest)
    tmp = kept.with_name(kept.name + f".tmp{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        for p in made:
            shutil.copyfile(p, tmp / p.name)
        (tmp / "plots.json").write_text(json.dumps([p.name for p in made]))
        if kept.exists():
            shutil.rmtree(tmp)
        else:
            tmp.rename(kept)
        _trim(kept.parent)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def _trim(root: Path) -> None:
    sets = sorted((p for p in root.iterdir() if p.is_dir() and ".tmp" not in p.name), key=lambda p: p.stat().st_mtime)
    for old in sets[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
