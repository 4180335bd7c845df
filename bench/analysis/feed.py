"""Can this host feed N GPUs? Each loader's ladder of feed records (R loader ranks at once, no model)
set against what one GPU of a kind consumes: the largest R it delivers R times that at full speed, and
what stops it at the next R (the host's CPUs, its storage, its memory, or the loader's own settings)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.feed_cases import FEED_LOADERS
from ..store import query

FEED_SWEEP = "feed"
CPU_FULL_PCT = 90.0
"""Host CPU busy over the windows at or above which the cores, not the loader, set the pace."""


@dataclass
class Rung:
    ranks: int
    record: query.Record
    need: float | None
    verdict: str
    """`feeds` (the interval wholly at or above R x per GPU), `short` (wholly below), `within noise`,
    `no interval` (one process), `shared` (others' work on the host during its windows), `undrained` (a
    cold record made before its windows were drained of what the loader queued while the cache was
    emptied), `host normalized` (a torch record made before its ranks left normalizing to the GPU),
    `failed` (stored with its reason), `no pace` (nothing to judge by)."""


@dataclass
class Ladder:
    loader: str
    cold: bool
    rungs: list[Rung] = field(default_factory=list)
    largest: int = 0
    decided: bool = True
    """False where the first rung not fed was within noise: `largest` may be one rung short."""
    stop: dict = field(default_factory=dict)
    """What stopped it at the next R: {"kind": cpu|storage|memory|loader|failed|none, ...figures}."""
    data_set_bytes: int | None = None
    host_memory_bytes: int | None = None

    @property
    def fits_in_memory(self) -> bool:
        """Warm reads of a set smaller than the host's memory come from its page cache."""
        return bool(self.data_set_bytes and self.host_memory_bytes and self.data_set_bytes < self.host_memory_bytes)


def rank_facts(r: query.Record) -> dict:
    """What the record's first rank reported of its loader and data (every rank reads the same folder)."""
    return (r.data.get("ranks") or [{}])[0]


def undrained(r: query.Record) -> bool:
    """A cold feed record made before its windows drained what the loader queued during the eviction:
    those batches came free, so its figure is flattered and measures something else than a drained one's."""
    return bool(r.case.get("cold_reads")) and bool(r.data.get("ranks")) \
        and "cold_batches_drained_per_window" not in rank_facts(r)


def loader_threads(r: query.Record) -> int | None:
    """The workers (torch) or threads (DALI) each rank's loader ran with, as the rank resolved them."""
    return rank_facts(r).get("loader_threads")


def loader_of(case: dict) -> str:
    return case["loader"] if case["loader"] == "torch" else f"dali-{case['dali_device']}"


def ladder_key(case: dict) -> tuple[str, bool]:
    """The ladder a feed record is a rung of: its loader, and warm or cold reads."""
    return loader_of(case), bool(case.get("cold_reads"))


def gpu_key(name: str) -> str:
    """A GPU model's name as its machine folders spell it (`NVIDIA H100 80GB HBM3`: nvidia-h100-80gb-hbm3)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def per_gpu_figure(records: list[query.Record], gpu_name: str, model: str) -> tuple[float, query.Record] | None:
    """The fastest one-GPU figure of `model` stored for a GPU of the model `gpu_name` (any machine with
    one, any commit): the pace one such GPU consumes images at."""
    best, key = None, gpu_key(gpu_name)
    for r in records:
        stored = (r.data.get("env") or {}).get("gpu_model") or ""
        if (r.ok and r.current and r.case["device"] == "cuda" and r.case["gpus"] == 1 and r.case["model"] == model
                and not r.case.get("loader_only") and not r.slowed_pct and not r.gpu_shared
                and stored and gpu_key(stored) == key and (best is None or r.images_per_s > best.images_per_s)):
            best = r
    return (best.images_per_s, best) if best else None


UNDECIDED = ("within noise", "no interval", "shared", "undrained", "host normalized")
"""Verdicts that leave a ladder's largest R open: the rung may feed, nothing measured says so."""


def verdict(r: query.Record, need: float | None) -> str:
    if not r.ok:
        return "failed"
    if need is None:
        return "no pace"
    if r.shared_label:  # another's work on the host (or GPU) during its windows: shown, never judged
        return "shared"
    if undrained(r):
        return "undrained"
    if r.case["loader"] == "torch" and not r.case.get("host_side_only"):
        # its ranks converted every batch to normalized floats on the host, work a GPU rank does on its GPU:
        # on one H100 host that alone held 2 ranks to 1,538.4 images/s against 3,216.9 without it
        return "host normalized"
    if not r.ci95:  # one process of a real loader: no interval to judge by (harness/records.floor_for)
        return "no interval"
    lo, hi = r.ci95
    return "feeds" if lo >= need else "short" if hi < need else "within noise"


