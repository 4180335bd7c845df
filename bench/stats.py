"""Pure throughput maths: no torch, no I/O, so it can be checked by hand-computed numbers."""
from __future__ import annotations

import statistics


def merge_repeat(rank_windows_s: list[float], rank_images: list[int]) -> float:
    """Global images/s of one measured window: every rank's images over the slowest rank's time."""
    if not rank_windows_s or len(rank_windows_s) != len(rank_images):
        raise ValueError("one window and one image count per rank are needed")
    slowest = max(rank_windows_s)
    if slowest <= 0:
        raise ValueError(f"window must be positive, got {slowest}")
    return sum(rank_images) / slowest


def spread(values: list[float]) -> dict:
    """Median, extremes and spread of repeated measurements (spread_pct = (max-min)/median)."""
    if not values:
        raise ValueError("no values")
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {
        "median": med,
        "min": lo,
        "max": hi,
        "spread_pct": 100.0 * (hi - lo) / med if med else 0.0,
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def merge_ranks(ranks: list[dict], gpus: int) -> dict:
    """Global metrics from per-rank records (each with `windows_s`, `images`, `data_wait_s`).

    Repeat r's throughput is all ranks' images in repeat r over the slowest rank's repeat-r window;
    the reported figure is the median over repeats. Data wait is the largest share on any rank,
    since the rank that waits longest sets the pace.
    """
    n_repeats = {len(r["windows_s"]) for r in ranks}
    if len(n_repeats) != 1:
        raise ValueError(f"ranks measured different numbers of repeats: {sorted(n_repeats)}")
    repeats = n_repeats.pop()
    per_repeat = [merge_repeat([r["windows_s"][i] for r in ranks], [r["images"][i] for r in ranks])
                  for i in range(repeats)]
    s = spread(per_repeat)
    wait_pct = [100.0 * sum(r["data_wait_s"]) / sum(r["windows_s"]) for r in ranks]
    return {
        "images_per_s": s["median"],
        "images_per_s_per_gpu": s["median"] / gpus,
        "images_per_s_repeats": per_repeat,
        "images_per_s_min": s["min"],
        "images_per_s_max": s["max"],
        "spread_pct": s["spread_pct"],
        "stdev_images_per_s": s["stdev"],
        "data_wait_pct": max(wait_pct),
        "data_wait_pct_per_rank": wait_pct,
        "slowest_rank": max(range(len(ranks)), key=lambda i: sum(ranks[i]["windows_s"])),
    }


def scaling_efficiency(images_per_s: float, gpus: int, one_gpu_images_per_s: float) -> float:
    """Throughput on N GPUs over N times the one-GPU throughput, in percent."""
    if one_gpu_images_per_s <= 0 or gpus < 1:
        raise ValueError("one-GPU throughput and gpus must be positive")
    return 100.0 * images_per_s / (gpus * one_gpu_images_per_s)


def improvement_pct(baseline: float, optimized: float) -> float:
    """How much faster optimized is than baseline, in percent."""
    if baseline <= 0:
        raise ValueError("baseline must be positive")
    return 100.0 * (optimized - baseline) / baseline
