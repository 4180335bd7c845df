"""One case across the stored commits of one machine, in commit order: its rows (commit, run, figure,
interval) and a PNG of each run's figure with its 95% interval, re-derived figures hollow,
older-definition figures grey."""
from __future__ import annotations

from pathlib import Path

from ..store.record import Record
from .plots import _pyplot, _save


def commit_order(records: list[Record]) -> list[str]:
    """A machine's commits in the order they were first measured on it (results carry no git history)."""
    first: dict[str, str] = {}
    for r in records:
        first[r.commit] = min(first.get(r.commit, r.started_at), r.started_at)
    return sorted(first, key=lambda c: (first[c], c))


def _mark(r: Record) -> str:
    return "re-derived" if r.rederived else "" if r.current else "older definition"


def history_rows(recs: list[Record], order: list[str]) -> list[list]:
    """One row per stored run of a case: commit, run, sweep, figure, interval, note (oldest commit first)."""
    out = []
    for r in sorted(recs, key=lambda r: (order.index(r.commit), r.started_at, r.run_id)):
        ci = r.ci95
        # the run id says when it started (UTC); a failed run's status stands where its note would
        out.append([r.commit, r.run_id, r.sweep, f"{r.images_per_s:,.1f}" if r.ok else "-",
                    (f"{ci[0]:,.1f}-{ci[1]:,.1f}" if ci else f"none; windows {r.metrics['spread_pct']:.1f}%")
                    if r.ok else "-", _mark(r) if r.ok else r.status])
    return out


def history_plot(case_id: str, points: list[Record], order: list[str], out: Path) -> Path | None:
    """`points`: the case's ok runs on one machine; `order`: that machine's commits in order."""
    ok = sorted((r for r in points if r.ok), key=lambda r: (order.index(r.commit), r.started_at))
    if not ok:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = {c: i for i, c in enumerate(c for c in order if any(r.commit == c for r in ok))}
    for kind, colour, face in (("current", "C0", "C0"), ("re-derived", "C0", "white"), ("older definition", "0.6", "0.6")):
        chosen = [r for r in ok if (kind == "re-derived") == r.rederived and (kind == "older definition") != r.current]
        if not chosen:
            continue
        err = [[r.images_per_s - r.ci95[0] if r.ci95 and r.current else 0 for r in chosen],
               [r.ci95[1] - r.images_per_s if r.ci95 and r.current else 0 for r in chosen]]
        ax.errorbar([xs[r.commit] for r in chosen], [r.images_per_s for r in chosen], yerr=err, fmt="o", color=colour,
                    markerfacecolor=face, capsize=3, label=kind)
    ax.set_xticks(range(len(xs)), list(xs), rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("images/s (global)")
    ax.set_title(f"{case_id}\n{ok[0].machine}, commits in the order first measured; bars: 95% interval", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, out / f"{case_id}.png")
