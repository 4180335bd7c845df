"""A claim as an experiment: two cases of one sweep that differ only in the claim's knobs, the right
way round, measured in the same run with their processes interleaved and judged by their own paired
differences (core/paired.claim_judgement). This module finds the experiments a list of cases holds
and judges their pairs; harness/experiments.py runs them; the verdicts are stored in the run's
manifest and never change afterwards."""
from __future__ import annotations

from dataclasses import dataclass

from ..core import paired
from ..core.identity import acting, differing_fields
from ..core.verdicts import FAILS, HOLDS, MIN_EFFECT_PCT
from .claims import CLAIMS, Claim

MIN_PAIRS = 2
"""Pairs before a verdict is drawn: one degree of freedom, so two pairs decide only a large or a very
steady effect (t = 12.7). On one H100 a third round of all seven one-GPU cases changed no verdict that
two pairs had decided and cost 160 s that the one undecided claim (dali) needed."""


@dataclass(frozen=True)
class Experiment:
    claim: Claim
    before: object
    after: object
    """Cases (core/case.Case) or stored case dicts."""

    @property
    def counted(self) -> bool:
        """An exact count (all-reduces per step) needs one pair and no noise."""
        return self.claim.kind == "fewer-allreduces"


def _fields(case) -> dict:
    return acting(case)


def tests_claim(claim: Claim, before, after) -> bool:
    """Whether the pair tests the claim: same GPU count (enough of them), not loader-only, differing
    only in the claim's knobs, and `after` is the side holding the change."""
    a, b = _fields(before), _fields(after)
    if a["gpus"] != b["gpus"] or a["gpus"] < claim.min_gpus or a["loader_only"] or b["loader_only"]:
        return False
    diff = differing_fields(before, after)
    return bool(diff) and diff <= set(claim.knobs or ()) and bool(claim.after_is(a, b))


def find(cases: list) -> list[Experiment]:
    """One experiment per claim these cases can test: the claim's own listed recipe pair where both
    are here, else the first pair found in the cases' order, at the largest GPU count."""
    out = []
    for claim in CLAIMS:
        if claim.kind == "table" or claim.after_is is None:
            continue
        found = [(a, b) for a in cases for b in cases if a is not b and tests_claim(claim, a, b)]
        if not found:
            continue
        named = {(x, y): i for i, (x, y) in enumerate(claim.change)}
        top = max(_fields(a)["gpus"] for a, _ in found)

        def rank(p):
            return (_fields(p[0])["gpus"] != top, named.get((_fields(p[0])["name"], _fields(p[1])["name"]), len(named)))
        a, b = min(found, key=rank)
        out.append(Experiment(claim, a, b))
    return out


def figure(experiment: Experiment, metrics: dict) -> float | None:
    """What one process contributes to a pair: images/s, or all-reduces per step for a counted claim."""
    return metrics.get("allreduce_calls_per_step" if experiment.counted else "images_per_s")


def judge(experiment: Experiment, pairs: list[tuple[float, float]],
          threshold_pct: float = MIN_EFFECT_PCT) -> dict:
    """The experiment's verdict from its pairs (before, after figures), or None-valued fields while
    too few are in; `decided` says whether more pairs could change it."""
    if experiment.counted:
        if not pairs:
            return {"verdict": None, "decided": False}
        na, nb = pairs[-1]  # the article's loop against no_sync(): the claim holds when it all-reduces no more
        return {"verdict": HOLDS if na <= nb else FAILS, "decided": True}
    if len(pairs) < 2:
        return {"verdict": None, "decided": False}
    j = paired.claim_judgement([a for a, _ in pairs], [b for _, b in pairs], threshold_pct)
    out = {k: v for k, v in j.items() if k not in ("log_ratios", "pairs", "verdict", "claim_verdict")}
    verdict = j["claim_verdict"]
    return {**out, "verdict": verdict, "decided": len(pairs) >= MIN_PAIRS and verdict in (HOLDS, FAILS)}
