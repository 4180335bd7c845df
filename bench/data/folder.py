"""A user's (or a generated) ImageFolder tree of JPEGs, checked before any case reads it."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import DataError

JPEG_MAGIC = b"\xff\xd8\xff"


@dataclass
class Folder:
    root: Path
    files: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    classes: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.files)


def looks_like_jpeg(path: Path) -> bool:
    """JPEG start marker, and an end marker near the end (a truncated file has none)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(3) != JPEG_MAGIC:
                return False
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 1024))
            return b"\xff\xd9" in fh.read()
    except OSError:
        return False


def scan(root: Path | str) -> Folder:
    """List the JPEGs of an ImageFolder tree; non-JPEG or truncated files are counted and skipped."""
    root = Path(root)
    if not root.exists():
        raise DataError(f"data folder {root} does not exist; expected an ImageFolder tree (ROOT/<class>/<image>.jpg)")
    if not root.is_dir():
        raise DataError(f"data folder {root} is a file; expected an ImageFolder tree (ROOT/<class>/<image>.jpg)")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    if not classes:
        loose = any(f.is_file() for f in root.iterdir())
        raise DataError(f"data folder {root} has no class sub-folders"
                        + (" (images lie directly in it)" if loose else " (it is empty)")
                        + "; expected ROOT/<class>/<image>.jpg")
    folder = Folder(root, classes=classes)
    for label, name in enumerate(classes):
        for f in sorted((root / name).iterdir()):
            if not f.is_file():
                continue
            ok = looks_like_jpeg(f)
            if ok:
                folder.files.append(str(f))
                folder.labels.append(label)
            else:
                folder.skipped.append(str(f))
    if not folder.files:
        raise DataError(f"data folder {root} has {len(classes)} class folder(s) but no JPEG files"
                        + (f" ({len(folder.skipped)} other file(s) skipped)" if folder.skipped else ""))
    return folder


def check_size(folder: Folder, case) -> None:
    """The measured window must read fresh images, not replay a prefetched few."""
    per_rank = folder.count // (case.gpus if case.strategy == "ddp" else 1)
    window = case.steps * case.process_batch * case.accumulation_steps
    if per_rank < window:
        raise DataError(f"data folder {folder.root} has {folder.count} JPEGs ({per_rank} per rank) but one measured "
                        f"window of {case.case_id} reads {window} per rank; make at least "
                        f"{window * (case.gpus if case.strategy == 'ddp' else 1)} with `python -m bench data make`")
