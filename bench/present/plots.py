"""PNG plots from stored results: scaling against the ideal line, baseline against optimized,
and the ablation as a waterfall. Each function returns the file it wrote, or None if no data."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from ..analysis import noise
from ..core import verdicts
from ..store import query
from ..store.record import Record
from . import plot_cache


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
    # three short lines: one long line is cut at the figure's edges
    return (f"{text}\n{where[0]}, commit {where[1]}\nerror bars: 95% interval; hatched or hollow: none stored"
            if where else text)


MARKERS, STYLES = "osD^v<>Px*", ("-", "--", "-.", (0, (5, 1, 1, 1)))


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
        # each line its own marker and dash, so lines that overlap stay apart; a line with a figure that
        # has no interval is drawn hollow, as less to be trusted
        sure = all(pts[x].ci95 for x in xs)
        ax.errorbar(xs, ys, yerr=err, marker=MARKERS[i % len(MARKERS)], linestyle=STYLES[i % len(STYLES)],
                    color=colour, label=label + ("" if sure else " (no interval)"), capsize=3, markersize=6,
                    markerfacecolor=colour if sure else "none")
        ax.plot(xs, [ys[0] * x for x in xs], ":", color=colour, alpha=0.6)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("images/s (global)")
    ax.set_title(_title("Throughput against GPUs (dotted: linear scaling from one GPU)", where), fontsize=9)
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
                   yerr=[[e] for e in _error(r)], capsize=3, label=None if named in labelled else named,
                   hatch=None if r.ci95 else "//", edgecolor="black" if not r.ci95 else None)
            labelled.add(named)
    batches = [(base.get(n) or opt.get(n)).metrics["global_batch"] for n in counts]
    ax.set_xticks(range(len(counts)), [f"{n} GPU(s)\nbatch {b}" for n, b in zip(counts, batches)])
    ax.set_ylabel("images/s (global)")
    ax.set_title(_title(f"Baseline against {optimized}", where), fontsize=9)
    ax.legend()
    return _save(fig, out / f"baseline-vs-{optimized}.png")


VERDICT_COLOURS = {verdicts.FASTER: "C2", verdicts.SLOWER: "C3"}  # anything the noise cannot decide: grey


def ablation_waterfall(records: list[Record], out: Path, where: tuple = (), assumed: dict | None = None) -> Path | None:
    """Each step's change from the one before, coloured by its verdict against both figures' noise (an
    interval of its own, else the machine's assumed noise: analysis/noise.py), not by its sign."""
    steps = {}
    for r in sorted(_ok(records), key=lambda r: r.started_at):
        m = re.match(r"ablation-(\d\d)-(.+)", r.case["name"])
        if m:
            steps[int(m.group(1))] = (m.group(2), r)
    if len(steps) < 2:
        return None
    assumed = noise.assumed_noise(records) if assumed is None else assumed
    order = sorted(steps)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    prev = None
    for i, k in enumerate(order):
        r = steps[k][1]
        v, low = r.images_per_s, prev.images_per_s if prev else 0.0
        verdict = noise.judge(prev, r, assumed)["verdict"] if prev else verdicts.FASTER
        ax.bar(i, v - low, bottom=low, color=VERDICT_COLOURS.get(verdict, "0.6"), hatch=None if r.ci95 else "//",
               edgecolor="black", linewidth=0.5)
        ax.errorbar(i, v, yerr=[[e] for e in _error(r)], color="black", capsize=3, fmt="none")
        ax.text(i, max(v, low), f"{v:.0f}", ha="center", va="bottom", fontsize=7)
        prev = r
    ax.set_xticks(range(len(order)), [steps[k][0] for k in order], rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("images/s (global)")
    ax.set_title(_title("Ablation: each change added to the previous (green: faster beyond noise, red: slower, "
                        "grey: within noise or undecided)", where), fontsize=9)
    return _save(fig, out / "ablation.png")


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def write_all(records: list[Record], out: Path, where: tuple = ()) -> list[Path]:
    """Every plot the records support; `where` = (machine, commit) for the titles. Drawn once per set of
    records and code (plot_cache.py), then copied."""
    digest = plot_cache.key(records, where)
    kept = plot_cache.fetch(digest, out)
    if kept is not None:
        return kept
    made = [scaling(records, out, where), baseline_vs_optimized(records, out, where=where),
            baseline_vs_optimized(records, out, optimized="best", where=where), ablation_waterfall(records, out, where)]
    made = [p for p in made if p]
    plot_cache.keep(digest, made)
    return made
