"""PNG plots from stored results: scaling against the ideal line, baseline against optimized,
and the ablation as a waterfall. Each function returns the file it wrote, or None if no data."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from . import report  # noqa: E402


def _ok(records):
    return [r for r in records if r["status"] == "ok" and not r["case"].get("loader_only")]


def scaling(records: list[dict], out: Path) -> Path | None:
    lines = defaultdict(dict)
    for r in sorted(_ok(records), key=lambda r: r.get("started_at", "")):
        c = r["case"]
        label = f"{c['name']} ({c['strategy']}, {c['precision']}{', NHWC' if c['channels_last'] else ''}, bs {c['batch_size']}/GPU)"
        lines[label][c["gpus"]] = r["metrics"]["images_per_s"]
    lines = {k: v for k, v in lines.items() if len(v) > 1 and 1 in v}
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (label, pts) in enumerate(sorted(lines.items())):
        xs = sorted(pts)
        colour = f"C{i % 10}"
        ax.plot(xs, [pts[x] for x in xs], "o-", color=colour, label=label)
        ax.plot(xs, [pts[1] * x for x in xs], ":", color=colour, alpha=0.6)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("images/s (global)")
    ax.set_title("Throughput against GPUs (dotted: linear scaling from one GPU)")
    ax.set_xticks(sorted({x for pts in lines.values() for x in pts}))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, out / "scaling.png")


def baseline_vs_optimized(records: list[dict], out: Path, optimized: str = "seed-optimized") -> Path | None:
    rows = report.seed_rows(records, optimized=optimized)
    if not any(r[3] != "-" for r in rows):
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = range(len(rows))
    base = [float(r[2]) if r[2] != "-" else 0 for r in rows]
    opt = [float(r[3]) if r[3] != "-" else 0 for r in rows]
    ax.bar([x - 0.2 for x in xs], base, width=0.4, label="baseline")
    ax.bar([x + 0.2 for x in xs], opt, width=0.4, label=optimized)
    ax.set_xticks(list(xs), [f"{r[0]} GPU(s)\nbatch {r[1]}" for r in rows])
    ax.set_ylabel("samples/s")
    ax.set_title(f"Baseline against {optimized}")
    ax.legend()
    return _save(fig, out / f"baseline-vs-{optimized}.png")


def ablation_waterfall(records: list[dict], out: Path) -> Path | None:
    steps = {}
    for r in sorted(_ok(records), key=lambda r: r.get("started_at", "")):
        m = re.match(r"ablation-(\d\d)-(.+)", r["case"]["name"])
        if m:
            steps[int(m.group(1))] = (m.group(2), r["metrics"]["images_per_s"])
    if len(steps) < 2:
        return None
    order = sorted(steps)
    labels = [steps[i][0] for i in order]
    values = [steps[i][1] for i in order]
    fig, ax = plt.subplots(figsize=(10, 5))
    prev = 0.0
    for i, v in enumerate(values):
        delta = v - prev
        ax.bar(i, delta, bottom=prev, color="C2" if delta >= 0 else "C3")
        ax.text(i, max(v, prev), f"{v:.0f}", ha="center", va="bottom", fontsize=7)
        prev = v
    ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("images/s (global)")
    ax.set_title("Ablation: each change added to the previous (green: faster, red: slower)")
    return _save(fig, out / "ablation.png")


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_all(records: list[dict], out: Path) -> list[Path]:
    made = [scaling(records, out), baseline_vs_optimized(records, out),
            baseline_vs_optimized(records, out, optimized="best"), ablation_waterfall(records, out)]
    return [p for p in made if p]
