"""The two articles' concrete claims, as data: each names the cases that test it and how its
effect is read from stored results. `python -m bench claims` and REPORT.md render the verdicts.

Article 1: the Chinese article on maximising GPU utilisation in distributed training (DataLoader
knobs, gradient accumulation, non-blocking copies). Article 2: the Chinese article on PyTorch 2.x
DataParallel on 4 GPUs (its table, three DataParallel configurations, AMP, DALI, NCCL settings).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import sharing, verdicts
from ..core.identity import differing_fields
from ..core.phrases import phrase
from ..core.verdicts import CANNOT, FAILS, HOLDS, INCONCLUSIVE
from ..store import query
from .claim_runs import experiment_evaluations
from .noise import unreliable_runs

TORCH_LOADER_KNOBS = ("num_workers", "pin_memory", "non_blocking", "persistent_workers", "prefetch_factor")
DALI_KNOBS = ("dali_device", "dali_threads", "hw_decoder_load", "dali_prefetch_depth", "dali_handoff", "dali_crop")
DP_KNOBS = ("dp_device_selection", "dp_output_device", "dp_loss_in_forward")


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    claim: str
    """The claim in this project's own words."""
    change: tuple = ()
    """(before recipe, after recipe) pairs to try in order; the first pair stored at one GPU count wins."""
    knobs: tuple | None = ()
    """The case fields the claim is about: a pair may differ in these (and in how long it was
    measured), in nothing else. None: any (the seed table compares whole configurations)."""
    sweep_hint: str = ""
    kind: str = "faster"
    """`faster`: after beats before beyond noise; `fewer-allreduces`; `table`: the seed table."""
    extra: dict = field(default_factory=dict)
    min_gpus: int = 1
    """Claims about balancing or communicating between GPUs say nothing on one GPU."""
    after_is: object = None
    """(before case, after case) -> whether `after` holds the change the claim is about and `before`
    lacks it (both acting fields, core/identity.acting): how a pair is told apart by identity, so any
    two cases of a run that differ only in the claim's knobs, this way round, test it."""


def _ablation(i_before: int, before: str, i_after: int, after: str) -> tuple:
    return (f"ablation-{i_before:02d}-{before}", f"ablation-{i_after:02d}-{after}")


