"""`bench recommend`: the fastest configuration on this machine, found by measurement within a time budget.

At each GPU count the search starts from the set-up the suite knows to be good (fp16 + channels_last,
DDP over several GPUs) and walks the knobs that matter one stage at a time: each candidate is the
current best with one change, measured in a fresh process and stored as a case. A change is kept only
when it is `faster` beyond the combined noise of both figures; a tie keeps the current (simpler)
configuration. The best and the runner-up are then measured again in fresh processes, and the winner
is judged against the runner-up with the noise rules of the suite. The articles' baseline and optimized
set-ups at the same GPU count are the yardsticks, measured after the stages (reused when this commit
already stored them here). Given a JPEG folder, the winner is then fed by JPEGs and the loader and its
knobs are searched the same way, within a share of the budget kept for them (search_space.py).

The search knows nothing of processes or files: it is handed a `measure(case, processes, sweep)` that
returns a stored record, so the CPU tests drive it with a stand-in of known noise.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..core import identity, recipes, verdicts
from ..core.case import Case
from ..core.errors import CaseError
from ..core.labels import describe
from .plan import expected_s, seconds_per_process
from .search_space import LOADER_BUDGET_SHARE, SWEEP, loader_changes, stages, start_case  # noqa: F401 (the search's API)

FINAL_SWEEP = "recommend-final"
FINAL_PROCESSES = 2
COMPILE_COST_FACTOR = 3.0
"""A compiled candidate's process, until one is measured: about three eager ones (about 40 s of
compiling on one H200 beside an eager process of about 25 s)."""


def knobs_key(case: Case) -> str:
    """Two candidates with the same knobs are one, whatever stage named them."""
    return identity.knobs_key(case)


def figure(record: dict | None) -> float | None:
    if not record or record.get("status") != "ok":
        return None
    return record["metrics"]["images_per_s"]


def judge(a: dict, b: dict) -> dict:
    """B against A with the suite's noise rule (faster, slower, within noise, inconclusive)."""
    return verdicts.compare_metrics(a["metrics"], b["metrics"])


@dataclass
class Candidate:
    stage: str
    case: Case
    record: dict | None = None
    """The stored record; None when the budget left it unmeasured."""
    note: str = ""
    """Why it was kept or dropped, in words."""
    against: Case | None = None
    """The best so far when it was tried: it differs from that in one change."""


@dataclass
class Outcome:
    gpus: int
    candidates: list[Candidate] = field(default_factory=list)
    best: Candidate | None = None
    runner_up: Candidate | None = None
    final_best: dict | None = None
    final_runner_up: dict | None = None
    versus_runner_up: dict | None = None
    references: dict = field(default_factory=dict)
    """`baseline` and `optimized`: the articles' set-ups at this GPU count (records)."""
    fed: list[Candidate] = field(default_factory=list)
    """The winner fed by JPEGs (DALI and its knobs, torch DataLoader), when a data folder was given."""
    fed_best: Candidate | None = None
    """The fastest fed candidate by the search's rule (a change kept only when faster beyond noise)."""
    skipped: list[str] = field(default_factory=list)
    """What the budget left unmeasured."""
    seconds: float = 0.0


