"""Two trees measured side by side: the change from paired fresh processes, and how many pairs a
threshold needs.

Pair i holds one process of side A and one of side B run back to back; d_i = ln(B_i / A_i), so drift
slower than a pair falls on both sides and cancels. The variance of d is pooled from the pairs' own
spread (K - 1 degrees of freedom) and, where a noise floor of n_f fresh processes of a synthetic case
was measured in the same run, from it: a difference of two processes has twice one process's
variance, 2 * rel_sd^2, with n_f - 1 degrees of freedom (as ci95 pools a case with the floor). The 95%
interval of the mean of d is t(0.975, df) * sqrt(pooled / K) either side; the change is `faster` or
`slower` when the interval excludes zero, else `within noise`; with no degree of freedom it is
`inconclusive`.
"""
from __future__ import annotations

import math
import statistics

from .stats import t975
from .verdicts import FASTER, INCONCLUSIVE, SLOWER, WITHIN, interval_verdict

MIN_PAIRS = 2
MAX_PAIRS = 200


def paired_change(a: list[float], b: list[float], floor: dict | None = None) -> dict:
    """B against A from K pairs of figures (a[i] and b[i] ran back to back): change and its 95%
    interval in percent, the half-width in percent, degrees of freedom and verdict."""
    if len(a) != len(b) or not a:
        raise ValueError(f"pairs need as many figures on each side, at least one: {len(a)} and {len(b)}")
    k = len(a)
    d = [math.log(y / x) for x, y in zip(a, b)]
    mean = statistics.fmean(d)
    df_pairs = k - 1
    var_pairs = statistics.variance(d) if k > 1 else 0.0
    df_floor = floor["n"] - 1 if floor else 0
    var_floor = 2 * floor["rel_sd"] ** 2 if floor else 0.0
    df = df_pairs + df_floor
    out = {"pairs": k, "delta_pct": 100 * math.expm1(mean), "df": df, "pair_sd_pct": 100 * math.sqrt(var_pairs),
           "log_ratios": d}
    if df < 1:
        return {**out, "noise_pct": None, "ci95_pct": None, "verdict": INCONCLUSIVE}
    half = t975(df) * math.sqrt((df_pairs * var_pairs + df_floor * var_floor) / df / k)
    low, high = 100 * math.expm1(mean - half), 100 * math.expm1(mean + half)
    verdict = FASTER if low > 0 else SLOWER if high < 0 else WITHIN
    return {**out, "noise_pct": 100 * math.expm1(half), "ci95_pct": [low, high], "verdict": verdict}


def half_width_pct(rel_sd: float, pairs: int, floor_n: int) -> float:
    """The half-width K pairs would give if each process varies by rel_sd (pooled with a floor of
    floor_n processes, 0 for none)."""
    df = pairs - 1 + max(0, floor_n - 1)
    return 100 * math.expm1(t975(max(df, 1)) * math.sqrt(2 * rel_sd ** 2 / pairs))


def pairs_needed(rel_sd: float, threshold_pct: float, floor_n: int) -> int | None:
    """Fewest pairs (at least MIN_PAIRS) whose half-width is at most half the threshold, so that a true
    change of the threshold's size is called with about 97.5% power while an A/A raises an alarm 5%
    of the time; None beyond MAX_PAIRS."""
    for k in range(MIN_PAIRS, MAX_PAIRS + 1):
        if half_width_pct(rel_sd, k, floor_n) <= threshold_pct / 2:
            return k
    return None


def claim_judgement(a: list[float], b: list[float], threshold_pct: float) -> dict:
    """A claim that B speeds A up, judged by its own pairs alone (no borrowed noise): paired_change,
    then `holds`, `does not hold` or `inconclusive` (verdicts.interval_verdict against +-threshold_pct)
    and, while inconclusive, `more_pairs`: about how many more pairs at the spread seen would decide it
    (None beyond MAX_PAIRS or with no spread to go by)."""
    c = paired_change(a, b)
    if c["ci95_pct"] is None:
        return {**c, "claim_verdict": INCONCLUSIVE, "threshold_pct": threshold_pct, "more_pairs": None}
    low, high = c["ci95_pct"]
    verdict = interval_verdict(low, high, threshold_pct)
    more = None
    if verdict == INCONCLUSIVE and c["pair_sd_pct"] > 0:
        mean = math.log1p(c["delta_pct"] / 100)
        sd = c["pair_sd_pct"] / 100
        # the interval decides once its half-width is below |mean| (it clears zero) or below
        # T - |mean| (it fits within +-T), whichever comes first
        room = max(abs(mean), math.log1p(threshold_pct / 100) - abs(mean))
        more = next((k - c["pairs"] for k in range(c["pairs"] + 1, MAX_PAIRS + 1)
                     if t975(k - 1) * sd / math.sqrt(k) < room), None)
    return {**c, "claim_verdict": verdict, "threshold_pct": threshold_pct, "more_pairs": more}
