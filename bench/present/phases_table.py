"""Where each case's time went (core/phases.py), per case and for the noise floors: the table behind
`a case should cost little more than its windows`."""
from __future__ import annotations

from ..core import phases
from ..store import query
from ..store.record import Record
from . import i18n
from .text import table


COLUMNS = (("startup_s", "setup_s"), ("first_step_s",), ("warmup_s",), ("windows_s",), ("after_s", "teardown_s"))
"""The table's columns, each the sum of these phases (a terminal's width holds five); the records keep all."""


def _cells(total: dict, processes: int, label: str) -> list[str]:
    spent = sum(v for k, v in total.items() if k != "started_ahead_s")
    share = phases.windows_share_pct(total)
    return [label + (f" x{processes}" if processes > 1 else ""), f"{spent:.1f}"] + \
        [f"{sum(total.get(k, 0.0) for k in keys):.1f}" for keys in COLUMNS] + ["-" if share is None else f"{share:.0f}"]


def phase_table(records: list[Record], lang: str = "en") -> str | None:
    """One row per case (its processes summed, `x3` for three), one per noise floor of the runs used and a
    total; None
    where no record kept its phases (made before they were recorded)."""
    rows, grand, count = [], {}, 0
    for r in sorted(records, key=lambda r: (r.started_at, r.case_id)):
        per = [p.get("phases_s") for p in r.data.get("processes") or [] if p.get("phases_s")]
        if not per or r.data.get("reused_from_sweep") or r.data.get("measured_as_floor"):
            continue  # measured once and counted there: in another sweep, or as the floor's row
        total = phases.total(per)
        grand, count = phases.total([grand, total]), count + len(per)
        rows.append(_cells(total, len(per), r.case["name"]))
    for run_id, m in sorted(query.run_manifests(records).items()):
        for key, at in (("noise_floor", "start"), ("noise_floor_end", "end")):
            per = (m.get(key) or {}).get("phases_s") or []
            if per:
                total = phases.total(per)
                grand, count = phases.total([grand, total]), count + len(per)
                rows.append(_cells(total, len(per), f"(floor, {at}, run {run_id[-4:]})"))
    if not rows:
        return None
    rows.append(_cells(grand, count, i18n.t(lang, "phases_total")))
    headers = i18n.t(lang, "phases_cols")
    return table(rows, headers, ("left",) + ("right",) * (len(headers) - 1))
