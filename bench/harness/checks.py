"""Everything that can refuse a run, said in one line before anything is measured: GPUs, nodes,
data folders, and which device a command runs on where none is named."""
from __future__ import annotations

from ..core.case import Case
from ..core.errors import BenchError, CaseError, DataError  # noqa: F401
from ..data.folder import check_size, scan
from . import env as envmod
from .dist import DistArgs


def resolve_gpus(requested: int | None) -> tuple[int, str]:
    """(GPUs to use, device). No request: every visible GPU, or the CPU path where there is none."""
    visible = envmod.visible_gpu_count()
    if requested is None or requested == 0:
        return (visible, "cuda") if visible else (2, "cpu")
    if requested < 0:
        raise CaseError(f"--gpus={requested} must be a positive number of GPUs")
    if requested > visible:
        raise BenchError(f"--gpus={requested} asked, but this machine has {visible} visible GPU(s); "
                         f"ask for at most {visible}" + ("" if visible else " (or leave GPUS unset for the CPU sweep)"))
    return requested, "cuda"


def check_gpus(cases: list[Case], visible: int, dist: DistArgs = DistArgs()) -> None:
    """Refuse, before anything runs, cases that need more GPUs than this machine shows."""
    need = max((c.gpus // dist.nnodes for c in cases if c.device == "cuda"), default=0)
    if need > visible:
        raise BenchError(f"the cases need {need} GPU(s) on this machine but {visible} "
                            f"{'is' if visible == 1 else 'are'} visible; ask for at most {visible}")


def check_nodes(cases: list[Case], dist: DistArgs) -> None:
    """Refuse, before anything runs, a case whose GPUs do not divide over the nodes."""
    for c in cases:
        if c.launcher == "torchrun" and c.gpus % dist.nnodes:
            raise BenchError(f"{c.case_id} needs gpus={c.gpus}, which does not divide over "
                                f"--nnodes={dist.nnodes}; use a multiple of {dist.nnodes}")


def check_data(cases: list[Case]) -> None:
    """Refuse, before anything runs, a missing or too small data folder."""
    folders = {}
    for c in cases:
        if c.loader in ("torch", "dali"):
            try:
                folder = folders.get(c.data_dir) or folders.setdefault(c.data_dir, scan(c.data_dir))
                check_size(folder, c)
            except DataError:
                raise
    for folder in folders.values():
        if folder.skipped:
            print(f"note: {len(folder.skipped)} non-JPEG or truncated file(s) in {folder.root} are skipped "
                  f"({folder.count} JPEGs used)")
