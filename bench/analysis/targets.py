"""The suite's own performance targets on ResNet-50 / 224 px, read from the `targets` sweep."""
from __future__ import annotations

from ..core import identity, stats, verdicts
from ..store import query
from ..store.query import Record
from ..core.labels import noise
from .diagnose import harness_overhead_pct, power_text

_best = query.fastest


def _row(target, needed, measured, met, evidence, bound=""):
    """`met` is True, False, None (not measured) or a status word of its own (`within noise`)."""
    status = met if isinstance(met, str) else "met" if met else ("not measured" if met is None else "missed")
    return [target, needed, measured, status, evidence, bound]


def against(measured: float, needed: float, half_pct: float | None):
    """A figure against a floor it must reach, with its noise: met when even the bottom of its 95% interval
    (half_pct of the figure each side) reaches the floor, missed when even the top stays below it, `within
    noise` when the interval holds the floor; a figure without an interval is judged by its value."""
    if half_pct is None:
        return measured >= needed
    margin = abs(measured) * half_pct / 100
    if measured - margin >= needed:
        return True
    return False if measured + margin < needed else verdicts.WITHIN


def evaluate(records: list[Record]) -> list[list]:
    rows = []
    eager, compiled = _best(records, "target-single-eager", 1), _best(records, "target-single-compiled", 1)
    best1 = max([r for r in (eager, compiled) if r], key=lambda r: r.images_per_s, default=None)
    if best1:
        ips = best1.images_per_s
        helps = compiled and eager and compiled.images_per_s > eager.metrics["images_per_s_max"]
        note = (f"compile {'helps' if helps else 'does not help'}: eager {eager.images_per_s:.0f}, "
                f"compiled {compiled.images_per_s:.0f} (first step {compiled.metrics['first_step_s']:.0f} s)"
                if eager and compiled else "")
        rows.append(_row("best single GPU, synthetic", ">= 6500 images/s", f"{ips:.0f}", ips >= 6500, note,
                         (best1.data.get("diagnosis") or {}).get("verdict", "")))
    else:
        rows.append(_row("best single GPU, synthetic", ">= 6500 images/s", "-", None, "run the targets sweep"))
    gpus = sorted({r.case["gpus"] for r in records if r.case["name"] == "target-ddp" and r.case["gpus"] > 1})
    for n in gpus or [2]:
        one, many = _best(records, "target-ddp", 1), _best(records, "target-ddp", n)
        if one and many:
            eff = stats.scaling_efficiency(many.images_per_s, n, one.images_per_s)
            d = many.data.get("diagnosis") or {}
            rows.append(_row(f"DDP scaling efficiency, {n} GPUs", ">= 97%", f"{eff:.1f}%", eff >= 97,
                             f"{many.images_per_s:.0f} against {n} x {one.images_per_s:.0f}",
                             d.get("verdict", "")))
        else:
            rows.append(_row(f"DDP scaling efficiency, {n} GPUs", ">= 97%", "-", None, "run the targets sweep"))
        for g in (1, n):
            synth = _best(records, "target-ddp", g)
            loaders = [r for r in (_best(records, f"target-dali-{d}", g) for d in ("mixed", "cpu")) if r]
            loaders += [r for r in [_best(records, "target-torch", g)] if r]
            if synth and loaders:
                top = max(loaders, key=lambda r: r.images_per_s)
                share = 100 * top.images_per_s / synth.images_per_s
                rows.append(_row(f"best loader end to end, {g} GPU(s)", ">= 90% of synthetic", f"{share:.1f}%", share >= 90,
                                 f"{top.case['name']}: {top.images_per_s:.0f} against "
                                 f"{synth.images_per_s:.0f}", (top.data.get("diagnosis") or {}).get("verdict", "")))
    rows += ddp_cost_rows(records)
    rows += recommend_rows(records)
    over = harness_overhead_pct(eager.data["ranks"]) if eager else None
    rows.append(_row("harness overhead", "< 2% of step time", "-" if over is None else f"{over:.2f}%",
                     None if over is None else over < 2, "same case timed in a minimal loop in the same run"))
    return rows


DDP_COST_NEEDED_PCT = 98.0


def ddp_cost_rows(records: list[Record]) -> list[list]:
    """Tuned DDP on one GPU against single, per precision (the `ddp-cost` sweep): what DDP costs a rank."""
    rows = []
    for p in sorted({r.case["precision"] for r in records if r.case["name"].startswith("target-ddp-cost-")}):
        in_p = [r for r in records if r.case["precision"] == p]
        single, tuned = (_best(in_p, f"target-ddp-cost-{k}", 1) for k in ("single", "tuned"))
        target = f"DDP on 1 GPU against single, {p} + NHWC"
        if not (single and tuned):
            rows.append(_row(target, f">= {DDP_COST_NEEDED_PCT:.0f}%", "-", None, "run the ddp-cost sweep"))
            continue
        share = 100 * tuned.images_per_s / single.images_per_s
        noise_pct = verdicts.compare_metrics(single.metrics, tuned.metrics)["noise_pct"]
        rows.append(_row(target, f">= {DDP_COST_NEEDED_PCT:.0f}%", f"{share:.1f}%",
                         against(share, DDP_COST_NEEDED_PCT, noise_pct),
                         f"DDP {tuned.images_per_s:.0f} ({noise(tuned.metrics)}) against single "
                         f"{single.images_per_s:.0f} ({noise(single.metrics)})"))
    return rows


