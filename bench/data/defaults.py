"""Where the generated JPEGs of the sweeps that need data live: outside the repository, made once
and reused."""
from __future__ import annotations

from pathlib import Path

from ..core.host_cache import cache_root
from .generate import make_dataset

DEFAULT_CLASSES = 100


def default_data_dir() -> Path:
    return cache_root() / "imagenet-like"


def default_data_short(folder: Path, needed: int) -> bool:
    """Whether the default folder lacks some of the `needed` JPEGs (or two per class)."""
    have = len(list(folder.glob("class_*/*.jpg"))) if folder.is_dir() else 0
    return have < max(needed, 2 * DEFAULT_CLASSES)


def ensure_default_data(folder: Path, needed: int) -> None:
    """At least `needed` JPEGs (and two per class) in the default folder, made now if missing."""
    want = max(needed, 2 * DEFAULT_CLASSES)
    if default_data_short(folder, needed):
        print(f"making {want} ImageNet-like JPEGs in {folder} (once; later runs reuse them)")
        make_dataset(folder, want, DEFAULT_CLASSES)
