"""Throughput of the same cases in two commits or two runs, judged against their noise, and a gate
for regressions (`--fail-under PCT`).

A side is a run id (that run's records), a commit (its latest run of each case, exact tree: `-dirty`
only by name) or a result folder. Cases are matched by case id (core/identity.py: the recipe and its
knobs, however long each side measured it). A figure without an interval is judged against the
machine's assumed noise (analysis/noise.py). A case on one side only is `not in both`: no regression
unless `require_same_cases`; a case ok in A and failed in B is one. When nothing could be judged the
comparison is refused (exit 2), never a pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core import sharing, verdicts
from ..core.errors import FAILED, CompareError
from ..core.files import write_json_atomic
from ..store import query
from ..store.record import Record
from . import feed, noise

FAILED_IN_B, FAILED_IN_A, NOT_IN_BOTH, NEITHER = "failed in b", "failed in a", "not in both", "ok in neither"
JUDGED = (verdicts.FASTER, verdicts.SLOWER, verdicts.WITHIN, FAILED_IN_B)


def resolve(ref: str, records: list[query.Record], machine: str | None = None) -> tuple[str, list[query.Record]]:
    """(how the side was chosen, its records): a run id, a commit's latest runs, or a folder."""
    pool = query.select(records, machine=machine)
    by_run = [r for r in pool if r.run_id == ref or (len(ref) >= 10 and r.run_id.startswith(ref))]
    if by_run:
        return f"run {by_run[0].run_id}", by_run
    folder = Path(ref)
    if folder.is_dir():
        recs, _ = query.load([folder])
        return f"folder {ref}", query.latest(recs)
    by_commit = query.select(pool, commit=ref)
    if not by_commit:
        dirty = query.select(pool, commit=ref + "-dirty") if not ref.endswith("-dirty") else []
        hint = f" (a dirty tree of it is stored: ask for {ref}-dirty)" if dirty else ""
        raise CompareError(f"{ref!r} is neither a run id, a result folder nor a commit with results"
                           + (f" on {machine}" if machine else "") + hint)
    machines = sorted({r.machine for r in by_commit})
    if len(machines) > 1:
        raise CompareError(f"{ref!r} has results on several machines ({', '.join(machines)}); pick one with --machine")
    return f"commit {by_commit[0].commit} (latest run of each case)", query.latest(by_commit)


def _hardware(records: list[Record]) -> set:
    """The machines' GPUs. Not the cases' devices: a device is part of each case id, so a case on the CPU
    ranks of a GPU machine (bench feed) is matched with its own kind alone, and does not make its commit
    another machine's."""
    return {(r.data["env"].get("gpu_model"), r.data["env"].get("gpu_count")) for r in records}


def _by_case(records: list[Record]) -> dict[str, Record]:
    """Each side's latest record per case id."""
    return {r.case_id: r for r in sorted(records, key=lambda r: (r.started_at, r.run_id))}


@dataclass
class Comparison:
    rows: list[dict]
    kind: str
    """`A/A` (the same tree twice) or `A/B`."""
    a: dict
    b: dict
    """Each side as data: label, machine, commits, run ids, metric definitions, record count."""
    threshold_pct: float | None = None
    require_same_cases: bool = False
    regressed: list[dict] = field(default_factory=list)
    method: str = "against both sides' 95% intervals"
    """How each verdict weighed the change against the noise."""

    @property
    def exit_code(self) -> int:
        return FAILED if self.regressed else 0

    def summary(self) -> dict:
        counts: dict = {}
        for r in self.rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        return {"kind": self.kind, "method": self.method, "a": self.a, "b": self.b, "threshold_pct": self.threshold_pct,
                "require_same_cases": self.require_same_cases, "counts": counts,
                "regressed": [r["case"] for r in self.regressed], "exit_code": self.exit_code}


def side(label: str, records: list[Record]) -> dict:
    return {"label": label, "machines": sorted({r.machine for r in records}),
            "commits": sorted({r.commit for r in records}), "runs": query.runs_of(records),
            "images_per_s_definitions": sorted({r.definitions.get("images_per_s", 1) for r in records}),
            "rederived": sum(r.rederived for r in records), "records": len(records)}


def compare(a_records: list[Record], b_records: list[Record], force: bool = False, include_old: bool = False,
            assumed: dict | None = None) -> list[dict]:
    """One row per case id on either side, with its verdict; CompareError when nothing can be judged."""
    ha, hb = _hardware(a_records), _hardware(b_records)
    if ha != hb and not force:
        raise CompareError(f"the results come from different hardware ({sorted(ha, key=str)} against "
                           f"{sorted(hb, key=str)}); compare them anyway with --force")
    assumed = noise.assumed_noise(a_records + b_records) if assumed is None else assumed
    ia, ib = _by_case(a_records), _by_case(b_records)
    rows = [_row(ia.get(k), ib.get(k), assumed, include_old) for k in sorted(set(ia) | set(ib))]
    if not any(r["verdict"] in JUDGED for r in rows):
        both = sum(r["a_images_per_s"] is not None and r["b_images_per_s"] is not None for r in rows)
        raise CompareError(f"nothing could be judged: {len(ia)} case(s) in a, {len(ib)} in b, {both} ok on both "
                           "sides" + (", none with a noise to judge against (older definitions; --include-old "
                                      "judges them by their windows)" if both else ""))
    return rows


