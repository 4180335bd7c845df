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
from .claims import CLAIMS, Claim, allreduce_verdict


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


def tests_claim(claim: Claim, before, after, a: dict | None = None, b: dict | None = None) -> bool:
    """Whether the pair tests the claim: same GPU count (enough of them), not loader-only, `after` the
    side holding the change, and differing only in the claim's knobs. `a`, `b`: their acting fields
    where the caller has them already."""
    a, b = a or acting(before), b or acting(after)
    if a["gpus"] != b["gpus"] or a["gpus"] < claim.min_gpus or a["loader_only"] or b["loader_only"]:
        return False
    if not claim.after_is(a, b):  # cheap, and false for most pairs: the knob comparison only after it
        return False
    diff = differing_fields(before, after)
    return bool(diff) and diff <= set(claim.knobs or ())


def find(cases: list) -> list[Experiment]:
    """One experiment per claim these cases can test: the claim's own listed recipe pair where both
    are here, else the first pair found in the cases' order, at the largest GPU count."""
    fields = [acting(c) for c in cases]
    out = []
    for claim in CLAIMS:
        if claim.kind == "table" or claim.after_is is None:
            continue
        found = [(i, j) for i in range(len(cases)) for j in range(len(cases))
                 if i != j and tests_claim(claim, cases[i], cases[j], fields[i], fields[j])]
        if not found:
            continue
        named = {(x, y): k for k, (x, y) in enumerate(claim.change)}
        top = max(fields[i]["gpus"] for i, _ in found)
        i, j = min(found, key=lambda p: (fields[p[0]]["gpus"] != top,
                                         named.get((fields[p[0]]["name"], fields[p[1]]["name"]), len(named))))
        out.append(Experiment(claim, cases[i], cases[j]))
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
        return {"verdict": allreduce_verdict(*pairs[-1]), "decided": True}
    # from two pairs on: one degree of freedom, so two decide only a large or a very steady effect
    # (t = 12.7); on one H100 a third round of all seven one-GPU cases changed no verdict that two pairs
    # had decided and cost 160 s that the one undecided claim (dali) needed
    if len(pairs) < paired.MIN_PAIRS:
        return {"verdict": None, "decided": False}
    j = paired.claim_judgement([a for a, _ in pairs], [b for _, b in pairs], threshold_pct)
    out = {k: v for k, v in j.items() if k not in ("log_ratios", "pairs", "verdict", "claim_verdict")}
    return {**out, "verdict": j["claim_verdict"], "decided": j["claim_verdict"] in (HOLDS, FAILS)}