RECOMMEND_ONE_GPU_NEEDED = 7600.0
"""images/s the synthetic winner of `bench recommend` on one GPU must reach (the goal is 8,000: MLPerf
Training v4.0 ran about 7,950 per H200 on ImageNet)."""
FED_NEEDED_PCT = 95.0
"""The JPEG-fed winner's share of the synthetic winner of the same `recommend --data` run."""


def recommend_winners(records: list[Record]) -> dict[tuple[int, str], dict]:
    """(GPU count, model) -> the latest `bench recommend` winner among these records' runs: its case (a
    dict), figure, run and recipe script (relative to the results root, None where none was written)."""
    runs = query.run_manifests([r for r in records if r.data.get("sweep", "").startswith("recommend")])
    out = {}
    for run_id, m in sorted(runs.items()):  # by run id: when they started, so the latest wins
        for found in m.get("recommend") or []:
            case = found.get("best_case")
            if case and found.get("best_images_per_s"):
                out[(found["gpus"], case.get("model", query.ARTICLE_MODEL))] = {
                    "case": case, "images_per_s": found["best_images_per_s"], "run": run_id,
                    "recipe": found.get("recipe")}
    return out


def recommend_rows(records: list[Record]) -> list[list]:
    """From the latest `bench recommend` run among these records, per GPU count: its synthetic winner on one
    GPU against RECOMMEND_ONE_GPU_NEEDED (with what bounds it, from the winner's own record), and, where
    it was given JPEGs, its fed winner against FED_NEEDED_PCT of the synthetic winner of that run."""
    runs = query.run_manifests([r for r in records if r.data.get("sweep", "").startswith("recommend")])
    latest = max((m for m in runs.values() if m.get("recommend")), key=lambda m: m.get("run_id", ""), default=None)
    if latest is None:
        return []
    rows = []
    for found in latest["recommend"]:
        gpus, best, run = found["gpus"], found.get("best_images_per_s"), latest["run_id"]
        if not best:
            continue
        ci = found.get("best_images_per_s_ci95")
        shown = f"{best:,.1f} images/s" + (f" (95% interval {ci[0]:,.1f}-{ci[1]:,.1f})" if ci else "")
        best_half = verdicts.half_width_pct({"images_per_s": best, "images_per_s_ci95": ci})
        if gpus == 1:
            record = next((r for r in records if r.case_id == found.get("best_case_id") and r.run_id == run), None)
            bound = power_text(record.data.get("diagnosis") or {}).removeprefix("; ") if record else ""
            rows.append(_row("recommend's synthetic winner, 1 GPU", f">= {RECOMMEND_ONE_GPU_NEEDED:.0f} images/s",
                             f"{best:.0f}", against(best, RECOMMEND_ONE_GPU_NEEDED, best_half),
                             f"run {run}: {shown}", bound))
        fed = found.get("fed_best_images_per_s")
        if fed:
            share = 100 * fed / best
            fed_half = _fed_half_pct(records, run, found)
            # the share's noise: both figures' half-widths in quadrature, as every comparison judges it
            noise_pct = verdicts.compare(best, best_half, fed, fed_half)["noise_pct"]
            fed_shown = f"{fed:,.1f}" + (f" (+-{fed_half:.1f}%)" if fed_half is not None else " (no interval)")
            rows.append(_row(f"recommend's JPEG-fed winner, {gpus} GPU(s)", f">= {FED_NEEDED_PCT:.0f}% of synthetic",
                             f"{share:.1f}%", against(share, FED_NEEDED_PCT, noise_pct),
                             f"run {run}: fed {fed_shown} against the synthetic winner's {shown}"))
    return rows


def _fed_half_pct(records: list[Record], run: str, found: dict) -> float | None:
    """The fed winner's 95% half-width in percent, re-derived from the run's records (so older runs are
    judged the same way): the record of the fed winner's knobs that gave the manifest's figure, its
    confirmation in fresh processes where it had one; None where none has an interval."""
    named = next((r for r in records if r.run_id == run and r.case_id == found.get("fed_best_case_id")), None)
    if named is None:
        return None
    key = identity.knobs_key(named.case)
    same = [r for r in records if r.run_id == run and r.status == "ok" and identity.knobs_key(r.case) == key
            and r.images_per_s == found["fed_best_images_per_s"]]
    return verdicts.half_width_pct(same[0].metrics) if same else None


HEADERS = ["target", "needed", "measured", "status", "evidence", "bound by"]
