"""The two articles' concrete claims, as data: each names the cases that test it and how its
effect is read from stored results. `python -m bench claims` and REPORT.md render the verdicts.

Article 1: the Chinese article on maximising GPU utilisation in distributed training (DataLoader
knobs, gradient accumulation, non-blocking copies). Article 2: the Chinese article on PyTorch 2.x
DataParallel on 4 GPUs (its table, three DataParallel configurations, AMP, DALI, NCCL settings).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import stats
from .compare import verdict as noise_verdict

HOLDS, FAILS, CANNOT = "holds", "does not hold", "cannot be measured here"


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    claim: str
    """The claim in this project's own words."""
    change: tuple = ()
    """(before recipe, after recipe) pairs to try in order; the first pair stored at one GPU count wins."""
    sweep_hint: str = ""
    kind: str = "faster"
    """`faster`: after beats before beyond noise; `fewer-allreduces`; `table`: the seed table."""
    extra: dict = field(default_factory=dict)
    min_gpus: int = 1
    """Claims about balancing or communicating between GPUs say nothing on one GPU."""


def _ablation(i_before: int, before: str, i_after: int, after: str) -> tuple:
    return (f"ablation-{i_before:02d}-{before}", f"ablation-{i_after:02d}-{after}")


CLAIMS = [
    Claim("workers", "article 1, section 2", "More DataLoader worker processes (about the core count) speed up input.",
          (_ablation(0, "baseline", 1, "num-workers"),), "ablation"),
    Claim("pin-memory", "article 1, section 2", "pin_memory=True makes host-to-GPU copies faster.",
          (_ablation(1, "num-workers", 2, "pin-memory"),), "ablation"),
    Claim("non-blocking", "article 1, section 4", "non_blocking=True copies overlap with compute and speed training up.",
          (_ablation(2, "pin-memory", 3, "non-blocking"),), "ablation"),
    Claim("accumulation-fewer-allreduces", "article 1, section 3",
          "Its gradient-accumulation loop all-reduces once per K micro-batches instead of every micro-batch.",
          (("ddp-accumulate-article", "ddp-accumulate-no_sync"),), "strategies", kind="fewer-allreduces", min_gpus=2),
    Claim("accumulation-faster", "article 1, section 3",
          "Gradient accumulation hides communication and so raises throughput.",
          (("ddp", "ddp-accumulate-article"), ("ddp", "ddp-accumulate-no_sync")), "strategies", min_gpus=2),
    Claim("dp-free-memory", "article 2, section 3.1", "Choosing DataParallel's GPUs by free memory helps.",
          (_ablation(3, "non-blocking", 4, "dp-free-memory-gpus"),), "ablation", min_gpus=2),
    Claim("dp-output-device", "article 2, section 3.2", "Gathering outputs on a less loaded GPU balances DataParallel.",
          (_ablation(4, "dp-free-memory-gpus", 5, "dp-output-device"),), "ablation", min_gpus=2),
    Claim("dp-loss-in-forward", "article 2, section 3.3",
          "Computing the loss inside forward (only scalars gathered) speeds DataParallel up.",
          (_ablation(5, "dp-output-device", 6, "dp-loss-in-forward"),), "ablation", min_gpus=2),
    Claim("amp", "article 2, section 4.1", "Mixed precision (AMP with a GradScaler) speeds training up.",
          (_ablation(6, "dp-loss-in-forward", 7, "amp-fp16"), ("amp-fp32", "amp-fp16")), "ablation or amp"),
    Claim("dali", "article 2, section 4.2", "NVIDIA DALI speeds up data loading and so training.",
          (_ablation(10, "cudnn-benchmark", 11, "dali-mixed"), ("loader-torch", "loader-dali-mixed")), "ablation or loaders"),
    Claim("nccl-settings", "article 2, section 4.3", "Its NCCL settings (IB disabled, debug at WARN) improve communication.",
          (_ablation(11, "dali-mixed", 12, "nccl-article-settings"),), "ablation", min_gpus=2),
    Claim("ddp-over-dp", "article 2, closing section", "DistributedDataParallel scales better than DataParallel.",
          (_ablation(7, "amp-fp16", 8, "ddp"), ("scaling-dp", "scaling-ddp")), "ablation or scaling", min_gpus=2),
    Claim("seed-table", "article 2, section 2",
          "On 4x RTX 3090 the optimized DataParallel set-up beats the baseline by 11.1% on 2 GPUs and 40.1% on 4.",
          (("seed-baseline", "seed-optimized"),), "seed", kind="table",
          extra={"published_pct": {2: 11.1, 4: 40.1}}),
]


