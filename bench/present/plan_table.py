"""`sweep --dry-run`: the cases a sweep would run and what each is expected to cost here."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.plan import expected_s, per_process_times, windows_pct
from ..core.case import Case
from ..core.paired import MIN_PAIRS
from ..core.labels import duration
from ..core.recipes import noise_reference
from ..store.record import Record
from .text import fit, wrap


@dataclass(frozen=True)
class ClaimRounds:
    """The claims' experiments a sweep will run: their cases run one process per round, at least
    MIN_PAIRS rounds, then more while undecided and the budget allows, at most max_rounds."""
    experiments: int
    case_ids: frozenset
    budget_s: float
    max_rounds: int


def render(plans: list[tuple[str, list[Case]]], records: list[Record], machine: str, gpus: int, device: str,
           processes: int, floor_processes: int, claims: ClaimRounds | None = None) -> str:
    """The cases of each sweep with their expected time (a claim experiment's cases per round), the claim
    rounds', the noise floor's, and the total (a range where the rounds depend on when claims decide)."""
    times = per_process_times(records)
    rows, total, unknown, count = [], 0.0, 0, 0
    in_rounds = claims.case_ids if claims else frozenset()
    round_s, round_unknown, seen = 0.0, 0, set()
    for sweep, cases in plans:
        for c in cases:
            t = expected_s(c, times)
            count += 1
            pct = windows_pct(c, times)
            share = "-" if pct is None else f"{pct:.0f}"
            if c.case_id in in_rounds:  # measured by the rounds, once per round, wherever it is listed
                rows.append([sweep, c.case_id, c.gpus, duration(t) + ("/round" if t is not None else ""), share])
                if c.case_id not in seen:
                    seen.add(c.case_id)
                    round_s += t or 0.0
                    round_unknown += t is None
                continue
            expected = t * processes if t is not None else None
            unknown += expected is None
            total += expected or 0.0
            rows.append([sweep, c.case_id, c.gpus, duration(expected), share])
    extra = 0.0
    if claims and in_rounds:
        low = MIN_PAIRS * round_s
        extra = min(claims.max_rounds * round_s, max(low, claims.budget_s)) - low
        rows.append(["(claim rounds)", "-", "-",
                     f"{duration(low)} to {duration(low + extra)}" if round_s else duration(None), "-"])
        total += low
        unknown += round_unknown
    ref = noise_reference(device)
    floor_n = floor_processes + min(floor_processes, 2) if floor_processes else 0
    t_ref = expected_s(ref, times)
    if floor_n:
        share = windows_pct(ref, times)
        rows.append(["(noise floor)", ref.case_id, ref.gpus, duration(t_ref * floor_n if t_ref else None),
                     "-" if share is None else f"{share:.0f}"])
        total += (t_ref or 0.0) * floor_n
        unknown += t_ref is None
    head = (f"{count} case(s) on {machine} ({gpus} {'GPU' if device == 'cuda' else 'CPU rank'}(s)), "
            f"{processes} process(es) per case, noise floor {floor_n} process(es)")
    known = count + (1 if floor_n else 0) - unknown
    span = duration(total) + (f" to {duration(total + extra)}" if extra else "")
    foot = ("expected: unknown: no case of these recipes is stored for this machine yet" if not known else
            f"expected: {span} from this machine's stored case times"
            + (f"; {unknown} entr{'y has' if unknown == 1 else 'ies have'} no stored time here, so the total is a lower bound"
               if unknown else "")
            ) + " (data generation not included); windows %: the stored share of a process's time in measured windows"
    if claims and in_rounds:
        foot += (f"; claim rounds: {claims.experiments} experiment(s) over {len(seen)} case(s), each round runs "
                 f"them once (interleaved, each round reversed), at least {MIN_PAIRS}, more while a claim is "
                 f"undecided, within the claims' budget of {duration(claims.budget_s)} and {claims.max_rounds} rounds")
    shown, ids = fit(rows, ["sweep", "case", "GPUs", "expected", "windows %"], col=1)
    return "\n".join([*wrap(head), shown, *ids, *wrap(foot)])
