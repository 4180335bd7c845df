"""The noise a figure is judged against: its own 95% interval where it has one, else an explicit
assumed noise, the largest process-to-process spread this machine has shown for the same configuration
(the case's knobs, whatever its name: a noise floor measures the best case's) in stored runs of 3 or
more fresh processes, noise floors included, counting only runs that began no later than the judged
figure's own: what a verdict borrows is frozen when it is made, and
runs added later never move it. Where none is stored, a documented conservative default for its kind
of case (its loader). A verdict names which it used.

A run whose noise floor is too wide to judge by (process-to-process sd over NOISY_FLOOR_SD_PCT) or
that drifted between its start and end floors (medians DRIFT_PCT or more apart) is unreliable: its
figures are shown with a warning and judged `inconclusive`, and they teach the assumed noise nothing.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..core import identity, verdicts
from ..core.phrases import Phrase, phrase, render
from ..store import query
from ..store.record import Record

MIN_PROCESSES = 3
DEFAULT_HALF_PCT = {"synthetic": 5.0, "torch": 15.0, "dali": 15.0}
"""Where this machine stored no 3-process run of a kind: on one H200, fresh processes of a synthetic
case moved at most 3.9% across machine sessions, and a real loader's end-to-end figure 10.8% between
two processes (the torch DataLoader) and its windows 11.3% within one (DALI); these bounds sit above."""


NOISY_FLOOR_SD_PCT = 5.0
"""Floors on one H200 measured 0.3-1.1% sd; a CPU run at 68.7% printed figures no one should read."""
DRIFT_PCT = 5.0
"""Across machine sessions one H200 moved 3.9%: more than this within one run means the machine changed."""


class NoiseModel(dict):
    """(machine, knobs key) -> [(when, Assumed)]: each stored spread of that configuration with the time
    its run showed it; and `unreliable`: run id -> why its figures cannot be judged."""

    def __init__(self, *a, unreliable: dict | None = None):
        super().__init__(*a)
        self.unreliable = unreliable or {}

    def for_record(self, r: Record) -> Assumed | None:
        """The largest spread of r's configuration on r's machine shown no later than r began; None if none."""
        known = [a for when, a in self.get((r.machine, identity.knobs_key(r.case)), []) if when <= r.started_at]
        return max(known, key=lambda a: a.half_pct, default=None)


def unreliable_runs(manifests: dict[str, dict]) -> dict[str, Phrase]:
    """Run id -> why (a wide floor, or drift between its start and end floors), by the stated rule."""
    out = {}
    for run_id, m in manifests.items():
        start = m.get("noise_floor") or {}
        if "rel_sd" in start and 100 * start["rel_sd"] > NOISY_FLOOR_SD_PCT:
            out[run_id] = phrase("floor_too_wide", sd=f"{100 * start['rel_sd']:.1f}", n=start["n"],
                                 limit=f"{NOISY_FLOOR_SD_PCT:g}")
        elif (drift := floor_drift_pct(m)) is not None and abs(drift) >= DRIFT_PCT:
            out[run_id] = phrase("floor_moved", drift=f"{drift:+.1f}", limit=f"{DRIFT_PCT:g}")
    return out


def floor_drift_pct(manifest: dict) -> float | None:
    """How far a run's noise floor median moved from its start to its end, in percent; None where it
    lacks either floor."""
    start, end = manifest.get("noise_floor") or {}, manifest.get("noise_floor_end") or {}
    if "rel_sd" not in start or "rel_sd" not in end:
        return None
    return 100 * (statistics.median(end["images_per_s"]) / statistics.median(start["images_per_s"]) - 1)


@dataclass(frozen=True)
class Assumed:
    half_pct: float
    source: Phrase
    """Where the figure comes from: the run and case that showed that spread, or the default."""


def kind(case: dict) -> str:
    return case.get("loader", "synthetic")


def _spread_pct(figures: list[float]) -> float:
    return 100.0 * (max(figures) - min(figures)) / statistics.median(figures)


def assumed_noise(records: list[Record]) -> NoiseModel:
    """Per (machine, configuration): every spread of MIN_PROCESSES or more fresh processes stored, from
    records (their process figures) and their runs' noise floors, each with when it was shown;
    unreliable runs left out."""
    manifests = query.run_manifests(records)
    found = NoiseModel(unreliable=unreliable_runs(manifests))

    def offer(machine, key, when, figures, where):
        if len(figures) < MIN_PROCESSES or min(figures) <= 0:
            return
        spread = _spread_pct(figures)
        found.setdefault((machine, key), []).append(
            (when, Assumed(spread, phrase("assumed_spread", pct=f"{spread:.1f}", n=len(figures), machine=machine,
                                          where=where))))
    for r in records:
        figures = [p.get("images_per_s") for p in r.data.get("processes") or []]
        if r.ok and r.current and all(figures) and r.run_id not in found.unreliable and not r.gpu_shared:
            offer(r.machine, identity.knobs_key(r.case), r.started_at, figures,
                  phrase("case_run", name=r.case["name"], run=r.run_id))
    for run_id, m in manifests.items():
        if run_id in found.unreliable:
            continue
        for key, when in (("noise_floor", "started_at"), ("noise_floor_end", "finished_at")):
            floor = m.get(key) or {}
            if floor.get("images_per_s") and floor.get("case"):
                offer(m.get("machine", ""), identity.knobs_key(floor["case"]),
                      m.get(when) or m.get("started_at", ""), floor["images_per_s"], phrase("floor_run", run=run_id))
    return found


def noise_for(r: Record, assumed: dict, include_old: bool = False) -> tuple[float | None, Phrase | None]:
    """(half-width in percent, where it came from: None for the figure's own interval) for one record's figure."""
    if not r.current and not include_old:
        return None, phrase("older")  # shown, never judged, unless asked for
    why = getattr(assumed, "unreliable", {}).get(r.run_id)
    if why:
        return None, phrase("unreliable_run", run=r.run_id, why=why)
    measured = verdicts.half_width_pct(r.metrics, within_process_ok=include_old and not r.current)
    if measured is not None:
        return measured, None
    a = assumed.for_record(r) if isinstance(assumed, NoiseModel) else None
    if a:
        return a.half_pct, a.source
    k = kind(r.case)
    return DEFAULT_HALF_PCT[k], phrase("assumed_default", pct=f"{DEFAULT_HALF_PCT[k]:g}", kind=k, n=MIN_PROCESSES,
                                       machine=r.machine)


def judge(a: Record, b: Record, assumed: dict, include_old: bool = False) -> dict:
    """B against A: change, combined noise and verdict (verdicts.compare), and which noise was assumed
    (`assumed` in English, `assumed_phrase` for a report in another language)."""
    ha, why_a = noise_for(a, assumed, include_old)
    hb, why_b = noise_for(b, assumed, include_old)
    c = verdicts.compare(a.images_per_s, ha, b.images_per_s, hb)
    c["assumed_phrase"] = (phrase("both", why=why_a) if why_a and why_a == why_b else
                           [phrase("side", side=side, why=why) for side, why in (("a", why_a), ("b", why_b)) if why]
                           or None)
    c["assumed"] = render(c["assumed_phrase"]) if c["assumed_phrase"] else ""
    return c


def noise_phrase(c: dict) -> Phrase:
    """The noise a verdict used (or that there was none), and where it came from."""
    base = phrase("no_noise") if c["noise_pct"] is None else phrase("noise", pct=f"{c['noise_pct']:.1f}")
    return phrase("with_source", text=base, source=c["assumed_phrase"]) if c.get("assumed_phrase") else base