def ladders(feed: list[query.Record], per_gpu: float | None) -> list[Ladder]:
    """One ladder per loader and reading (warm, cold), R rising, from the latest record of each case."""
    found: dict = {}
    for r in query.latest(feed):
        c = r.case
        found.setdefault(ladder_key(c), []).append(r)
    out = []
    order = {name: i for i, name in enumerate(FEED_LOADERS)}
    for (loader, cold), recs in sorted(found.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        ladder = Ladder(loader, cold)
        for r in sorted(recs, key=lambda r: r.case["gpus"]):
            need = per_gpu * r.case["gpus"] if per_gpu else None
            ladder.rungs.append(Rung(r.case["gpus"], r, need, verdict(r, need)))
        out.append(ladder)
    for ladder in out:
        judge(ladder, {(l.loader, l.cold): l for l in out})
    return out


def judge(ladder: Ladder, every: dict) -> None:
    """The largest R fed (every R below it fed too), and what stops the next one."""
    first = next((g for g in ladder.rungs if g.verdict != "feeds"), None)
    fed = [g for g in ladder.rungs if g.verdict == "feeds" and (first is None or g.ranks < first.ranks)]
    ladder.largest = fed[-1].ranks if fed else 0
    ladder.decided = first is None or first.verdict not in UNDECIDED
    data = next((rank_facts(g.record) for g in ladder.rungs if g.record.ok and g.record.data.get("ranks")), {})
    ladder.data_set_bytes, ladder.host_memory_bytes = data.get("data_set_bytes"), data.get("host_memory_bytes")
    if first is None or first.verdict == "no pace":
        ladder.stop = {"kind": "none"}
        return
    ladder.stop = {**stop_reason(first, every.get((ladder.loader, False)) if ladder.cold else None),
                   "verdict": first.verdict}


def stop_reason(rung: Rung, warm: Ladder | None) -> dict:
    r = rung.record
    m = r.metrics
    facts = {"ranks": rung.ranks, "images_per_s": r.images_per_s, "ci95": r.ci95, "need": rung.need,
             "busy_pct": m.get("host_cpu_busy_pct"), "read_mb_per_s": m.get("storage_read_mb_per_s"),
             "threads": loader_threads(r)}
    if not r.ok:
        memory = r.status == "oom" or "memory" in (r.data.get("reason") or "").lower()
        return {"kind": "memory" if memory else "failed", "reason": r.data.get("reason") or r.status, **facts}
    same = next((g for g in warm.rungs if g.ranks == rung.ranks and g.record.ok), None) if warm else None
    if same and same.record.ci95 and r.ci95 and r.ci95[1] < same.record.ci95[0]:  # cold wholly below warm
        return {"kind": "storage", "warm_images_per_s": same.record.images_per_s, "warm_ci95": same.record.ci95,
                **facts}
    if facts["busy_pct"] is not None and facts["busy_pct"] >= CPU_FULL_PCT:
        return {"kind": "cpu", **facts}
    return {"kind": "loader", **facts}


def latest_feeds(records: list[query.Record]) -> list[list[query.Record]]:
    """A machine's newest ladder of each loader and reading, grouped by the feed run that measured it, newest
    run first: a run's ladders are judged by the pace it kept, and a loader fed in a run of its own (DALI
    after the torch DataLoader, say) keeps its answer beside the other's. The runs a `--resume` continued
    belong to the run that continued them, whose records come first in the group."""
    feed = [r for r in records if r.sweep == FEED_SWEEP and r.case.get("loader_only")]
    # a run continued with --resume is one ladder with the run that continued it, which leads its group
    owner = {old: m["run_id"] for m in query.run_manifests(feed).values() for old in m.get("resumed_runs", [])}

    def run_of(r: query.Record) -> str:
        return owner.get(r.run_id, r.run_id)
    newest = {ladder_key(r.case): run_of(r) for r in sorted(feed, key=lambda r: (r.started_at, r.run_id))}
    chosen = [r for r in feed if newest[ladder_key(r.case)] == run_of(r)]
    return [sorted(run, key=lambda r: r.run_id != k) for k, run in query.newest_first(chosen, run_of)]