CLAIMS = [
    Claim("workers", "article 1, section 2", "More DataLoader worker processes (about the core count) speed up input.",
          (_ablation(0, "baseline", 1, "num-workers"),), ("num_workers", "persistent_workers"), "ablation",
          after_is=lambda a, b: a["num_workers"] == 0 and b["num_workers"] != 0),
    Claim("pin-memory", "article 1, section 2", "pin_memory=True makes host-to-GPU copies faster.",
          (_ablation(1, "num-workers", 2, "pin-memory"),), ("pin_memory",), "ablation",
          after_is=lambda a, b: not a["pin_memory"] and b["pin_memory"]),
    Claim("non-blocking", "article 1, section 4", "non_blocking=True copies overlap with compute and speed training up.",
          (_ablation(2, "pin-memory", 3, "non-blocking"),), ("non_blocking",), "ablation",
          after_is=lambda a, b: not a["non_blocking"] and b["non_blocking"]),
    Claim("accumulation-fewer-allreduces", "article 1, section 3",
          "Its gradient-accumulation loop all-reduces once per K micro-batches instead of every micro-batch.",
          (("ddp-accumulate-article", "ddp-accumulate-no_sync"),), ("accumulation_mode",), "strategies",
          kind="fewer-allreduces", min_gpus=2,
          after_is=lambda a, b: a["accumulation_mode"] == "article" and b["accumulation_mode"] == "no_sync"),
    Claim("accumulation-faster", "article 1, section 3",
          "Gradient accumulation hides communication and so raises throughput.",
          (("ddp", "ddp-accumulate-article"), ("ddp", "ddp-accumulate-no_sync")),
          ("accumulation_steps", "accumulation_mode"), "strategies", min_gpus=2,
          after_is=lambda a, b: a["accumulation_steps"] == 1 and b["accumulation_steps"] > 1),
    Claim("dp-free-memory", "article 2, section 3.1", "Choosing DataParallel's GPUs by free memory helps.",
          (_ablation(3, "non-blocking", 4, "dp-free-memory-gpus"),), ("dp_device_selection",), "ablation", min_gpus=2,
          after_is=lambda a, b: a["dp_device_selection"] == "default" and b["dp_device_selection"] != "default"),
    Claim("dp-output-device", "article 2, section 3.2", "Gathering outputs on a less loaded GPU balances DataParallel.",
          (_ablation(4, "dp-free-memory-gpus", 5, "dp-output-device"),), ("dp_output_device",), "ablation", min_gpus=2,
          after_is=lambda a, b: a["dp_output_device"] == -1 and b["dp_output_device"] != -1),
    Claim("dp-loss-in-forward", "article 2, section 3.3",
          "Computing the loss inside forward (only scalars gathered) speeds DataParallel up.",
          (_ablation(5, "dp-output-device", 6, "dp-loss-in-forward"),), ("dp_loss_in_forward",), "ablation", min_gpus=2,
          after_is=lambda a, b: not a["dp_loss_in_forward"] and b["dp_loss_in_forward"]),
    Claim("amp", "article 2, section 4.1", "Mixed precision (AMP with a GradScaler) speeds training up.",
          (_ablation(6, "dp-loss-in-forward", 7, "amp-fp16"), ("amp-fp32", "amp-fp16")), ("precision",), "ablation or amp",
          after_is=lambda a, b: a["precision"] in ("fp32", "tf32") and b["precision"] in ("fp16", "bf16")),
    Claim("dali", "article 2, section 4.2", "NVIDIA DALI speeds up data loading and so training.",
          (_ablation(10, "cudnn-benchmark", 11, "dali-mixed"), ("loader-torch", "loader-dali-mixed")),
          ("loader", *TORCH_LOADER_KNOBS, *DALI_KNOBS), "ablation or loaders",
          after_is=lambda a, b: a["loader"] == "torch" and a["num_workers"] != 0 and b["loader"] == "dali"),
    Claim("nccl-settings", "article 2, section 4.3", "Its NCCL settings (IB disabled, debug at WARN) improve communication.",
          (_ablation(11, "dali-mixed", 12, "nccl-article-settings"),), ("nccl_env",), "ablation", min_gpus=2,
          after_is=lambda a, b: not a["nccl_env"] and bool(b["nccl_env"])),
    Claim("ddp-over-dp", "article 2, closing section", "DistributedDataParallel scales better than DataParallel.",
          (_ablation(7, "amp-fp16", 8, "ddp"), ("scaling-dp", "scaling-ddp")), ("strategy", "cudnn_benchmark", *DP_KNOBS),
          "ablation or scaling", min_gpus=2,
          after_is=lambda a, b: a["strategy"] == "dp" and b["strategy"] == "ddp"),
    Claim("seed-table", "article 2, section 2",
          "On 4x RTX 3090 the optimized DataParallel set-up beats the baseline by 11.1% on 2 GPUs and 40.1% on 4.",
          (("seed-baseline", "seed-optimized"),), None, "seed", kind="table",
          extra={"published_pct": {2: 11.1, 4: 40.1}}),
]


def _usable(records: list[query.Record], include_old: bool) -> list[query.Record]:
    """Latest ok run of each case, under today's metric definitions unless older ones are asked for;
    cases a claim experiment measured are judged there, by their pairs (analysis/answers.py)."""
    return [r for r in query.latest(records) if r.ok and (include_old or r.current)
            and not r.case.get("loader_only") and not r.slowed_pct and not r.data.get("measured_as_claim")]


def allreduce_verdict(article: float, no_sync: float) -> str:
    """The fewer-all-reduces claim from one pair of counts: it holds when the article's loop all-reduces
    no more often than the same loop with no_sync(). A count, not a timing: exact, no noise to weigh."""
    return HOLDS if article <= no_sync else FAILS


def own_noise(a: query.Record, b: query.Record, include_old: bool = False, unreliable: dict | None = None) -> dict:
    """B against A judged by each figure's own 95% interval (verdicts.compare), never a noise borrowed
    from another case; a figure without one, or from a run too noisy to judge by (`unreliable`: run id ->
    why, analysis/noise.unreliable_runs), leaves the pair shown, not judged."""
    loose = include_old and not (a.current and b.current)
    why = next(((r.run_id, (unreliable or {})[r.run_id]) for r in (a, b) if r.run_id in (unreliable or {})), None)
    shared = [r for r in (a, b) if r.gpu_shared]
    halves = [None, None] if why or shared else [verdicts.half_width_pct(r.metrics, loose) for r in (a, b)]
    c = verdicts.compare(a.images_per_s, halves[0], b.images_per_s, halves[1])
    c["shared"] = bool(shared)
    missing = [r.case["name"] for r, h in zip((a, b), halves) if h is None]
    c["noise_phrase"] = (phrase("gpu_shared", which=both_names([r.case["name"] for r in shared]),
                                seen=sharing.summary(shared[0].gpu_shared, 1)) if shared
                         else phrase("noise", pct=f"{c['noise_pct']:.1f}") if c["noise_pct"] is not None
                         else phrase("unreliable_run", run=why[0], why=why[1]) if why
                         else phrase("not_judged", which=both_names(list(dict.fromkeys(missing)))))
    return c


