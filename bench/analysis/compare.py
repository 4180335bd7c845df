"""Throughput of the same cases in two commits or two runs, judged against their noise, and a gate
for regressions (`--fail-under PCT`).

A side is a run id (that run's records), a commit (its latest run of each case, exact tree: `-dirty`
only by name) or a result folder. Cases are matched by recipe and knobs (core/identity.py: how long
they were measured may differ); a case on one side only is listed,
and one that is ok in A but failed or missing in B fails the gate. Two sides with no case ok in both
are an error, never a pass.
"""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from ..core import identity, verdicts
from ..core.errors import CompareError
from ..core.files import write_json_atomic
from ..store import query

FAILED_IN_B, ONLY_IN_A, ONLY_IN_B = "failed in b", "only in a", "only in b"


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


def _hardware(records: list[query.Record]) -> set:
    return {(r.data["env"].get("gpu_model"), r.data["env"].get("gpu_count"), r.data["case"]["device"]) for r in records}


def _by_case(records: list[query.Record]) -> dict[str, query.Record]:
    """Each side's latest record per recipe and knobs."""
    return {identity.match_key(r.case): r for r in sorted(records, key=lambda r: (r.started_at, r.run_id))}


def compare(a_records: list[query.Record], b_records: list[query.Record], force: bool = False,
            include_old: bool = False) -> list[dict]:
    ha, hb = _hardware(a_records), _hardware(b_records)
    if ha != hb and not force:
        raise CompareError(f"the results come from different hardware ({sorted(ha, key=str)} against "
                           f"{sorted(hb, key=str)}); compare them anyway with --force")
    ia, ib = _by_case(a_records), _by_case(b_records)
    rows = []
    for key in sorted(set(ia) | set(ib), key=lambda k: (ib.get(k) or ia.get(k)).case_id):
        a, b = ia.get(key), ib.get(key)
        row = {"case": (b or a).case_id, "sweep": (b or a).sweep, "a_images_per_s": None, "b_images_per_s": None,
               "delta_pct": None, "noise_pct": None,
               "a_file": a.path if a else None, "b_file": b.path if b else None}
        if a and a.ok:
            row["a_images_per_s"] = a.images_per_s
        if b and b.ok:
            row["b_images_per_s"] = b.images_per_s
        if a and a.ok and b and b.ok:
            old = not (a.current and b.current)
            ha_pct = verdicts.half_width_pct(a.metrics, within_process_ok=include_old)
            hb_pct = verdicts.half_width_pct(b.metrics, within_process_ok=include_old)
            if old and not include_old:
                ha_pct = hb_pct = None  # an older definition is shown, never judged, unless asked for
            c = verdicts.compare(row["a_images_per_s"], ha_pct, row["b_images_per_s"], hb_pct)
            row.update(delta_pct=c["delta_pct"], noise_pct=c["noise_pct"], verdict=c["verdict"],
                       note="older metric definition" if old else "")
        elif a and a.ok:
            row.update(verdict=FAILED_IN_B if b else ONLY_IN_A,
                       note=f"{b.status}: {b.data.get('reason', '')}"[:200] if b else "")
        elif b and b.ok:
            row.update(verdict=ONLY_IN_B, note=f"{a.status} in a" if a else "")
        else:
            row.update(verdict=FAILED_IN_B if b else ONLY_IN_A, note="ok in neither")
        rows.append(row)
    if not any(r["delta_pct"] is not None for r in rows):
        raise CompareError(f"no case is ok on both sides ({len(ia)} case(s) in a, {len(ib)} in b): nothing to compare")
    return rows


def regressions(rows: list[dict], fail_under_pct: float) -> list[dict]:
    """Cases slower by more than the threshold beyond their noise, and cases ok in A but failed or
    missing in B."""
    return [r for r in rows if (r["verdict"] == verdicts.SLOWER and -r["delta_pct"] > fail_under_pct)
            or (r["verdict"] in (FAILED_IN_B, ONLY_IN_A) and r["a_images_per_s"] is not None)]


def kind(a_records: list[query.Record], b_records: list[query.Record]) -> str:
    """`A/A` when both sides are the same tree and the same cases on the same hardware, unaltered."""
    same_tree = {(r.full_commit, r.dirty) for r in a_records} == {(r.full_commit, r.dirty) for r in b_records}
    same_cases = {identity.match_key(r.case) for r in a_records} == {identity.match_key(r.case) for r in b_records}
    slowed = any(r.data.get("injected_slowdown_pct") for r in a_records + b_records)
    return "A/A" if same_tree and same_cases and _hardware(a_records) == _hardware(b_records) and not slowed else "A/B"


def to_json(rows: list[dict], a_label: str, b_label: str, kind_: str, root: str | Path = "") -> dict:
    """The comparison as data; files named relative to the results root, so the JSON travels."""
    keep = ("case", "sweep", "a_images_per_s", "b_images_per_s", "delta_pct", "noise_pct", "verdict", "note",
            "a_file", "b_file")
    root = str(Path(root).resolve()) if root else ""

    def rel(v):
        return v[len(root):].lstrip("/") if root and isinstance(v, str) and v.startswith(root) else v
    return {"a": a_label, "b": b_label, "kind": kind_,
            "cases": [{k: rel(r.get(k)) if k.endswith("_file") else r.get(k) for k in keep} for r in rows]}


def write_json(path: str | Path, doc: dict) -> None:
    """The comparison at `path`; a path that cannot be written is a refusal, said in one line."""
    try:
        write_json_atomic(path, doc, indent=1)
    except OSError as e:
        raise CompareError(f"--json {path} cannot be written ({e.strerror or e}); pass a writable path") from None


def _num(x):
    return "-" if x is None else f"{x:,.1f}"


def render(rows: list[dict], a_name: str, b_name: str) -> str:
    table = [[r["case"], _num(r["a_images_per_s"]), _num(r["b_images_per_s"]),
              "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}%",
              "-" if r["noise_pct"] is None else f"+-{r['noise_pct']:.1f}%", r["verdict"]] for r in rows]
    return tabulate(table, headers=["case", "images/s a", "images/s b", "change", "noise (95%)", "verdict"],
                    tablefmt="github", disable_numparse=True) + f"\n\na: {a_name}\nb: {b_name}"


def history(case_ref: str, records: list[query.Record]) -> list[list]:
    """That case (its exact id) in every stored run, oldest first."""
    rows = []
    for r in sorted(records, key=lambda r: (r.started_at, r.run_id)):
        if r.case_id == case_ref:
            m = r.metrics
            ci = m.get("images_per_s_ci95")
            rows.append([r.started_at, r.commit, r.run_id, r.machine, r.sweep, r.status,
                         f"{r.images_per_s:,.1f}" if r.ok else "-",
                         (f"{ci[0]:,.1f}-{ci[1]:,.1f}" if ci else f"windows' spread {m['spread_pct']:.1f}%") if r.ok else "-"])
    return rows
