"""`bench recommend`'s search for the winner fed by JPEGs: the synthetic winner fed by each loader and
its knobs in turn (search_space.loader_changes), each change kept only beyond noise, and the fed winner
measured in fresh processes of its own so its figure against the synthetic one carries an interval.
A part of `search.Search`, which measures, judges and keeps the budget."""
from __future__ import annotations

from .search_records import Candidate, Outcome, failure_text, figure, processes_of
from .search_space import host_bound_changes, loader_changes


class FedSearch:
    def _fed(self, outcome: Outcome, data_dir: str) -> None:
        """The winner fed by JPEGs, searched like the rest: another loader starts from the synthetic
        winner, a knob of the same loader from the best fed so far, and a change is kept only when
        faster beyond noise than that best. Where the best fed so far is host-bound, what may give its
        host time back is tried next, each once (search_space.host_bound_changes)."""
        synthetic, best, tried = outcome.best, None, []
        for stage, change in loader_changes(synthetic.case, data_dir):
            best = self._fed_step(outcome, synthetic, best, stage, change)
            # the host queues the fed step late: at once, before the loader's other knobs
            while best is not None and (todo := [c for c in host_bound_changes(best.case, best.record, outcome.candidates)
                                                 if c not in tried]):
                tried.append(todo[0])
                best = self._fed_step(outcome, synthetic, best, stage, todo[0])
        outcome.fed_best = best if best and figure(best.record) is not None else None
        self._confirm_fed_best(outcome)

    def _confirm_fed_best(self, outcome: Outcome) -> None:
        """The fed winner in fresh processes where it stands on fewer, so its figure against the synthetic
        winner carries an interval (a real loader's one process has none); said where the budget is short."""
        best, k = outcome.fed_best, self.confirm_processes
        if best is None or k < 2 or processes_of(best.record) >= k:
            return
        if self.elapsed() + self._remeasure_s([best], k) > self.limit:
            outcome.skipped.append("the fed winner's re-measurement in fresh processes (budget)")
            return
        record = self._confirmation(best.case, k)
        if figure(record) is None:
            outcome.skipped.append(f"the fed winner's re-measurement ({failure_text(record)})"[:200])
            return
        best.screening, best.record = best.record, record

    def _fed_step(self, outcome: Outcome, synthetic: Candidate, best: Candidate | None, stage: str,
                  change: dict) -> Candidate | None:
        """One fed candidate, from the best fed so far where it keeps that loader: the new best fed."""
        same_loader = best is not None and best.case.loader == change["loader"]
        # the time to give the best fed so far an interval of its own is kept from the later candidates
        keep = self._remeasure_s([best], self.confirm_processes) if best and figure(best.record) else 0.0
        cand = self._candidate(outcome, best if same_loader else synthetic, stage, change, fed=True, keep=keep)
        if cand is None:
            return best
        if best is None or figure(best.record) is None:
            cand.note = "where the fed search starts" if figure(cand.record) else failure_text(cand.record)[:200]
            return cand
        return self._choose(best, cand)