def both_names(names: list[str]):
    """One name, or two joined as the report's language joins them."""
    return phrase("both_names", a=names[0], b=names[1]) if len(names) == 2 else ", ".join(names)


def find_pair(claim: Claim, records: list[query.Record], min_gpus: int = 1):
    """(before, after, None), or (None, None, why not: the first two pairs refused): the first listed pair of
    recipes stored at a common GPU count (most GPUs first) whose cases differ only in the claim's knobs."""
    refused = []
    for before, after in claim.change:
        found = []
        befores = [r for r in records if r.case["name"] == before and r.case["gpus"] >= min_gpus]
        afters = [r for r in records if r.case["name"] == after]  # each pair as the two loops over all met it
        for a in befores:
            for b in afters:
                ca, cb = a.case, b.case
                if ca["gpus"] != cb["gpus"]:
                    continue
                extra = differing_fields(ca, cb) - set(claim.knobs or ())
                if claim.knobs is not None and extra:
                    refused.append(phrase("also_differ", a=before, b=after, gpus=ca["gpus"],
                                          fields=", ".join(sorted(extra))))
                    continue
                found.append((a, b))
        if found:
            a, b = max(found, key=lambda p: p[0].case["gpus"])
            return a, b, None
    unique = {str(p): p for p in refused}  # by their words: a phrase holds a dict, so no set of them
    return None, None, [unique[k] for k in sorted(unique)][:2]


def evaluate(claim: Claim, records: list[query.Record], include_old: bool = False,
             unreliable: dict | None = None) -> dict:
    """One claim on one machine and commit's records, each figure with its own interval: verdict,
    effect and the evidence naming both files (`evidence` in English, `evidence_phrase` for a report in
    another language, core/phrases.py). A figure without an interval of its own, or from a run too noisy
    to judge by (`unreliable`, read from the records' manifests where not given), is shown, not judged."""
    usable = _usable(records, include_old)
    unreliable = unreliable_runs(query.run_manifests(records)) if unreliable is None else unreliable
    out = (_evaluate_table(claim, usable, unreliable) if claim.kind == "table"
           else _evaluate_pair(claim, usable, include_old, unreliable))
    return {**out, "evidence": out["evidence_phrase"].text()}


def _evaluate_pair(claim: Claim, usable: list[query.Record], include_old: bool, unreliable: dict) -> dict:
    a, b, refused = find_pair(claim, usable, claim.min_gpus)
    if a is None:
        fewer = find_pair(claim, usable)[0] is not None
        why = (phrase("needs_gpus", n=claim.min_gpus) if fewer and claim.min_gpus > 1
               else phrase("no_pair_differing", knobs=", ".join(claim.knobs), refused=refused) if refused
               else phrase("no_pair"))
        first, _, second = claim.sweep_hint.partition(" or ")
        sweep = phrase("either", a=first, b=second) if second else first
        hint = (phrase("run_sweep_gpus", why=why, sweep=sweep, n=claim.min_gpus) if claim.min_gpus > 1
                else phrase("run_sweep", why=why, sweep=sweep))
        return {"verdict": CANNOT, "effect": "-", "evidence_phrase": hint, "files": []}
    ca, cb = a.case, b.case
    where = phrase("where", gpus=ca["gpus"], a=ca["name"], b=cb["name"])
    files = [a.path, b.path]
    which = {"date": max(a.started_at, b.started_at), "runs": sorted({a.run_id, b.run_id}),
             "pair": (ca["name"], cb["name"]), "gpus": ca["gpus"]}
    if claim.kind == "fewer-allreduces":
        na, nb = a.metrics.get("allreduce_calls_per_step"), b.metrics.get("allreduce_calls_per_step")
        if na is None or nb is None:
            return {"verdict": CANNOT, "effect": "-", "evidence_phrase": phrase("no_allreduce_count"), "files": files}
        return {"verdict": allreduce_verdict(na, nb), "effect": f"{na:g} vs {nb:g} all-reduces per step",
                "evidence_phrase": phrase("allreduces", where=where, na=f"{na:g}", k=ca["accumulation_steps"],
                                          nb=f"{nb:g}"), "files": files, **which}
    c = own_noise(a, b, include_old, unreliable)
    text = phrase("pair", where=where, ips_a=f"{a.images_per_s:,.0f}", ips_b=f"{b.images_per_s:,.0f}",
                  noise=c["noise_phrase"])
    verdict = verdicts.SHARED if c["shared"] else verdicts.claim_verdict(c["delta_pct"], c["noise_pct"])
    return {"verdict": verdict, "effect": f"{c['delta_pct']:+.1f}%",
            "noise_pct": c["noise_pct"], "noise_text": c["noise_phrase"].text(), "noise_phrase": c["noise_phrase"],
            "evidence_phrase": text, "files": files,
            **which}