class Search:
    def __init__(self, measure, budget_s: float, clock=time.monotonic,
                 final_processes: int = FINAL_PROCESSES, stored: dict | None = None, known_times: dict | None = None,
                 floor_processes: int = 0, on_floor=None):
        """`measure(case, processes, sweep)` runs and stores a case and returns its record; `stored`
        (case id -> record) holds this commit's reusable records; `known_times` (plan.per_process_times)
        is what this machine took before, for the budget's estimates. The first
        starting set-up is measured in `floor_processes` fresh processes, and `on_floor(case, figures)`
        is handed their figures: the run's noise floor, before any other candidate is judged."""
        self.measure_case, self.budget_s, self.clock = measure, budget_s, clock
        self.final_processes = final_processes
        self.floor_processes, self.on_floor = floor_processes, on_floor
        self.stored = stored or {}
        self.known_times = known_times or {}
        self.t0 = clock()
        self.seen: dict[str, dict] = {}
        self.walls: list[tuple[bool, float]] = []  # (compiled, seconds per process)

    # --- budget ---------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def estimate(self, case: Case) -> float:
        """Seconds one process of this case should take: this machine's stored time for its recipe,
        else the slowest process of the same kind (eager or compiled) in this search."""
        known = expected_s(case, self.known_times)
        if known:
            return known
        same = [w for compiled, w in self.walls if compiled == bool(case.compile)]
        if same:
            return max(same)
        eager = [w for compiled, w in self.walls if not compiled]
        if eager:
            return max(eager) * (COMPILE_COST_FACTOR if case.compile else 1.0)
        return 0.0

    def measure(self, case: Case, processes: int = 1, sweep: str = SWEEP) -> dict:
        key = knobs_key(case)
        if processes == 1 and key in self.seen:
            return self.seen[key]
        record = self.measure_case(case, processes, sweep)
        self.walls.append((bool(case.compile), seconds_per_process(record)))
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

        start = start_case(base, gpus)
        current = Candidate("start", start, self._measure_start(start), "where the search starts")
        outcome.candidates.append(current)
        if figure(current.record) is None:
            self._yardsticks(outcome, base, gpus)
            outcome.skipped.append("every stage: the starting set-up failed")
            outcome.seconds = self.elapsed() - began
            return outcome
        for stage, changes in stages(start, with_compile):
            for change in changes:
                cand = self._candidate(outcome, current, stage, change)
                if cand is not None:
                    current = self._choose(current, cand)
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
                   fed: bool = False) -> Candidate | None:
        """`origin` with one change, measured and listed, where it can run, differs and fits the budget."""
        try:
            case = origin.case.replace(name=f"{SWEEP}-{stage}", **change)
        except CaseError as e:  # a change this configuration cannot take (a CUDA graph under DDP, say)
            outcome.skipped.append(f"{stage}: {_change_text(change)} (cannot run here: {e})")
            return None
        if knobs_key(case) == knobs_key(origin.case):
            return None
        if not self.within(case, keep=0.0 if fed else self._finals_cost(outcome, origin)):
            outcome.skipped.append(f"{stage}: {_change_text(change)} (budget)")
            return None
        cand = Candidate(stage, case, self.measure(case), against=origin.case)
        (outcome.fed if fed else outcome.candidates).append(cand)
        return cand

    def _fed(self, outcome: Outcome, data_dir: str) -> None:
        """The winner fed by JPEGs, searched like the rest: another loader starts from the synthetic
        winner, a knob of the same loader from the best fed so far, and a change is kept only when
        faster beyond noise than that best."""
        synthetic, best = outcome.best, None
        for stage, change in loader_changes(synthetic.case, data_dir):
            same_loader = best is not None and best.case.loader == change["loader"]
            cand = self._candidate(outcome, best if same_loader else synthetic, stage, change, fed=True)
            if cand is None:
                continue
            if best is None or figure(best.record) is None:
                cand.note = "where the fed search starts" if figure(cand.record) else \
                    f"{cand.record['status']}: {cand.record.get('reason', '')}"[:200]
                best = cand
            else:
                best = self._choose(best, cand)
        outcome.fed_best = best if best and figure(best.record) is not None else None

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

    def _choose(self, current: Candidate, cand: Candidate) -> Candidate:
        """Keep the change only when it is faster beyond both figures' noise."""
        if figure(cand.record) is None:
            cand.note = f"{cand.record['status']}: {cand.record.get('reason', '')}"[:200]
            return current
        v = judge(current.record, cand.record)
        cand.note = versus(v)
        if v["verdict"] == verdicts.FASTER:
            cand.note = "kept, " + cand.note
            return cand
        return current

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
        cost = self.final_processes * (self.estimate(current.case) + self.estimate(close.case))
        # finals that no longer fit would leave the time unspent: then candidates get it (seen on one
        # H200: a reservation for two compiled finalists skipped reduce-overhead, then the finals too)
        return cost if self.elapsed() + cost <= self.limit else 0.0

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
        if k < 1 or not self.within(best.case, k, keep=self.estimate(runner.case) * k):
            outcome.skipped.append("the finalists' re-measurement (budget)" if k else "the finalists' re-measurement")
            outcome.versus_runner_up = judge(runner.record, best.record)
            return
        fb, fr = (self.measure(c.case.replace(name=FINAL_SWEEP), k, FINAL_SWEEP) for c in (best, runner))
        if figure(fb) is None or figure(fr) is None:
            outcome.versus_runner_up = judge(runner.record, best.record)
            return
        if judge(fr, fb)["verdict"] == verdicts.SLOWER:  # the runner-up beat it beyond noise in fresh processes
            outcome.best, outcome.runner_up, fb, fr = runner, best, fr, fb
        outcome.final_best, outcome.final_runner_up, outcome.versus_runner_up = fb, fr, judge(fr, fb)


def runner_up(candidates: list[Candidate], best: Candidate) -> Candidate | None:
    """The fastest measured candidate with other knobs than the best."""
    others = [c for c in candidates if figure(c.record) and knobs_key(c.case) != knobs_key(best.case)]
    return max(others, key=lambda c: figure(c.record), default=None)


def is_close(runner: dict, best: dict) -> bool:
    """Whether the noise cannot yet tell the best from the runner-up (so both deserve fresh processes)."""
    return judge(runner, best)["verdict"] != verdicts.FASTER


def _change_text(change: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in change.items() if k != "data_dir")


def describe_case(case: Case) -> str:
    """What ran, in words: the report's label and the per-GPU batch."""
    return describe(case.to_dict()) + f", batch {case.batch_size}"


def winner_record(outcome: Outcome) -> dict | None:
    return outcome.final_best or (outcome.best.record if outcome.best else None)


def difference(best: Case, other: Case) -> str:
    """How another candidate differs from the best, knob by knob (`batch_size=128, optimizer_impl=default`)."""
    b = other.to_dict()
    return ", ".join(f"{k}={b[k]}" for k in sorted(identity.differing_fields(best, other))) or "the same knobs"


def versus(v: dict | None) -> str:
    """The best against one yardstick, in a cell."""
    if not v:
        return "not compared"
    noise = "no interval" if v["noise_pct"] is None else f"+-{v['noise_pct']:.1f}%"
    return f"{v['delta_pct']:+.1f}%: {v['verdict']} ({noise})"
