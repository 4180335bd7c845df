"""The noise a figure is judged against: its own 95% interval where it has one, else an explicit
assumed noise, the largest process-to-process spread this machine has shown for that kind of case
(its loader: synthetic, torch or dali) in stored runs of 3 or more fresh processes, noise floors
included; where none is stored, a documented conservative default. A verdict names which it used.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core import verdicts
from ..store import query
from ..store.record import Record

MIN_PROCESSES = 3
DEFAULT_HALF_PCT = {"synthetic": 5.0, "torch": 15.0, "dali": 15.0}
"""Where this machine stored no 3-process run of a kind: on one H200, fresh processes of a synthetic
case moved at most 3.9% across machine sessions, and a real loader's end-to-end figure 10.8% between
two processes (the torch DataLoader) and its windows 11.3% within one (DALI); these bounds sit above."""


@dataclass(frozen=True)
class Assumed:
    half_pct: float
    source: str
    """Where the figure comes from, in words: the run and case that showed that spread, or the default."""


def kind(case: dict) -> str:
    return case.get("loader", "synthetic")


def _spread_pct(figures: list[float]) -> float:
    return 100.0 * (max(figures) - min(figures)) / sorted(figures)[len(figures) // 2]


def assumed_noise(records: list[Record]) -> dict[tuple[str, str], Assumed]:
    """Per (machine, kind): the largest spread of MIN_PROCESSES or more fresh processes stored, from
    records (their process figures) and their runs' noise floors (synthetic)."""
    found: dict[tuple[str, str], Assumed] = {}

    def offer(machine, k, figures, where):
        if len(figures) < MIN_PROCESSES or min(figures) <= 0:
            return
        spread = _spread_pct(figures)
        if (machine, k) not in found or spread > found[(machine, k)].half_pct:
            found[(machine, k)] = Assumed(spread, f"assumed +-{spread:.1f}%: the largest spread of {len(figures)} "
                                                  f"processes of a {k} case on {machine}, {where}")
    for r in records:
        figures = [p.get("images_per_s") for p in r.data.get("processes") or []]
        if r.ok and r.current and all(figures):
            offer(r.machine, kind(r.case), figures, f"{r.case['name']}, run {r.run_id}")
    for run_id, m in query.run_manifests(records).items():
        for key in ("noise_floor", "noise_floor_end"):
            floor = m.get(key) or {}
            if floor.get("images_per_s"):
                offer(m.get("machine", ""), "synthetic", floor["images_per_s"], f"noise floor of run {run_id}")
    return found


def noise_for(r: Record, assumed: dict, include_old: bool = False) -> tuple[float | None, str]:
    """(half-width in percent, where it came from) for one record's figure."""
    if not r.current and not include_old:
        return None, "older definition"  # shown, never judged, unless asked for
    measured = verdicts.half_width_pct(r.metrics, within_process_ok=include_old and not r.current)
    if measured is not None:
        return measured, ""
    a = assumed.get((r.machine, kind(r.case)))
    if a:
        return a.half_pct, a.source
    k = kind(r.case)
    return DEFAULT_HALF_PCT[k], (f"assumed +-{DEFAULT_HALF_PCT[k]:g}%: the default for a {k} case, no run of "
                                 f"{MIN_PROCESSES}+ processes of one stored on {r.machine}")


def judge(a: Record, b: Record, assumed: dict, include_old: bool = False) -> dict:
    """B against A: change, combined noise and verdict (verdicts.compare), and which noise was assumed."""
    ha, why_a = noise_for(a, assumed, include_old)
    hb, why_b = noise_for(b, assumed, include_old)
    c = verdicts.compare(a.images_per_s, ha, b.images_per_s, hb)
    c["assumed"] = (f"both {why_a}" if why_a and why_a == why_b else
                    "; ".join(f"{side} {why}" for side, why in (("a", why_a), ("b", why_b)) if why))
    return c


def text(c: dict) -> str:
    """The noise a verdict used, in a sentence's words."""
    base = verdicts.noise_text(c)
    return base + (f" ({c['assumed']})" if c.get("assumed") and c["noise_pct"] is not None else "")