def _row(a: Record | None, b: Record | None, assumed: dict, include_old: bool) -> dict:
    row = {"case": (b or a).case_id, "sweep": (b or a).sweep, "a_images_per_s": a.images_per_s if a else None,
           "b_images_per_s": b.images_per_s if b else None, "delta_pct": None, "noise_pct": None, "note": "",
           # a figure measured beside someone else's work says so, judged or not (store/record.shared_label)
           "a_shared": a.shared_label if a else "", "b_shared": b.shared_label if b else "",
           "a_file": a.path if a else None, "b_file": b.path if b else None}
    if a and a.ok and b and b.ok and (a.gpu_shared or b.gpu_shared):
        # measured beside someone else's work: its change is no noise of this machine's to judge
        c = verdicts.compare(a.images_per_s, None, b.images_per_s, None)
        where = " and ".join(side for side, r in (("a", a), ("b", b)) if r.gpu_shared)
        row.update(delta_pct=c["delta_pct"], verdict=verdicts.SHARED,
                   note=f"GPU shared in {where}: " + sharing.summary((a.gpu_shared or b.gpu_shared), 1))
    elif a and a.ok and b and b.ok and feed.undrained(a) != feed.undrained(b):
        # the same cold feed case, measured before and after its windows drained the eviction's queue:
        # two different measurements under one id, so their change is the fix's, not the code's
        c = verdicts.compare(a.images_per_s, None, b.images_per_s, None)
        row.update(delta_pct=c["delta_pct"], verdict=verdicts.INCONCLUSIVE,
                   note=f"cold windows undrained in {'a' if feed.undrained(a) else 'b'} (flattered): not judged")
    elif a and a.ok and b and b.ok:
        c = noise.judge(a, b, assumed, include_old)
        old = not (a.current and b.current)
        row.update(delta_pct=c["delta_pct"], noise_pct=c["noise_pct"], verdict=c["verdict"],
                   note="older metric definition" if old else c["assumed"])
    elif a and a.ok and b:
        row.update(verdict=FAILED_IN_B, note=f"{b.status}: {b.data.get('reason', '')}"[:200])
    elif a and a.ok:
        row.update(verdict=NOT_IN_BOTH, note="only in a")
    elif b and b.ok and a:
        row.update(verdict=FAILED_IN_A, note=f"{a.status} in a")
    elif b and b.ok:
        row.update(verdict=NOT_IN_BOTH, note="only in b")
    else:
        row.update(verdict=NEITHER if a and b else NOT_IN_BOTH, note=f"{(b or a).status} in {'b' if b else 'a'}")
    return row


def regressions(rows: list[dict], fail_under_pct: float, require_same_cases: bool = False) -> list[dict]:
    """Cases slower by more than the threshold beyond their noise, cases ok in A but failed in B, and
    with `require_same_cases` cases ok in A and missing in B."""
    return [r for r in rows if (r["verdict"] == verdicts.SLOWER and -r["delta_pct"] > fail_under_pct)
            or r["verdict"] == FAILED_IN_B
            or (require_same_cases and r["verdict"] == NOT_IN_BOTH and r["a_images_per_s"] is not None)]


def kind(a_records: list[Record], b_records: list[Record]) -> str:
    """`A/A` when both sides are the same tree and the same cases on the same hardware, unaltered."""
    same_tree = {(r.full_commit, r.dirty) for r in a_records} == {(r.full_commit, r.dirty) for r in b_records}
    same_cases = {r.case_id for r in a_records} == {r.case_id for r in b_records}
    slowed = any(r.slowed_pct for r in a_records + b_records)
    return "A/A" if same_tree and same_cases and _hardware(a_records) == _hardware(b_records) and not slowed else "A/B"


def judge_sides(a_label: str, a_records: list[Record], b_label: str, b_records: list[Record],
                fail_under_pct: float | None = None, require_same_cases: bool = False, force: bool = False,
                include_old: bool = False, assumed: dict | None = None) -> Comparison:
    """The whole comparison: rows, kind, both sides as data, and (with a threshold) what regressed."""
    rows = compare(a_records, b_records, force, include_old, assumed)
    bad = regressions(rows, fail_under_pct, require_same_cases) if fail_under_pct is not None else []
    return Comparison(rows, kind(a_records, b_records), side(a_label, a_records), side(b_label, b_records),
                      fail_under_pct, require_same_cases, bad)


def to_json(c: Comparison, root: str | Path = "") -> dict:
    """The comparison as data: its summary and every case; files named relative to the results root,
    so the JSON travels."""
    keep = ("case", "sweep", "a_images_per_s", "b_images_per_s", "delta_pct", "noise_pct", "verdict", "note",
            "a_file", "b_file", "pairs", "ci95_pct", "df", "a_images_per_s_processes", "b_images_per_s_processes")
    root = str(Path(root).resolve()) if root else ""

    def rel(v):
        return v[len(root):].lstrip("/") if root and isinstance(v, str) and v.startswith(root) else v
    return {"summary": c.summary(),
            "cases": [{k: rel(r.get(k)) if k.endswith("_file") else r.get(k) for k in keep if k in r} for r in c.rows]}


def write_json(path: str | Path, doc: dict) -> None:
    """The comparison at `path`; a path that cannot be written is a refusal, said in one line."""
    try:
        write_json_atomic(path, doc, indent=1)
    except OSError as e:
        raise CompareError(f"--json {path} cannot be written ({e.strerror or e}); pass a writable path") from None
