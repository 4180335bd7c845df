"""Tidy exports: one CSV row per stored record (machine, commit, run, sweep, every knob, numbers as
numbers with their units in the column names, the interval as two columns), and the seed table as
numbers, one row per machine, commit and GPU count. pandas types the columns."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..core import stats
from ..core.labels import describe
from ..store import query
from ..store.record import Record
from .article import BASELINE
from .cases import diagnosis


def _ci(r: Record | None) -> tuple[float | None, float | None]:
    ci = r.ci95 if r and r.ok else None
    return (ci[0], ci[1]) if ci else (None, None)


def record_row(r: Record, latest: bool) -> dict:
    m, env, ok, d = r.metrics, r.data.get("env") or {}, r.ok, diagnosis(r)
    low, high = _ci(r)
    row = {"machine": r.machine, "commit": r.commit, "commit_full": r.full_commit, "dirty": r.dirty,
           "run_id": r.run_id, "sweep": r.sweep, "case_id": r.case_id, "stored_case_id": r.stored_id,
           "started_at": r.started_at, "latest_run_of_case": latest,
           "status": r.status, "reason": r.data.get("reason") or "", "images_per_s_definition":
               r.definitions.get("images_per_s", 1), "rederived": r.rederived, "older_definition": not r.current,
           "injected_slowdown_pct": float(r.slowed_pct), "processes": len(r.data.get("processes") or []) or 1,
           "images_per_s": r.images_per_s, "images_per_s_per_gpu": m.get("images_per_s_per_gpu") if ok else None,
           "images_per_s_ci95_low": low, "images_per_s_ci95_high": high,
           "windows_spread_pct": m.get("spread_pct") if ok else None, "data_wait_pct": m.get("data_wait_pct"),
           "input_stall_pct": m.get("input_stall_pct"),
           "step_time_median_ms": 1000 * m["step_time_median_s"] if ok else None,
           "peak_memory_gib": m["peak_memory_bytes"] / 2**30 if ok and m.get("peak_memory_bytes") else None,
           "allreduce_calls_per_step": m.get("allreduce_calls_per_step"),
           "mfu_pct": d.get("mfu_pct"), "bound_by": d.get("verdict") or "",
           "gpu_model": env.get("gpu_model") or "", "gpu_count": env.get("gpu_count") or 0,
           "torch": env.get("torch") or "", "cuda": env.get("cuda") or "", "dali": env.get("dali") or ""}
    for k, v in r.case.items():  # every knob, by its field name
        row[k] = ";".join("=".join(map(str, p)) for p in v) if k == "nccl_env" else v
    return row


FLOAT_COLUMNS = ("images_per_s", "images_per_s_per_gpu", "images_per_s_ci95_low", "images_per_s_ci95_high",
                 "windows_spread_pct", "data_wait_pct", "input_stall_pct", "step_time_median_ms", "peak_memory_gib",
                 "allreduce_calls_per_step", "mfu_pct", "injected_slowdown_pct")


def records_frame(records: list[Record]) -> pd.DataFrame:
    """Every record, the latest run of each case marked."""
    latest = {id(r) for r in query.latest(records)}
    ordered = sorted(records, key=lambda r: (r.machine, r.commit, r.sweep, r.case_id, r.started_at, r.run_id))
    frame = pd.DataFrame([record_row(r, id(r) in latest) for r in ordered])
    return frame.astype({c: "float64" for c in FLOAT_COLUMNS if c in frame}) if len(frame) else frame


def seed_frame(records: list[Record], optimized: str = "seed-optimized") -> pd.DataFrame:
    """The seed table per machine and commit (latest runs), numbers as numbers."""
    rows = []
    for (machine, commit), recs in query.group(records, "machine", "commit").items():
        mine, setting = query.article_cells(query.latest(recs), (BASELINE, optimized))
        if setting is None:
            continue
        base, opt = query.by_name_and_gpus(mine, BASELINE), query.by_name_and_gpus(mine, optimized)
        for n in sorted(set(base) | set(opt)):
            b, o = base.get(n), opt.get(n)
            row = {"machine": machine, "commit": commit, "model": setting[0], "image_size_px": setting[1],
                   "gpus": n, "batch_per_gpu": setting[2], "batch_global": setting[2] * n}
            for side, r, one in (("baseline", b, base.get(1)), ("optimized", o, opt.get(1))):
                low, high = _ci(r)
                row.update({f"{side}_images_per_s": r.images_per_s if r else None,
                            f"{side}_ci95_low": low, f"{side}_ci95_high": high,
                            f"{side}_scaling_efficiency_pct": stats.scaling_efficiency(r.images_per_s, n, one.images_per_s)
                            if r and one else None,
                            f"{side}_config": describe(r.case) if r else ""})
            row["improvement_pct"] = stats.improvement_pct(b.images_per_s, o.images_per_s) if b and o else None
            rows.append(row)
    frame = pd.DataFrame(rows)
    floats = [c for c in frame if c.endswith(("_images_per_s", "_low", "_high", "_pct"))]
    return frame.astype({c: "float64" for c in floats}) if len(frame) else frame


def write_csv(records: list[Record], path: Path) -> tuple[Path, Path]:
    """Every record at `path`, the seed table at `<path stem>.seed.csv`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records_frame(records).to_csv(path, index=False)
    seed = path.with_suffix(".seed.csv")
    seed_frame(records).to_csv(seed, index=False)
    return path, seed
