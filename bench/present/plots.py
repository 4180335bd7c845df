"""PNG plots from stored results: scaling against the ideal line, baseline against optimized,
and the ablation as a waterfall. Each function returns the file it wrote, or None if no data."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from ..store import query
from ..store.record import Record


def _pyplot():
    """matplotlib only where a plot is drawn (it takes a second to import), drawing to files only."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r.ok and not r.case.get("loader_only")]


def _error(r: Record) -> tuple[float, float]:
    """Distances from the figure to its 95% interval's ends (0 where none is stored)."""
    ci = r.ci95
    return (r.images_per_s - ci[0], ci[1] - r.images_per_s) if ci else (0.0, 0.0)


def _title(text: str, where: tuple) -> str:
    return f"{text}\n{where[0]}, commit {where[1]}; bars: 95% interval" if where else text


def scaling(records: list[Record], out: Path, where: tuple = ()) -> Path | None:
    lines = defaultdict(dict)
    for r in sorted(_ok(records), key=lambda r: r.started_at):
        c = r.case
        label = f"{c['name']} ({c['strategy']}, {c['precision']}{', NHWC' if c['channels_last'] else ''}, bs {c['batch_size']}/GPU)"
        lines[label][c["gpus"]] = r
    lines = {k: v for k, v in lines.items() if len(v) > 1 and 1 in v}
    if not lines:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (label, pts) in enumerate(sorted(lines.items())):
        xs = sorted(pts)
        colour = f"C{i % 10}"
        ys = [pts[x].images_per_s for x in xs]
        err = list(zip(*[_error(pts[x]) for x in xs]))
        ax.errorbar(xs, ys, yerr=err, fmt="o-", color=colour, label=label, capsize=3)
        ax.plot(xs, [ys[0] * x for x in xs], ":", color=colour, alpha=0.6)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("images/s (global)")
    ax.set_title(_title("Throughput against GPUs (dotted: linear scaling from one GPU)", where))
    ax.set_xticks(sorted({x for pts in lines.values() for x in pts}))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, out / "scaling.png")


def baseline_vs_optimized(records: list[Record], out: Path, optimized: str = "seed-optimized",
                          where: tuple = ()) -> Path | None:
    base, opt = query.by_name_and_gpus(records, "seed-baseline"), query.by_name_and_gpus(records, optimized)
    if not opt:
        return None
    counts = sorted(set(base) | set(opt))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labelled = set()
    for offset, table, label in ((-0.2, base, "baseline"), (0.2, opt, optimized)):
        for x, n in enumerate(counts):
            r = table.get(n)
            if r is None:  # a case that was not run is marked, never drawn as zero
                ax.text(x + offset, 0, "not run", rotation=90, ha="center", va="bottom", fontsize=8)
                continue
            named = f"{label} ({r.case['precision']})"  # what each bar computed in
            ax.bar(x + offset, r.images_per_s, width=0.4, color="C0" if offset < 0 else "C1",
                   yerr=[[e] for e in _error(r)], capsize=3, label=None if named in labelled else named)
            labelled.add(named)
    batches = [(base.get(n) or opt.get(n)).metrics["global_batch"] for n in counts]
    ax.set_xticks(range(len(counts)), [f"{n} GPU(s)\nbatch {b}" for n, b in zip(counts, batches)])
    ax.set_ylabel("images/s (global)")
    ax.set_title(_title(f"Baseline against {optimized}", where))
    ax.legend()
    return _save(fig, out / f"baseline-vs-{optimized}.png")


def ablation_waterfall(records: list[Record], out: Path, where: tuple = ()) -> Path | None:
    steps = {}
    for r in sorted(_ok(records), key=lambda r: r.started_at):
        m = re.match(r"ablation-(\d\d)-(.+)", r.case["name"])
        if m:
            steps[int(m.group(1))] = (m.group(2), r.images_per_s)
    if len(steps) < 2:
        return None
    order = sorted(steps)
    labels = [steps[i][0] for i in order]
    values = [steps[i][1] for i in order]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    prev = 0.0
    for i, v in enumerate(values):
        delta = v - prev
        ax.bar(i, delta, bottom=prev, color="C2" if delta >= 0 else "C3")
        ax.text(i, max(v, prev), f"{v:.0f}", ha="center", va="bottom", fontsize=7)
        prev = v
    ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("images/s (global)")
    ax.set_title(_title("Ablation: each change added to the previous (green: faster, red: slower)", where))
    return _save(fig, out / "ablation.png")


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def write_all(records: list[Record], out: Path, where: tuple = ()) -> list[Path]:
    """Every plot the records support; `where` = (machine, commit) for the titles."""
    made = [scaling(records, out, where), baseline_vs_optimized(records, out, where=where),
            baseline_vs_optimized(records, out, optimized="best", where=where), ablation_waterfall(records, out, where)]
    return [p for p in made if p]
