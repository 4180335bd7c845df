"""Verdicts that respect the noise: pure maths on two figures and their 95% intervals.

A comparison says `faster`, `slower` or `within noise`, decided against the combined noise of both
sides (the half-widths of their intervals added in quadrature); without an interval on either side
it says `inconclusive`. A claim that X speeds training up `holds` when the gain exceeds that noise,
`does not hold` when even the top of the noise band stays below MIN_EFFECT_PCT (no gain worth the
name, or a loss), and is `inconclusive` otherwise.
"""
from __future__ import annotations

import math

FASTER, SLOWER, WITHIN, INCONCLUSIVE = "faster", "slower", "within noise", "inconclusive"
HOLDS, FAILS, CANNOT = "holds", "does not hold", "cannot be measured here"
SHARED = "inconclusive (GPU shared)"
"""A comparison or claim one of whose figures was measured beside someone else's work on the GPU
(core/sharing.py): its noise is not the machine's, so nothing can be judged from it."""
MIN_EFFECT_PCT = 3.0
"""The smallest gain that counts as the speed-up an article promises (T): an interval wholly within
+-T% is a conclusion too, "no effect worth having"."""


def half_width_pct(metrics: dict, within_process_ok: bool = False) -> float | None:
    """Half the 95% interval, in percent of the figure. Records from before intervals were stored
    (schema 1) have only their windows' range, which misses process-to-process noise: used only
    when asked for (`within_process_ok`)."""
    ips = metrics.get("images_per_s")
    ci = metrics.get("images_per_s_ci95")
    if ips and ci:
        return 100.0 * (ci[1] - ci[0]) / 2 / ips
    if ips and within_process_ok and "images_per_s_min" in metrics:
        return 100.0 * (metrics["images_per_s_max"] - metrics["images_per_s_min"]) / 2 / ips
    return None


def compare(a_ips: float, a_half_pct: float | None, b_ips: float, b_half_pct: float | None) -> dict:
    """B against A: the change in percent, the combined noise in percent, and the verdict."""
    delta = 100.0 * (b_ips - a_ips) / a_ips
    if a_half_pct is None or b_half_pct is None:
        return {"delta_pct": delta, "noise_pct": None, "verdict": INCONCLUSIVE}
    noise = math.hypot(a_half_pct, b_half_pct)
    verdict = FASTER if delta > noise else SLOWER if delta < -noise else WITHIN
    return {"delta_pct": delta, "noise_pct": noise, "verdict": verdict}


def compare_metrics(a: dict, b: dict, within_process_ok: bool = False) -> dict:
    """`compare` on two records' metrics: each figure with its own interval."""
    return compare(a["images_per_s"], half_width_pct(a, within_process_ok),
                   b["images_per_s"], half_width_pct(b, within_process_ok))


def interval_verdict(low_pct: float, high_pct: float, threshold_pct: float = MIN_EFFECT_PCT) -> str:
    """Does 'after is faster than before' hold, given the change's 95% interval? `does not hold` when it
    lies wholly within +-T% (whatever its sign: no effect worth having, the speed-up an article promises
    is not there) or below zero; `holds` when it lies above zero and reaches past T; `inconclusive`
    otherwise. Until 2026-12-06 an interval above zero held however small (+0.3%, +0.2% to +0.5%):
    a verdict frozen under that rule is shown in today's word beside its own (reworded)."""
    if (low_pct >= -threshold_pct and high_pct <= threshold_pct) or high_pct < 0:
        return FAILS
    if low_pct > 0:
        return HOLDS
    return INCONCLUSIVE


def reworded(verdict: str, interval_pct, threshold_pct: float = MIN_EFFECT_PCT) -> str | None:
    """Today's word for a frozen verdict whose interval today's rule reads otherwise, or None where it
    reads the same (or nothing can be re-read: no interval, a shared GPU, a count)."""
    if verdict not in (HOLDS, FAILS, INCONCLUSIVE) or not interval_pct:
        return None
    today = interval_verdict(interval_pct[0], interval_pct[1], threshold_pct)
    return today if today != verdict else None


def claim_verdict(delta_pct: float, noise_pct: float | None, threshold_pct: float = MIN_EFFECT_PCT) -> str:
    """`interval_verdict` for a change and its combined noise (both figures' own intervals)."""
    if noise_pct is None:
        return INCONCLUSIVE
    return interval_verdict(delta_pct - noise_pct, delta_pct + noise_pct, threshold_pct)