def _evaluate_table(claim: Claim, records: list[query.Record], unreliable: dict) -> dict:
    parts, judged, files, effect, dates, runs = [], [], [], "-", [], set()
    names = ("seed-baseline", "seed-optimized")
    cells, _ = query.article_cells(records, names)  # the cells of the report's seed table
    for gpus, published in sorted(claim.extra["published_pct"].items()):
        pick = {name: next((r for r in cells if r.case["name"] == name and r.case["gpus"] == gpus), None)
                for name in names}
        a, b = pick["seed-baseline"], pick["seed-optimized"]
        if not (a and b):
            parts.append(phrase("gpus_not_stored", n=gpus))
            continue
        c = own_noise(a, b, unreliable=unreliable)
        dates += [a.started_at, b.started_at]
        runs |= {a.run_id, b.run_id}
        judged.append(verdicts.SHARED if c["shared"] else verdicts.claim_verdict(c["delta_pct"], c["noise_pct"]))
        files += [a.path, b.path]
        effect = f"{c['delta_pct']:+.1f}%"
        parts.append(phrase("gpus_measured", n=gpus, delta=f"{c['delta_pct']:+.1f}", noise=c["noise_phrase"],
                            published=published))
    if not judged:
        return {"verdict": CANNOT, "effect": "-", "files": [], "evidence_phrase": phrase("table_not_run", parts=parts)}
    verdict = HOLDS if all(v == HOLDS for v in judged) else FAILS if FAILS in judged else \
        verdicts.SHARED if verdicts.SHARED in judged else INCONCLUSIVE
    return {"verdict": verdict, "effect": effect, "files": files, "evidence_phrase": phrase("table_judged", parts=parts),
            "date": max(dates), "runs": sorted(runs), "pair": names, "gpus": None}


def pair_evaluations(records: list[query.Record], include_old: bool = False) -> list[tuple[Claim, dict]]:
    """Every claim judged by the stored pairs of ONE machine and commit's records alone (never pooled
    across machines), each figure with its own interval."""
    machines = {r.machine for r in records}
    if len(machines) > 1:
        raise ValueError(f"claims are judged per machine; got records of {', '.join(sorted(machines))}")
    unreliable = unreliable_runs(query.run_manifests(records))
    return [(c, evaluate(c, records, include_old, unreliable)) for c in CLAIMS]


def evaluations(records: list[query.Record], include_old: bool = False) -> list[tuple[Claim, dict]]:
    """Every claim on ONE machine and commit's records, from the one source every reader shares: the
    claim experiment of their runs where one judged it (its own interleaved pairs, frozen when made),
    else their stored pairs (pair_evaluations); `cannot be measured here` only where neither can."""
    by_pairs = pair_evaluations(records, include_old)
    found = experiment_evaluations(records)
    return [(c, found.get(c.id) or e) for c, e in by_pairs]


def table(records: list[query.Record], include_old: bool = False,
          evals: list[tuple[Claim, dict]] | None = None) -> list[list]:
    """One row per claim; `evals` reuses evaluations already made."""
    return [[c.id, c.source, c.claim, e["verdict"], e["effect"], e["evidence"]]
            for c, e in (evals if evals is not None else evaluations(records, include_old))]


def files_compared(evals: list[tuple[Claim, dict]], root: str = "") -> list[tuple[str, list[str]]]:
    """(claim id, the result files it compared, before first) per judged claim, relative to `root`."""
    def short(path: str) -> str:
        return path[len(root):].lstrip("/") if root and path.startswith(root) else path
    return [(c.id, [short(f) for f in e["files"]]) for c, e in evals if e.get("files")]


HEADERS = ["claim", "source", "what it says", "verdict", "effect", "evidence"]
