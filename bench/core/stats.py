"""Pure throughput maths: no torch, no I/O, so it can be checked by hand-computed numbers."""
from __future__ import annotations

import math
import statistics

from .sharing import host_outside_pct


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

    Window r's throughput is all ranks' images in window r over the slowest rank's window r. The
    windows are cut from one continuous span, so the process's figure is every image of the span over
    the span's time (the sum of the slowest rank's windows), and its relative standard error is that
    of the windows' seconds per image. Data wait is the largest share on any rank, since the rank that
    waits longest sets the pace.
    """
    n_repeats = {len(r["windows_s"]) for r in ranks}
    if len(n_repeats) != 1:
        raise ValueError(f"ranks measured different numbers of repeats: {sorted(n_repeats)}")
    repeats = n_repeats.pop()
    per_repeat = [merge_repeat([r["windows_s"][i] for r in ranks], [r["images"][i] for r in ranks])
                  for i in range(repeats)]
    slowest_s = [max(r["windows_s"][i] for r in ranks) for i in range(repeats)]
    images = [sum(r["images"][i] for r in ranks) for i in range(repeats)]
    figure = sum(images) / sum(slowest_s)
    s = spread(per_repeat)
    wait_pct = [100.0 * sum(r["data_wait_s"]) / sum(r["windows_s"]) for r in ranks]
    stall_pct = [100.0 * sum(r["input_stall_s"]) / sum(r["windows_s"]) for r in ranks if r.get("input_stall_s") is not None]
    return {
        **_host_cpu(ranks), **_storage(ranks, sum(slowest_s)),
        "host_cpu_outside_pct": host_outside_pct(ranks),
        "input_stall_pct": max(stall_pct) if stall_pct else None,
        "input_stall_pct_per_rank": stall_pct or None,
        "window_rel_se": relative_standard_error([t / n for t, n in zip(slowest_s, images)]),
        "images_per_s": figure,
        "images_per_s_per_gpu": figure / gpus,
        "images_per_s_repeats": per_repeat,
        "images_per_s_min": s["min"],
        "images_per_s_max": s["max"],
        "spread_pct": s["spread_pct"],
        "stdev_images_per_s": s["stdev"],
        "data_wait_pct": max(wait_pct),
        "data_wait_pct_per_rank": wait_pct,
        "slowest_rank": max(range(len(ranks)), key=lambda i: sum(ranks[i]["windows_s"])),
    }


def _host_cpu(ranks: list[dict]) -> dict:
    """The busiest host's shares: the ranks of one machine read the same counters; over several
    machines, the one whose cores were fullest (or most taken) is the one that held the others."""
    out = {}
    for key in ("host_cpu_busy_pct", "host_cpu_steal_pct"):
        values = [r[key] for r in ranks if r.get(key) is not None]
        out[key] = max(values) if values else None
    return out


def _storage(ranks: list[dict], seconds: float) -> dict:
    """What the ranks' processes fetched from storage over their spans, per second of the windows (None
    where a rank's kernel kept no count)."""
    read = [r.get("storage_read_bytes") for r in ranks]
    if not read or any(b is None for b in read) or seconds <= 0:
        return {"storage_read_mb_per_s": None}
    return {"storage_read_mb_per_s": sum(read) / seconds / 1e6}


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


def relative_standard_error(values: list[float]) -> float:
    """Standard error of the mean of `values`, relative to that mean (0 for a single value)."""
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values) / statistics.fmean(values) / math.sqrt(len(values))


# two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (4 decimals, as published tables)
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054  # the normal distribution's 97.5% point


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom: the table up to 30, above it
    the Cornish-Fisher expansion around the normal quantile (within 1e-7 of the exact value there)."""
    if df < 1:
        raise ValueError("at least one degree of freedom is needed")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    terms = ((z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(g / df ** (i + 1) for i, g in enumerate(terms))


def noise_floor(images_per_s: list[float]) -> dict:
    """Process-to-process noise of one reference case: each value from its own fresh process."""
    if len(images_per_s) < 2:
        raise ValueError("a noise floor needs at least two processes")
    return {"images_per_s": list(images_per_s), "n": len(images_per_s),
            "rel_sd": statistics.stdev(images_per_s) / statistics.fmean(images_per_s)}


def ci95(process_figures: list[float], window_rel_se: list[float], floor: dict | None,
         windows: list[int] | None = None) -> list[float] | None:
    """95% interval, in images/s, for a case measured in K fresh processes.

    Between-process variance (relative) is pooled from the run's noise floor (n_f processes of a
    reference case) and, where K >= 2, the case's own K figures; each process's own window-to-window
    standard error is added on top, since a loader's stalls can make one case noisier than the
    reference. Half-width = t(0.975, df) * sqrt(between / K + mean(window_se^2) / K) * median.
    The two variances come with their own degrees of freedom, (n_f - 1) + (K - 1) and, for the
    windows, sum(windows_i - 1); df is their Welch-Satterthwaite combination, rounded down (without
    `windows`, the between-process df alone). None when the between-process df is 0: one process and
    no floor cannot be judged.
    """
    k = len(process_figures)
    if k == 0:
        raise ValueError("no process figures")
    center = statistics.median(process_figures)
    df_case = k - 1
    case_var = (statistics.stdev(process_figures) / statistics.fmean(process_figures)) ** 2 if k > 1 else 0.0
    df_floor = floor["n"] - 1 if floor else 0
    floor_var = floor["rel_sd"] ** 2 if floor else 0.0
    df_between = df_case + df_floor
    if df_between < 1:
        return None
    between = (df_floor * floor_var + df_case * case_var) / df_between / k
    within = (statistics.fmean(se ** 2 for se in window_rel_se) if window_rel_se else 0.0) / k
    df_within = sum(n - 1 for n in windows) if windows else 0
    df = satterthwaite_df([(between, df_between), (within, df_within)])
    half = t975(df) * math.sqrt(between + within) * center
    return [max(0.0, center - half), center + half]  # a throughput is never negative


def satterthwaite_df(parts: list[tuple[float, int]]) -> int:
    """Degrees of freedom of a sum of variance estimates (variance, its df), rounded down; a part
    with no df (or no variance) adds nothing, so with one part this is that part's df."""
    used = [(v, df) for v, df in parts if v > 0 and df > 0]
    if not used:
        return max((df for _, df in parts), default=1) or 1
    total = sum(v for v, _ in used)
    return max(1, math.floor(total ** 2 / sum(v ** 2 / df for v, df in used)))


def combine_processes(per_process: list[dict], floor: dict | None, gpus: int) -> dict:
    """One case's metrics from K fresh processes: the median process stands for the case (its
    diagnosis, memory, step times), its figure is the median of the K, and the interval is ci95's."""
    if not per_process:
        raise ValueError("no processes")
    figs = [m["images_per_s"] for m in per_process]
    order = sorted(range(len(figs)), key=lambda i: figs[i])
    middle = order[(len(figs) - 1) // 2]
    merged = dict(per_process[middle])
    center = statistics.median(figs)
    merged.update(images_per_s=center, images_per_s_per_gpu=center / gpus,
                  images_per_s_processes=figs, processes=len(figs), median_process=middle,
                  images_per_s_ci95=ci95(figs, [m.get("window_rel_se", 0.0) for m in per_process], floor,
                                         [len(m.get("images_per_s_repeats") or [1]) for m in per_process]))
    outside = [m["host_cpu_outside_pct"] for m in per_process if m.get("host_cpu_outside_pct") is not None]
    merged["host_cpu_outside_pct"] = max(outside) if outside else None  # the worst process: any may be moved
    return merged
