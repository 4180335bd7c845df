"""`bench recommend`: the fastest configuration on this machine, found by measurement within a time budget.

At each GPU count the search starts from the set-up the suite knows to be good (fp16 + channels_last,
DDP over several GPUs) and walks the knobs that matter one stage at a time: each candidate is the
current best with one change, measured in a fresh process and stored as a case. A change is kept only
when it is `faster` beyond the combined noise of both figures; a tie keeps the current (simpler)
configuration, and a change faster than the best but within noise is carried: tried again together
with each later change, so two small gains can be told from the noise together. The best and the
runner-up are then measured again in fresh processes, and the winner is judged against the runner-up
with the noise rules of the suite. The articles' baseline and optimized set-ups at the same GPU count
are the yardsticks, measured after the stages (reused when this commit already stored them here).
Given a JPEG folder, the winner is then fed by JPEGs and the loader and its knobs are searched the same
way, within a share of the budget kept for them (search_space.py).

The search knows nothing of processes or files: it is handed a `measure(case, processes, sweep)` that
returns a stored record, so the CPU tests drive it with a stand-in of known noise.
"""
from __future__ import annotations

import time

from ..core import procfs, recipes, verdicts
from ..core.case import Case
from ..core.errors import CaseError
from .plan import (COMPILE_COST_FACTOR, CPP_WRAPPER_COST_FACTOR, EMULATED_PRECISION_COST_FACTOR, budget_capped,
                   compiled_again_s, expected_s, seconds_per_process)
from .search_records import (  # noqa: F401 (the search's API)
    Candidate,
    Outcome,
    change_text,
    describe_case,
    difference,
    failure_text,
    figure,
    is_close,
    judge,
    knobs_key,
    processes_of,
    runner_up,
    versus,
    winner_record,
)
from .search_carry import CarryingWalk
from .search_fed import FedSearch
from .search_space import (  # noqa: F401 (the search's API)
    LOADER_BUDGET_SHARE,
    SWEEP,
    fed_start_crop,
    fed_start_queues,
    host_bound_changes,
    larger_batch,
    loader_changes,
    next_batch,
    stages,
    start_case,
)

FINAL_SWEEP = "recommend-final"
FINAL_PROCESSES = 2
CONFIRM_SWEEP = "recommend-confirm"
CONFIRM_PROCESSES = 3
"""Fresh processes for a candidate that looks faster but is still within noise, and for the best it
is judged against where that has fewer: one process carries the floor's t(n-1) alone (+-3.9% at a
floor sd of 0.9% with 3 floor processes, seen on one H200), three carry their own spread too, so a
gain of 2-3% (the whole step as one CUDA graph, batch 384) can be told from the noise."""


