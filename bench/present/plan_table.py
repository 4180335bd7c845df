"""`sweep --dry-run`: the cases a sweep would run and what each is expected to cost here."""
from __future__ import annotations

from ..analysis.plan import expected_s, per_process_times, windows_pct
from ..core.case import Case
from ..core.labels import duration
from ..core.recipes import noise_reference
from ..store.record import Record
from .text import fit, wrap


def render(plans: list[tuple[str, list[Case]]], records: list[Record], machine: str, gpus: int, device: str,
           processes: int, floor_processes: int) -> str:
    """The cases of each sweep with their expected time, the noise floor's, and the total."""
    times = per_process_times(records)
    rows, total, unknown, count = [], 0.0, 0, 0
    for sweep, cases in plans:
        sweep_total = 0.0
        for c in cases:
            t = expected_s(c, times)
            expected = t * processes if t is not None else None
            unknown += expected is None
            sweep_total += expected or 0.0
            count += 1
            share = windows_pct(c, times)
            rows.append([sweep, c.case_id, c.gpus, duration(expected), "-" if share is None else f"{share:.0f}"])
        total += sweep_total
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
    foot = ("expected: unknown: no case of these recipes is stored for this machine yet" if not known else
            f"expected: {duration(total)} from this machine's stored case times"
            + (f"; {unknown} entr{'y has' if unknown == 1 else 'ies have'} no stored time here, so the total is a lower bound"
               if unknown else "")
            ) + " (data generation not included); windows %: the stored share of a process's time in measured windows"
    shown, ids = fit(rows, ["sweep", "case", "GPUs", "expected", "windows %"], col=1)
    return "\n".join([*wrap(head), shown, *ids, *wrap(foot)])
