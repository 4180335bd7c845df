"""`bench data make|check`: ImageNet-like JPEGs, or a check of a folder before use."""
from __future__ import annotations

from pathlib import Path

from ..data.folder import scan
from ..core.errors import DataError
from ..data.generate import make_dataset, make_dataset_of_size


def add(sub) -> None:
    d = sub.add_parser("data", help="make an ImageNet-like JPEG folder, or check one",
                       description="Make an ImageNet-like JPEG ImageFolder tree, or check a folder before use. "
                                   "Exit 0; 2 for a folder that cannot be used.")
    dsub = d.add_subparsers(dest="action", required=True, help="make: write JPEGs; check: count a folder's usable ones")
    mk = dsub.add_parser("make", help="write N JPEGs in C class folders (deterministic, resumable)")
    size = mk.add_mutually_exclusive_group(required=True)
    size.add_argument("--images", type=int, help="how many JPEGs")
    size.add_argument("--gib", type=float, help="at least this many GiB of JPEGs (a set larger than the host's memory "
                                                "keeps warm reads honest; 100 classes unless --classes)")
    mk.add_argument("--classes", type=int, default=None,
                    help="class folders (default: about ten images each, at most 100)")
    mk.add_argument("--out", required=True, help="the folder to write (class_NNNN/img_NNNNNNNN.jpg under it)")
    mk.add_argument("--seed", type=int, default=0, help="seed of the images' content (default 0)")
    mk.add_argument("--workers", type=int, default=None, help="processes (default: every core)")
    ck = dsub.add_parser("check", help="count the usable JPEGs of an ImageFolder tree")
    ck.add_argument("dir", help="the ImageFolder tree (ROOT/<class>/<image>.jpg)")
    d.set_defaults(func=command)


def command(a) -> int:
    if a.action == "make" and a.gib is not None:
        if not a.gib > 0:
            raise DataError(f"--gib={a.gib} must be a positive size in GiB")
        make_dataset_of_size(Path(a.out), int(a.gib * 2**30), a.classes, a.seed, a.workers)
    elif a.action == "make":
        make_dataset(Path(a.out), a.images, a.classes, a.seed, a.workers)
    else:
        folder = scan(a.dir)
        print(f"{folder.root}: {folder.count} JPEGs in {len(folder.classes)} classes"
              + (f"; {len(folder.skipped)} non-JPEG or truncated file(s) skipped" if folder.skipped else ""))
    return 0
