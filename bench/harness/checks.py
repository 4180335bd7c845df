"""Everything that can refuse a run, said in one line before anything is measured: GPUs, nodes,
data folders, and which device a command runs on where none is named."""
from __future__ import annotations

from ..analysis import flops
from ..core import model_flops, models
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


def check_models(cases: list[Case]) -> None:
    """Each distinct network takes its case's image size: one forward pass on the meta device (no
    memory, no arithmetic), whose FLOPs count is kept for the worker and the report; refused
    in one line naming what the model needs, before anything runs."""
    seen = set()
    for c in cases:
        key = (c.model, c.model_source, c.image_size, c.num_classes)
        if c.loader_only or key in seen:
            continue
        seen.add(key)
        try:
            flops.training_flops_per_image(c.model, c.image_size, c.num_classes, c.model_path, c.model_source)
        except CaseError:
            raise
        except Exception as e:
            raise CaseError(f"model={c.model!r} cannot train on image_size={c.image_size}: {first_line(e)}"
                            + smallest_size_hint(c)) from None


def first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__


def smallest_size_hint(c: Case, largest: int = 512) -> str:
    """A size that trains, where the one asked does not: for a model built for its size (a ViT's patches
    must tile the image) the next that does, else the smallest, bisected up to `largest` (no hint where
    none trains)."""
    def trains(size: int) -> bool:  # a forward on the meta device, not a FLOPs count (7.8 s of them from a cold cache)
        try:
            return model_flops.takes_size(model_flops.on_meta(
                lambda: models.build(c.model, c.num_classes, size, c.model_path, c.model_source)), size)
        except Exception:
            return False
    if models.constructor_kwargs(c.model, c.image_size).keys() & {"image_size", "input_size"}:
        found = next((s for s in range(c.image_size + 1, c.image_size + 33) if trains(s)), None)
        return f"; the next size it trains on is {found}" if found else ""
    if not trains(largest):
        return ""
    low, high = c.image_size, largest  # fails at low, trains at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if trains(mid) else (mid, high)
    return f"; the smallest size it trains on (bisected up to {largest} px) is {high}"
