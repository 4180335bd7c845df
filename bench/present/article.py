"""The article's table (baseline against optimized per GPU count, its five columns exactly) and the
efficiency, interval and configuration behind each cell."""
from __future__ import annotations

from tabulate import tabulate

from ..core import stats
from ..core.labels import describe, noise
from ..store import query
from ..store.record import Record
from . import i18n
from .text import fmt, marked, table, wrap

ARTICLE_GPU_COUNTS = (1, 2, 4)  # the rows of the article's table
BASELINE = "seed-baseline"


def _gpu_count(records: list[Record]) -> int:
    return max((r.data["env"].get("gpu_count") or 0 for r in records), default=0)


def _noise(r: Record | None) -> str:
    return noise(r.metrics) if r else "-"


def article_table(records: list[Record], lang: str, optimized: str = "seed-optimized") -> tuple[str, list[str], list]:
    """The article's five columns exactly, numbers right-aligned; each missing cell says why in a note.
    Returns (table, notes, [(GPUs, baseline record, optimized record)])."""
    names = (BASELINE, optimized)
    mine, setting = query.article_cells(records, names)
    if setting is None:
        return i18n.t(lang, "no_pair"), [], []
    per_gpu = setting[2]
    ok = {n: query.by_name_and_gpus(mine, n) for n in names}
    tried = {n: {r.case["gpus"]: r for r in sorted(mine, key=lambda r: r.started_at) if r.case["name"] == n}
             for n in names}
    stored = set(tried[names[0]]) | set(tried[names[1]])
    on_gpus = any(r.case["device"] == "cuda" for r in mine)
    counts = sorted(stored | (set(ARTICLE_GPU_COUNTS) if on_gpus else set()))
    machine_gpus = _gpu_count(records)
    rows, notes, pairs = [], [], []
    for n in counts:
        cells = []
        for name, side in zip(names, i18n.t(lang, "sides")):
            r = ok[name].get(n)
            cells.append(r.images_per_s if r else None)
            if not r:
                failed = tried[name].get(n)
                why = (i18n.t(lang, "failed", status=f"{failed.status}: {failed.data.get('reason', '')}"[:160]) if failed
                       else i18n.t(lang, "not_run_gpus", n=n) if on_gpus and n > machine_gpus
                       else i18n.t(lang, "not_stored"))
                notes += wrap("- " + i18n.t(lang, "missing_cell", n=n, side=side, why=why))
        b, o = cells
        improvement = f"{stats.improvement_pct(b, o):+.1f}%" if b and o else "-"
        rb, ro = ok[names[0]].get(n), ok[names[1]].get(n)
        rows.append([str(n), f"{per_gpu * n:,}", fmt(b) + marked(rb, lang), fmt(o) + marked(ro, lang),
                     improvement])
        pairs.append((n, rb, ro))
    notes = wrap(i18n.t(lang, "setting", model=setting[0], px=setting[1], batch=per_gpu)) + notes
    return table(rows, i18n.t(lang, "seed_cols"), ("right",) * 5), notes, pairs


def details_table(pairs: list, lang: str) -> tuple[str, list[str]]:
    """Efficiency and the 95% interval of each cell of the article's table, and what ran."""
    one_b = next((b for n, b, _ in pairs if n == 1 and b), None)
    one_o = next((o for n, _, o in pairs if n == 1 and o), None)

    def eff(r, one, n):
        return f"{stats.scaling_efficiency(r.images_per_s, n, one.images_per_s):.1f}%" if r and one else "-"
    rows = [[str(n), eff(b, one_b, n), eff(o, one_o, n), _noise(b), _noise(o)] for n, b, o in pairs if b or o]
    configs = sorted({(describe(b.case) if b else "-", describe(o.case) if o else "-") for _, b, o in pairs if b or o})
    notes = [ln for bc, oc in configs for ln in wrap(i18n.t(lang, "configs", b=bc, o=oc))]
    return table(rows, i18n.t(lang, "details_cols"), ("right",) * 5), notes


HEADINGS = {
    "en": ["GPUs", "Batch size (global)", "Baseline throughput (images/s)",
           "Optimized throughput (images/s)", "Improvement"],
    # the article's own headings, for side-by-side reading with it
    "zh": ["GPU数量", "Batch Size", "基础配置吞吐量", "优化后吞吐量", "提升比例"],
}
EXTRA_HEADINGS = ["Baseline efficiency", "Optimized efficiency", "Baseline noise (95%)", "Optimized noise (95%)",
                  "Baseline config", "Optimized config"]


def seed_rows(records: list[Record], optimized: str = "seed-optimized", baseline: str = BASELINE) -> list[list]:
    """Every column of the seed table, one row per GPU count (--wide and the CSV export)."""
    mine, _ = query.article_cells(records, (baseline, optimized))
    base, opt = query.by_name_and_gpus(mine, baseline), query.by_name_and_gpus(mine, optimized)
    rows = []
    for n in sorted(set(base) | set(opt)):
        b, o = base.get(n), opt.get(n)
        b_ips, o_ips = (b.images_per_s if b else None), (o.images_per_s if o else None)
        batch = (b or o).metrics["global_batch"]
        improvement = f"{stats.improvement_pct(b_ips, o_ips):.1f}%" if b and o else "-"

        def eff(side, ips):
            one = side.get(1)
            return f"{stats.scaling_efficiency(ips, n, one.images_per_s):.1f}%" if one and ips else "-"

        rows.append([n, batch, _num(b_ips) + marked(b), _num(o_ips) + marked(o), improvement, eff(base, b_ips), eff(opt, o_ips),
                     _noise(b), _noise(o), describe(b.case) if b else "-", describe(o.case) if o else "-"])
    return rows


def _num(x):
    return f"{x:.1f}" if x is not None else "-"


def seed_table(records: list[Record], lang: str = "en") -> str:
    rows = seed_rows(records)
    if not rows:
        return "(no stored baseline/optimized pair: run the `seed` or `best` sweep)"
    return tabulate(rows, headers=HEADINGS[lang] + EXTRA_HEADINGS, tablefmt="github", disable_numparse=True)