class Search(CarryingWalk, FedSearch):
    def __init__(self, measure, budget_s: float, clock=time.monotonic,
                 final_processes: int = FINAL_PROCESSES, stored: dict | None = None, known_times: dict | None = None,
                 floor_processes: int = 0, on_floor=None, confirm_processes: int = CONFIRM_PROCESSES,
                 native_bf16: bool | None = None):
        """`measure(case, processes, sweep)` runs and stores a case and returns its record; `stored`
        (case id -> record) holds this commit's reusable records; `known_times` (plan.per_process_times)
        is what this machine took before, for the budget's estimates. The first
        starting set-up is measured in `floor_processes` fresh processes, and `on_floor(case, figures)`
        is handed their figures: the run's noise floor, before any other candidate is judged. A
        candidate faster than the best but within noise is measured again in `confirm_processes` fresh
        processes (and the best too, where it has fewer), unless that is under 2. `native_bf16`: whether this
        CPU computes bf16 itself (read from this host where not given)."""
        self.measure_case, self.budget_s, self.clock = measure, budget_s, clock
        self.final_processes, self.confirm_processes = final_processes, confirm_processes
        self.confirmed: dict[str, dict] = {}  # knobs -> the record of their confirmation processes
        self.floor_processes, self.on_floor = floor_processes, on_floor
        self.stored = stored or {}
        self.known_times = known_times or {}
        self.t0 = clock()
        self.seen: dict[str, dict] = {}
        self.native_bf16 = procfs.native_bf16() if native_bf16 is None else native_bf16
        self.walls: list[tuple[tuple, float]] = []  # (cost_kind, seconds per process)

    # --- budget ---------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def estimate(self, case: Case) -> float:
        """Seconds one process of this case should take: a compiled one this search ran, compiled from the
        cache; else this machine's stored time for its recipe, else this search's slowest of its kind."""
        again = self.seen.get(knobs_key(case))
        if case.compile and again is not None:
            return compiled_again_s(again)
        compiled, emulated = kind = self.cost_kind(case)
        same = [w for k, w in self.walls if k == kind]
        plain = [w for k, w in self.walls if k == (False, False)]
        factor = (COMPILE_COST_FACTOR if compiled else 1.0) * (EMULATED_PRECISION_COST_FACTOR if emulated else 1.0)
        guess = expected_s(case, self.known_times) or max(same, default=0.0) or max(plain, default=0.0) * factor
        # a first C++ wrapper compiles far longer than the Python one that the stored times mostly hold
        return guess * (CPP_WRAPPER_COST_FACTOR if case.compile and case.compile_wrapper == "cpp" else 1.0)

    def cost_kind(self, case: Case) -> tuple[bool, bool]:
        """(compiled, in a precision this CPU emulates): the processes whose seconds estimate each other's."""
        emulated = case.device == "cpu" and case.precision in ("bf16", "fp16") and not self.native_bf16
        return bool(case.compile), emulated

    def measure(self, case: Case, processes: int = 1, sweep: str = SWEEP) -> dict:
        key = knobs_key(case)
        if processes == 1 and key in self.seen:
            return self.seen[key]
        record = self.measure_case(budget_capped(case, self.budget_s - self.elapsed(), processes), processes, sweep)
        self.walls.append((self.cost_kind(case), seconds_per_process(record)))
        if processes == 1:
            self.seen[key] = record
        return record

    # --- the search -----------------------------------------------------------------------------
    def run(self, base: Case, gpus: int, data_dir: str = "", with_compile: bool = True,
            budget_share: float = 1.0) -> Outcome:
        """Search at one GPU count, within `budget_share` of what is left of the budget."""
        began = self.elapsed()
        share_end = began + (self.budget_s - began) * budget_share
        # with a data folder, part of this count's share is kept for the winner fed by JPEGs
        self.limit = share_end - (share_end - began) * LOADER_BUDGET_SHARE if data_dir else share_end
        outcome = Outcome(gpus)

        start = start_case(base, gpus, self.native_bf16)
        current = Candidate("start", start, self._measure_start(start), "where the search starts")
        outcome.candidates.append(current)
        if figure(current.record) is None:
            self._yardsticks(outcome, base, gpus)
            outcome.skipped.append("every stage: the starting set-up failed")
            outcome.seconds = self.elapsed() - began
            return outcome
        self.carried, self.carried_pct, self.batches_tried = {}, 0.0, []
        for stage, changes in stages(start, with_compile):
            if callable(changes):
                current = self._walk_batches(outcome, current, stage, changes)
                continue
            for change in changes:
                current = self._carrying(outcome, current, stage, change)
        # the articles' set-ups after the search, so a short budget is spent where it pays
        self._yardsticks(outcome, base, gpus)
        outcome.best = current
        outcome.runner_up = runner_up(outcome.candidates, current)
        self._finals(outcome)
        self._never_below_yardsticks(outcome)
        if data_dir:
            self.limit = share_end
            self._fed(outcome, data_dir)
        outcome.seconds = self.elapsed() - began
        return outcome

    def _candidate(self, outcome: Outcome, origin: Candidate, stage: str, change: dict,
                   fed: bool = False, keep: float | None = None) -> Candidate | None:
        """`origin` with one change, measured and listed, where it can run, differs and fits the budget."""
        try:
            case = origin.case.replace(name=f"{SWEEP}-{stage}", **change)
        except CaseError as e:  # a change this configuration cannot take (a CUDA graph under DDP, say)
            outcome.skipped.append(f"{stage}: {change_text(change)} (cannot run here: {e})")
            return None
        if knobs_key(case) == knobs_key(origin.case):
            return None
        if keep is None:
            keep = 0.0 if fed else self._finals_cost(outcome, origin)
        if not self.within(case, keep=keep):
            outcome.skipped.append(f"{stage}: {change_text(change)} (budget)")
            return None
        cand = Candidate(stage, case, self.measure(case), against=origin.case)
        (outcome.fed if fed else outcome.candidates).append(cand)
        return cand

    def _yardsticks(self, outcome: Outcome, base: Case, gpus: int) -> None:
        """The articles' baseline and optimized set-ups at this GPU count: stored ones of this commit
        reused, the others measured where the budget allows."""
        for label, case in (("baseline", recipes.seed_baseline(base, gpus)),
                            ("optimized", recipes.seed_optimized(base, gpus))):
            rec = self.stored.get(case.case_id) or (self.measure(case) if self.within(case) else None)
            if rec is None:
                outcome.skipped.append(f"the article's {label} set-up (budget)")
            outcome.references[label] = rec

    def _never_below_yardsticks(self, outcome: Outcome) -> None:
        """Never slower than the articles' set-ups measured beside it: where one ran faster than what the
        search found within its budget, it is the answer (the fastest configuration measured), said so."""
        win = winner_record(outcome)
        faster = [(figure(r), k, r) for k, r in outcome.references.items() if figure(r) and figure(r) > (figure(win) or 0)]
        if faster:
            f, label, rec = max(faster, key=lambda t: t[0])
            note = (f"the article's {label} set-up ran faster ({f:,.1f} images/s) than the best the search found within "
                    f"its budget ({figure(win) or 0:,.1f}): recommended as the fastest configuration measured")
            found, outcome.best = outcome.best, Candidate("yardstick", Case.from_dict(rec["case"]), rec, note)
            outcome.runner_up, outcome.final_best, outcome.final_runner_up = found, rec, win
            outcome.versus_runner_up = judge(win, rec) if figure(win) else None

    def _choose(self, current: Candidate, cand: Candidate, confirm_above: float = 0.0) -> Candidate:
        """Keep the change only when it is faster beyond both figures' noise; one that looks faster (by more
        than `confirm_above` %) but is within noise, or has no interval yet, is measured again in fresh
        processes first, where the budget allows."""
        if figure(cand.record) is None:
            cand.note = failure_text(cand.record)[:200]
            return current
        v = judge(current.record, cand.record)
        # a real loader's one process has no interval (inconclusive): fresh processes decide it too
        if v["verdict"] in (verdicts.WITHIN, verdicts.INCONCLUSIVE) and v["delta_pct"] > confirm_above \
                and self._confirm(current, cand):
            v = judge(current.record, cand.record)
        cand.note = versus(v)
        if cand.screening is not None:
            cand.note += f" in {processes_of(cand.record)} fresh processes"
        if v["verdict"] == verdicts.FASTER:
            cand.note = "kept, " + cand.note
            return cand
        return current

    def _confirm(self, current: Candidate, cand: Candidate) -> bool:
        """Measure the candidate, and the best where it has fewer processes, in `confirm_processes` fresh
        processes each (sweep recommend-confirm); False where that is off, does not fit or failed."""
        k = self.confirm_processes
        todo = [c for c in (current, cand) if processes_of(c.record) < k]
        if k < 2 or not todo or self.elapsed() + self._remeasure_s(todo, k) > self.limit:
            return False
        for c in todo:
            record = self._confirmation(c.case, k)
            if figure(record) is None:
                return False
            c.screening, c.record = c.record, record
        return True

    def _confirmation(self, case: Case, k: int) -> dict:
        """One case in k fresh processes, measured once per run whichever candidate asks."""
        key = knobs_key(case)
        if key not in self.confirmed:
            self.confirmed[key] = self.measure(case.replace(name=CONFIRM_SWEEP), k, CONFIRM_SWEEP)
        return self.confirmed[key]

    def _measure_start(self, start: Case) -> dict:
        """The first starting set-up doubles as the noise floor's reference, in fresh processes."""
        if self.floor_processes < 2 or self.on_floor is None:
            return self.measure(start)
        k, self.floor_processes = self.floor_processes, 0
        record = self.measure(start, k)
        figures = record.get("metrics", {}).get("images_per_s_processes") or []
        self.on_floor(start, figures if record["status"] == "ok" else [], record.get("reason", ""))
        self.seen[knobs_key(start)] = record
        return record

    def _finals_cost(self, outcome: Outcome, current: Candidate) -> float:
        """Seconds to keep for re-measuring the best and a runner-up close to it."""
        close = runner_up(outcome.candidates, current)
        if close is None or not is_close(close.record, current.record):
            return 0.0
        cost = self._remeasure_s([current, close], self.final_processes)
        # finals that no longer fit would leave the time unspent: then candidates get it (seen on one
        # H200: a reservation for two compiled finalists skipped reduce-overhead, then the finals too)
        return cost if self.elapsed() + cost <= self.limit else 0.0

    def _remeasure_s(self, candidates: list[Candidate], k: int) -> float:
        """Seconds to measure again, in k fresh processes each, those candidates that have fewer."""
        return k * sum(self.estimate(c.case) for c in candidates if processes_of(c.record) < k)

    def within(self, case: Case, processes: int = 1, keep: float = 0.0) -> bool:
        """Whether `processes` of this case, and `keep` seconds after them, fit in this GPU count's share."""
        return self.elapsed() + self.estimate(case) * processes + keep <= self.limit

    def _finals(self, outcome: Outcome) -> None:
        """The best and the runner-up again, each in fresh processes, so the winner is judged on more
        than one process; if the runner-up then wins beyond noise, it is the answer."""
        best, runner, k = outcome.best, outcome.runner_up, self.final_processes
        if runner is None:
            return
        if not is_close(runner.record, best.record):  # already decided beyond noise
            outcome.versus_runner_up = judge(runner.record, best.record)
            return
        if k < 1 or self.elapsed() + self._remeasure_s([best, runner], k) > self.limit:
            outcome.skipped.append("the finalists' re-measurement (budget)" if k else "the finalists' re-measurement")
            outcome.versus_runner_up = judge(runner.record, best.record)
            return
        fb, fr = (self._final(c, k) for c in (best, runner))
        if figure(fb) is None or figure(fr) is None:
            outcome.versus_runner_up = judge(runner.record, best.record)
            return
        if judge(fr, fb)["verdict"] == verdicts.SLOWER:  # the runner-up beat it beyond noise in fresh processes
            outcome.best, outcome.runner_up, fb, fr = runner, best, fr, fb
        outcome.final_best, outcome.final_runner_up, outcome.versus_runner_up = fb, fr, judge(fr, fb)

    def _final(self, c: Candidate, k: int) -> dict:
        """A finalist's record in at least k fresh processes: its confirmation where it has one."""
        if processes_of(c.record) >= k:
            return c.record
        return self.measure(c.case.replace(name=FINAL_SWEEP), k, FINAL_SWEEP)
