"""What the recommend search keeps and reads of its records: a candidate and one GPU count's outcome,
a candidate's figure, how many fresh processes it stands on, one record judged against another with
the suite's noise rule, and the words for a change and a verdict. No measuring."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import identity, verdicts
from ..core.case import Case
from ..core.labels import describe


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
    screening: dict | None = None
    """The first one-process record, where the candidate was then measured again in fresh processes
    (`record` is that confirmation)."""


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


def runner_up(candidates: list[Candidate], best: Candidate) -> Candidate | None:
    """The fastest measured candidate with other knobs than the best."""
    others = [c for c in candidates if figure(c.record) and knobs_key(c.case) != knobs_key(best.case)]
    return max(others, key=lambda c: figure(c.record), default=None)


def winner_record(outcome: Outcome) -> dict | None:
    return outcome.final_best or (outcome.best.record if outcome.best else None)


def processes_of(record: dict | None) -> int:
    """How many fresh processes a record's figure comes from (0 for none measured)."""
    if figure(record) is None:
        return 0
    return int(record["metrics"].get("processes") or len(record["metrics"].get("images_per_s_processes") or [1]))


def is_close(runner: dict, best: dict) -> bool:
    """Whether the noise cannot yet tell the best from the runner-up (so both deserve fresh processes)."""
    return judge(runner, best)["verdict"] != verdicts.FASTER


def describe_case(case: Case) -> str:
    """What ran, in words: the report's label and the per-GPU batch."""
    return describe(case.to_dict()) + f", batch {case.batch_size}"


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


def failure_text(record: dict) -> str:
    """Why a candidate's record has no figure: its status and reason."""
    return f"{record['status']}: {record.get('reason', '')}"


def change_text(change: dict) -> str:
    """One candidate's change as knob=value pairs (the data folder left out: it is the same for all)."""
    return ", ".join(f"{k}={v}" for k, v in change.items() if k != "data_dir")
