"""`bench recommend`'s walk through the synthetic stages: one change at a time to the best so far, each
tried together with the changes carried (faster than the best then but within noise), so two gains too
small to be told from the noise alone can be kept together. A part of `search.Search`, which measures,
judges and keeps the budget."""
from __future__ import annotations

from ..core import verdicts
from ..core.case import Case
from ..core.errors import CaseError
from .search_records import Candidate, Outcome, figure, judge


class CarryingWalk:
    carried: dict
    """The changes carried: each faster than the best when it was tried, but within noise (set afresh
    at each GPU count's start)."""
    carried_pct: float
    """What the candidate that carried them last gained against the best, in %."""

    batches_tried: list
    """The batch sizes this GPU count's walks picked so far, those left for budget too (set afresh at
    each GPU count's start), so a later walk goes on from an earlier one."""

    def _walk_batches(self, outcome: Outcome, current: Candidate, stage: str, pick) -> Candidate:
        """Batch sizes one at a time, each next one picked by `pick(start, best, tried)` from the search's
        starting batch, the best so far and every batch picked before."""
        start, tried = outcome.candidates[0].case.batch_size, self.batches_tried
        while (b := pick(start, current.case.batch_size, tried)) is not None:
            tried.append(b)
            current = self._carrying(outcome, current, stage, dict(batch_size=b))
        return current

    def _carrying(self, outcome: Outcome, current: Candidate, stage: str, change: dict) -> Candidate:
        """One change to the best, tried with the changes carried: each was faster than the best then but
        within noise, so it was not kept alone, and two such gains may together be told from the noise (on
        one H200 the step as one CUDA graph and the 4-channel input each gained 0.6-0.7% against a noise
        of +-1.0% in 3 fresh processes a side). Where the change cannot take them, it is tried alone. Kept
        beyond noise, the candidate is the new best and nothing is carried; faster within noise, its change
        is carried on too. Returns the best."""
        together = {**self.carried, **change}
        if together != change and not self._can_take(current.case, together):
            together = change
        # what the carried changes gained already: the change itself shows only in a gain beyond that
        gained = self.carried_pct if together != change else 0.0
        cand = self._candidate(outcome, current, stage, together)
        if cand is None:
            return current
        best = self._choose(current, cand, confirm_above=gained)
        if best is cand:
            self.carried, self.carried_pct = {}, 0.0
        elif figure(cand.record) is not None:
            v = judge(current.record, cand.record)
            if v["verdict"] == verdicts.WITHIN and v["delta_pct"] > gained:
                self.carried, self.carried_pct = together, v["delta_pct"]
                cand.note += "; carried into the later candidates"
        return best

    @staticmethod
    def _can_take(case: Case, change: dict) -> bool:
        """Whether the case validates with the change (a CUDA graph cannot join DDP, say)."""
        try:
            case.replace(**change)
        except CaseError:
            return False
        return True

