"""Every case of a machine and commit: a short label per case, the table a terminal can show, and
every column for --wide and the CSV export."""
from __future__ import annotations

from tabulate import tabulate

from ..analysis.diagnose import diagnose
from ..core import model_flops, sharing
from ..core.identity import differing_fields
from ..core.labels import describe, noise
from ..store.record import Record
from . import i18n
from .text import fmt, marked, table, wrap


def distinguishing(records: list[Record]) -> dict[str, str]:
    """Case id -> the knobs that tell it apart from records sharing its recipe name ('' where none do)."""
    by_name: dict = {}
    for r in records:
        by_name.setdefault(r.case["name"], []).append(r)
    out = {}
    for recs in by_name.values():
        keys = sorted({k for a in recs for b in recs for k in differing_fields(a.case, b.case)} - {"gpus"})
        for r in recs:
            c = r.case
            knobs = [("NHWC" if c[k] else "NCHW") if k == "channels_last" else f"{k}={c[k]}" for k in keys]
            out[r.case_id] = f"[{', '.join(knobs)}]" if knobs else ""
    return out


def short_labels(records: list[Record]) -> dict[str, str]:
    """Case id -> its recipe name, plus the knobs that tell apart records sharing that name."""
    names = {r.case_id: r.case["name"] for r in records}
    return {case_id: names[case_id] + (f" {k}" if k else "") for case_id, k in distinguishing(records).items()}


def diagnosis(r: Record) -> dict:
    """Stored with the result; derived here for older results (without MFU, no peak known), and again
    where its FLOPs were counted another way than today's (with the peak it stored)."""
    d = r.data.get("diagnosis")
    if d is None:
        r.data["diagnosis"] = diagnose(r.data) if r.ok and r.data.get("ranks") else {}
    elif "model_flops_per_image" in d and d.get("flops_method") != model_flops.METHOD:
        rate = d.get("peak_flops_per_s")
        r.data["diagnosis"] = diagnose(r.data, {"flops_per_s": {r.case["precision"]: rate}} if rate else None)
    return r.data["diagnosis"]


def _stall(m: dict) -> str:
    v = m.get("input_stall_pct")
    return "-" if v is None else f"{v:.1f}"


def _order(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.sweep, r.case["gpus"], r.case["name"], r.case_id))


def cases_table(records: list[Record], lang: str) -> tuple[str, list[str]]:
    """One row per case, every row one line (Markdown renders it as written): what tells apart cases
    of one recipe, a deliberate slowdown and a failure's reason are keyed notes under the table."""
    knobs = distinguishing(records)
    rows, notes, keys = [], [], {}
    for r in _order(records):
        m = r.metrics
        label = r.case["name"] + ("^" if r.rederived else "" if r.current else "*")
        extra = knobs[r.case_id]
        extra += f" (slowed {r.slowed_pct:g}% on purpose)" if r.slowed_pct else ""
        if not r.ok:
            extra += f"{'; ' if extra else ''}{r.status}: {r.data.get('reason', '')}"
        if r.gpu_shared:
            extra += f"{'; ' if extra else ''}{i18n.t(lang, 'gpu_shared_note', seen=sharing.summary(r.gpu_shared))}"
        elif r.shared_label:
            extra += f"{'; ' if extra else ''}{i18n.t(lang, 'host_shared_note', pct=f'{r.host_outside_pct:.0f}')}"
        if extra:
            key = keys.setdefault((r.case["name"], extra), f"[{len(keys) + 1}]")
            label += f" {key}"
        bound = i18n.word(lang, diagnosis(r).get("verdict", "")) if r.ok else i18n.word(lang, r.status)
        rows.append([r.sweep, label, str(r.case["gpus"]), fmt(r.images_per_s) + marked(r, lang) if r.ok else "-",
                     noise(m) if r.ok and r.ci95 else "-", _stall(m) if r.ok else "-", bound or "-"])
    notes += [ln for (name, extra), key in keys.items() for ln in wrap(f"- {key} {name}: {extra}")]
    if any(not r.current or r.rederived for r in records):
        notes.append(i18n.t(lang, "old_mark"))
    return table(rows, i18n.t(lang, "cases_cols"), ("left", "left", "right", "right", "right", "right", "left")), notes


FULL_COLUMNS = ["sweep", "case", "GPUs", "batch/GPU", "batch (global)", "configuration", "status",
                "images/s", "images/s per GPU", "noise (95%)", "input stall %", "data wait %", "step ms (median)",
                "peak memory GiB", "all-reduces/step", "MFU %", "host CPU outside the run %", "verdict", "reason"]


def full_rows(records: list[Record]) -> list[list]:
    """Every column of every case, in the tables' order."""
    rows = []
    for r in _order(records):
        m, c, ok = r.metrics, r.case, r.ok
        d = diagnosis(r)
        calls, mfu = m.get("allreduce_calls_per_step"), d.get("mfu_pct")
        rows.append([
            r.sweep, c["name"], c["gpus"], c["batch_size"], c["batch_size"] * c["gpus"], describe(c),
            r.status + (" (re-derived)" if r.rederived else "" if r.current else " (older definition)")
            + (f" (slowed {r.slowed_pct:g}% on purpose)" if r.slowed_pct else "") + marked(r),
            f"{m['images_per_s']:.1f}" if ok else "-", f"{m['images_per_s_per_gpu']:.1f}" if ok else "-",
            noise(m) if ok else "-", _stall(m) if ok else "-", f"{m['data_wait_pct']:.1f}" if ok else "-",
            f"{m['step_time_median_s'] * 1000:.1f}" if ok else "-",
            f"{m['peak_memory_bytes'] / 2**30:.2f}" if ok else "-",
            ("-" if calls is None else f"{calls:g}") if ok else "-", "-" if mfu is None else f"{mfu:.1f}",
            "-" if r.host_outside_pct is None else f"{r.host_outside_pct:.1f}",
            f"{d['verdict']} ({d['evidence']})" if d.get("verdict") else "-", (r.data.get("reason") or "")[:120],
        ])
    return rows


def full_table(records: list[Record]) -> str:
    return tabulate(full_rows(records), headers=FULL_COLUMNS, tablefmt="github", disable_numparse=True)
