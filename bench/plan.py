"""`sweep --dry-run`: the cases a sweep would run and what each is expected to cost, from the times
this machine's stored results took for the same recipe (never a guess: a recipe with no stored time
on this machine says so)."""
from __future__ import annotations

import statistics

from tabulate import tabulate

from . import env as envmod
from . import query
from .case import Case


def seconds_per_process(result: dict) -> float:
    """A case's wall time over the fresh processes it ran in (a record or a launcher's result)."""
    return (result.get("wall_s") or 0.0) / max(1, len(result.get("processes") or []))


def per_process_times(records: list[query.Record]) -> dict:
    """Seconds one fresh process took, by (recipe name, GPUs), from stored records of any commit."""
    times: dict = {}
    for r in records:
        d = r.data
        if d.get("wall_s") and r.status in ("ok", "oom", "error", "timeout"):
            times.setdefault((d["case"]["name"], d["case"]["gpus"]), []).append(seconds_per_process(d))
    return {k: statistics.median(v) for k, v in times.items()}


def _fmt(s: float | None) -> str:
    if s is None:
        return "no stored time"
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def render(plans: list[tuple[str, list[Case]]], store, gpus: int, device: str, processes: int,
           floor_processes: int) -> str:
    env = envmod.collect()
    machine = envmod.machine_slug(env)
    records, _ = query.load([store.root / machine]) if (store.root / machine).is_dir() else ([], [])
    times = per_process_times(records)
    rows, total, unknown, count = [], 0.0, 0, 0
    for sweep, cases in plans:
        sweep_total = 0.0
        for c in cases:
            t = times.get((c.name, c.gpus))
            expected = t * processes if t is not None else None
            unknown += expected is None
            sweep_total += expected or 0.0
            count += 1
            rows.append([sweep, c.case_id, c.gpus, _fmt(expected)])
        total += sweep_total
    from .sweeps import noise_reference
    ref = noise_reference(device)
    floor_n = floor_processes + min(floor_processes, 2) if floor_processes else 0
    t_ref = times.get((ref.name, ref.gpus))
    if floor_n:
        rows.append(["(noise floor)", ref.case_id, ref.gpus, _fmt(t_ref * floor_n if t_ref else None)])
        total += (t_ref or 0.0) * floor_n
        unknown += t_ref is None
    head = (f"{count} case(s) on {machine} ({gpus} {'GPU' if device == 'cuda' else 'CPU rank'}(s)), "
            f"{processes} process(es) per case, noise floor {floor_n} process(es)")
    known = count + (1 if floor_n else 0) - unknown
    foot = ("expected: unknown: no case of these recipes is stored for this machine yet" if not known else
            f"expected: {_fmt(total)} from this machine's stored case times"
            + (f"; {unknown} entr{'y has' if unknown == 1 else 'ies have'} no stored time here, so the total is a lower bound"
               if unknown else "")
            ) + " (data generation not included)"
    return "\n".join([head, tabulate(rows, headers=["sweep", "case", "GPUs", "expected"], tablefmt="github",
                                     disable_numparse=True), foot])
