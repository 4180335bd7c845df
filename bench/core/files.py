"""The one atomic write: a reader sees either the old file or the whole new one, never half."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: Path | str, replace: bool = True, fsync: bool = True):
    """Yield a temporary path beside `path` to write; when the block ends without error it becomes
    `path` in one step. With replace=False an existing file is never touched (FileExistsError),
    even by a racing writer: no run replaces another. fsync=False for files rewritten every second
    (a heartbeat), where a lost last version costs nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        if fsync:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the path exists
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_json_atomic(path: Path | str, data: dict, replace: bool = True, fsync: bool = True,
                      indent: int | None = 1) -> None:
    """`data` as JSON at `path`, atomically (see atomic_path)."""
    with atomic_path(path, replace, fsync) as tmp:
        tmp.write_text(json.dumps(data, indent=indent, sort_keys=indent is not None, default=str))