def _newest_ok(records: list[dict]) -> dict:
    """Newest ok record per (recipe name, GPU count, per-GPU batch, precision, NHWC)."""
    out = {}
    for r in sorted(records, key=lambda r: r.get("started_at", "")):
        if r["status"] == "ok" and not r["case"].get("loader_only"):
            c = r["case"]
            out[(c["name"], c["gpus"], c["batch_size"], c["precision"], c["channels_last"])] = r
    return out


def _pair(claim: Claim, index: dict, min_gpus: int = 1):
    """The first (before, after) pair stored at a common GPU count and batch: most GPUs first, and
    where a recipe ran in several precisions, the one matching the other side."""
    for before, after in claim.change:
        pairs = [(a, b) for ka, a in index.items() if ka[0] == before and ka[1] >= min_gpus
                 for kb, b in index.items() if kb[0] == after and ka[1:3] == kb[1:3]]
        if pairs:
            return max(pairs, key=lambda p: (p[0]["case"]["gpus"], p[0]["case"]["precision"] == p[1]["case"]["precision"]
                                             and p[0]["case"]["channels_last"] == p[1]["case"]["channels_last"]))
    return None


def evaluate(claim: Claim, records: list[dict]) -> dict:
    index = _newest_ok(records)
    if claim.kind == "table":
        return _evaluate_table(claim, index)
    pair = _pair(claim, index, claim.min_gpus)
    if not pair:
        why = (f"it needs {claim.min_gpus} or more GPUs and only fewer are stored" if _pair(claim, index)
               else "no stored pair")
        return {"verdict": CANNOT, "effect": "-", "evidence": f"{why}; run the {claim.sweep_hint} sweep"
                + (f" on {claim.min_gpus} or more GPUs" if claim.min_gpus > 1 else "")}
    a, b = pair
    where = f"{a['case']['gpus']} GPU(s), {a['case']['name']} -> {b['case']['name']}"
    if claim.kind == "fewer-allreduces":
        ca, cb = a["metrics"].get("allreduce_calls_per_step"), b["metrics"].get("allreduce_calls_per_step")
        k = a["case"]["accumulation_steps"]
        if ca is None:
            return {"verdict": CANNOT, "effect": "-", "evidence": "no all-reduce count stored"}
        held = cb is not None and ca <= cb  # one synchronisation round per optimizer step
        return {"verdict": HOLDS if held else FAILS, "effect": f"{ca:g} vs {cb:g} all-reduces per step",
                "evidence": f"{where}: the article's loop ran {ca:g} bucket all-reduces per optimizer step over "
                            f"{k} micro-batches; with no_sync() {cb:g}"}
    effect = stats.improvement_pct(a["metrics"]["images_per_s"], b["metrics"]["images_per_s"])
    noise = noise_verdict(a, b)
    text = (f"{where}: {a['metrics']['images_per_s']:.0f} -> {b['metrics']['images_per_s']:.0f} images/s "
            f"(spreads {a['metrics']['spread_pct']:.1f}% / {b['metrics']['spread_pct']:.1f}%), {noise}")
    return {"verdict": HOLDS if noise == "faster" else FAILS, "effect": f"{effect:+.1f}%", "evidence": text}


def _evaluate_table(claim: Claim, index: dict) -> dict:
    parts, verdicts = [], []
    for gpus, published in sorted(claim.extra["published_pct"].items()):
        a = next((r for k, r in index.items() if k[:3] == ("seed-baseline", gpus, 256)), None)
        b = next((r for k, r in index.items() if k[:3] == ("seed-optimized", gpus, 256)), None)
        if not (a and b):
            parts.append(f"{gpus} GPUs: not stored")
            continue
        eff = stats.improvement_pct(a["metrics"]["images_per_s"], b["metrics"]["images_per_s"])
        verdicts.append(noise_verdict(a, b) == "faster")
        parts.append(f"{gpus} GPUs: {eff:+.1f}% measured against +{published}% published")
    if not verdicts:
        return {"verdict": CANNOT, "effect": "-", "evidence": "; ".join(parts) + " (run the seed sweep; 4 GPUs need a 4-GPU machine)"}
    return {"verdict": HOLDS if all(verdicts) else FAILS, "effect": parts[-1].split(": ", 1)[1].split(" measured")[0],
            "evidence": "; ".join(parts) + " (direction checked beyond noise; hardware differs from the article's)"}


def table(records: list[dict]) -> list[list]:
    rows = []
    for c in CLAIMS:
        e = evaluate(c, records)
        rows.append([c.id, c.source, c.claim, e["verdict"], e["effect"], e["evidence"]])
    return rows


HEADERS = ["claim", "source", "what it says", "verdict", "effect", "evidence"]
