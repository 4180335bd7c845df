"""The cases of `bench feed`: R = 1, 2, 4 ... N loader ranks at once on this host, each a whole input
pipeline as a training rank has it (no model runs). The CPU loaders run as gloo ranks on the CPU, so R
may pass the GPUs the machine has; DALI's mixed decoder needs a GPU per rank and stops at those present."""
from __future__ import annotations

from .case import AUTO, Case
from .errors import CaseError

FEED_LOADERS = ("torch", "dali-cpu", "dali-mixed")
DEFAULT_FEED_LOADERS = ("torch", "dali-cpu")
FEED_WINDOW_S, FEED_WINDOWS, FEED_PROCESSES = 2.0, 4, 3
"""A window long enough for every rank's workers to hand over whole rounds of batches, the same for every R
so the ladder's figures compare; and three fresh processes a rung, since a real loader's figure is judged
by its own processes alone (two leave one degree of freedom: an interval too wide to tell anything)."""


def rank_counts(n: int) -> list[int]:
    """1, 2, 4 ... below n, and n itself."""
    if n < 1:
        raise CaseError(f"--gpus={n} must be at least 1 (the loader ranks to feed)")
    counts, r = [], 1
    while r < n:
        counts.append(r)
        r *= 2
    return counts + [n]


def parse_loaders(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    wrong = [n for n in names if n not in FEED_LOADERS]
    if wrong or not names:
        raise CaseError(f"--loaders {text!r}: {', '.join(wrong) or 'none given'} not known; accepted: "
                        f"{', '.join(FEED_LOADERS)}, comma-separated")
    return names


def feed_case(base: Case, loader: str, ranks: int, cold: bool) -> Case:
    """One rung: `ranks` pipelines of `loader` at once, each with this host's cores shared out over them
    (workers for torch, threads for DALI, resolved when it runs and stored as a fact). The torch loader's
    batches stay on the host: with no GPU per rank there is nothing to pin them for, and they stay uint8,
    as a GPU rank's do until its GPU normalizes them (DALI's CPU pipeline normalizes on the host either way)."""
    on_gpu = loader == "dali-mixed"
    kw = {"num_workers": AUTO, "prefetch_factor": 2, "host_side_only": True} if loader == "torch" else {
        "dali_device": "mixed" if on_gpu else "cpu", "dali_threads": AUTO}
    return base.replace(name=f"feed-{loader}", device="cuda" if on_gpu else "cpu", strategy="ddp", gpus=ranks,
                        loader="dali" if loader.startswith("dali") else "torch", loader_only=True,
                        channels_last=True, precision="fp32", cold_reads=cold, **kw)


def feed_sweep(n: int, loaders: tuple[str, ...], cold: bool, base: Case, gpus_present: int) -> list[Case]:
    """Each loader at every R up to n (DALI mixed up to the GPUs present), warm, and cold too with `cold`."""
    cases = []
    for loader in loaders:
        top = min(n, gpus_present) if loader == "dali-mixed" else n
        for r in rank_counts(top) if top >= 1 else []:
            cases += [feed_case(base, loader, r, c) for c in ((False, True) if cold else (False,))]
    return cases
