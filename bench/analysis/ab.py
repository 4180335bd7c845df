"""Planning and judging a side-by-side A/B: the order processes run in, how many pairs the noise
floor says a threshold needs and the budget allows, and one verdict row per case from its pairs
(core/paired.py), in compare's row format so compare's text and JSON carry it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

from ..core import paired
from ..core.labels import duration
from . import compare as comparemod

ORDER_RULE = ("pair i runs A then B when i is even, B then A when odd (ABBA), every case in turn within a round, "
              "so drift and a process's effect on the next fall on both sides alike")


def interleaving(cases: int, first_pair: int, pairs: int) -> list[tuple[int, int, str]]:
    """(pair, case index, side) in the order they run, for `pairs` rounds from `first_pair`."""
    order = []
    for p in range(first_pair, first_pair + pairs):
        for c in range(cases):
            order += [(p, c, s) for s in (("a", "b") if p % 2 == 0 else ("b", "a"))]
    return order


@dataclass(frozen=True)
class PairPlan:
    pairs: int
    """Pairs to run first (more follow only while a case is still undecided and time is left)."""
    needed: int | None
    """Pairs the threshold needs at the floor's noise; None when no count up to MAX_PAIRS does."""
    fits: int
    """Pairs the budget allows at the expected seconds per round."""
    message: str


def plan_pairs(floor: dict | None, threshold_pct: float, budget_s: float, round_s: float,
               asked: int | None = None) -> PairPlan:
    """K from the noise: the fewest pairs whose half-width is at most half the threshold at the floor's
    process-to-process sd (paired.pairs_needed), capped by what the budget allows; `asked` (--pairs)
    overrides the rule. The message says when the budget cannot reach the threshold."""
    fits = max(0, math.floor(budget_s / round_s)) if round_s > 0 else paired.MAX_PAIRS
    if asked:
        return PairPlan(asked, None, fits, f"{asked} pairs as asked (--pairs)")
    if not floor or "rel_sd" not in floor:
        k = min(max(paired.MIN_PAIRS, fits), paired.MAX_PAIRS)
        return PairPlan(k, None, fits, f"no noise floor to plan by: {k} pairs, what the budget allows")
    needed = paired.pairs_needed(floor["rel_sd"], threshold_pct, floor["n"])
    sd = f"the floor's process-to-process sd {100 * floor['rel_sd']:.2f}%"
    if needed is not None and needed <= fits:
        return PairPlan(needed, needed, fits, f"{needed} pairs decide {threshold_pct:g}% at {sd} "
                                              f"(about {duration(needed * round_s)})")
    k = max(paired.MIN_PAIRS, min(fits, paired.MAX_PAIRS))
    want = (f"needs about {needed} pairs ({duration(needed * round_s)})" if needed
            else f"needs more than {paired.MAX_PAIRS} pairs")
    return PairPlan(k, needed, fits, f"cannot decide at {threshold_pct:g}% within {duration(budget_s)} at {sd}: "
                                     f"{want}; running {k}, whose verdicts say what they can")


def undecided(change: dict, threshold_pct: float) -> bool:
    """A case whose interval is still wider than half the threshold (or has none)."""
    return change.get("noise_pct") is None or change["noise_pct"] > threshold_pct / 2


def row(case_id: str, sweep: str, a: list[float], b: list[float], floor: dict | None,
        failed: dict | None = None) -> dict:
    """compare's row for one case: medians of each side, the paired change, its half-width and verdict.
    `failed`: {side: reason} when a process of the case failed (its pairs stop there)."""
    out = {"case": case_id, "sweep": sweep, "a_images_per_s": median(a) if a else None, "b_images_per_s": median(b) if b else None,
           "delta_pct": None, "noise_pct": None, "note": "", "a_file": None, "b_file": None,
           "pairs": min(len(a), len(b)), "a_images_per_s_processes": a, "b_images_per_s_processes": b}
    if failed:
        side, reason = next(iter(failed.items()))
        verdict = comparemod.NEITHER if len(failed) == 2 else (
            comparemod.FAILED_IN_B if side == "b" else comparemod.FAILED_IN_A)
        return {**out, "verdict": verdict, "note": f"{side}: {reason}"[:300]}
    k = min(len(a), len(b))
    if k == 0:
        return {**out, "verdict": comparemod.NOT_IN_BOTH, "note": "no pair was measured"}
    c = paired.paired_change(a[:k], b[:k], floor)
    return {**out, "delta_pct": c["delta_pct"], "noise_pct": c["noise_pct"], "verdict": c["verdict"],
            "ci95_pct": c["ci95_pct"], "df": c["df"],
            "note": f"{k} pairs" + (f", pooled with the floor's {floor['n']} processes" if floor else "")}


