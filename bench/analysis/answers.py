"""The answer to each claim on one machine, across all its commits: the latest decided verdict (by
when it was measured, not by commit hash) and an earlier decided one that disagrees with it.

A verdict comes from one of two kinds of evidence, both frozen when made:
- a claim experiment stored in a run's manifest (harness/experiments.py): its own paired processes;
- two stored records of one commit that differ only in the claim's knobs (analysis/claims.py), each
  figure with an interval of its own; a pair lacking one is shown, never judged.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..core.identity import differing_fields
from ..core.phrases import phrase
from ..core.verdicts import CANNOT, FAILS, HOLDS
from ..store import query
from . import claim_runs
from . import claims as claimsmod

DECIDED = (HOLDS, FAILS)


@dataclass(frozen=True)
class Evidence:
    claim: str
    verdict: str
    effect: str
    """The change, and its 95% interval where one was measured."""
    basis: object
    """How it was judged, a phrase (core/phrases.py): `K pairs` (paired, interleaved processes), `own
    intervals` or `an exact count`."""
    commit: str
    runs: tuple
    date: str
    pair: object
    """The two recipes, before -> after, and the GPU count (a phrase)."""
    detail: object = ""
    """What more pairs would take, why a run stopped, or the evidence sentence: a phrase, a list of them, or ''."""


def from_experiment(m: dict, en: dict) -> Evidence | None:
    """One experiment of a run's manifest as evidence (None before its first verdict)."""
    if not en.get("verdict"):
        return None
    n = len(en.get("pairs") or [])
    verdict, notes = claim_runs.experiment_notes(en)
    return Evidence(en["claim"], verdict, claim_runs.experiment_effect(en), phrase("pairs_basis", n=n),
                    m.get("commit_folder", "?"), (m["run_id"],), m.get("finished_at") or m.get("started_at", ""),
                    phrase("on_gpus", pair=pair_label(en), n=en["gpus"]), notes or "")


def pair_label(en: dict) -> str:
    """`before -> after` by their recipe names; where both share one name, each with the knobs it set."""
    a, b = en["before"], en["after"]
    if a["name"] != b["name"] or not a.get("knobs"):
        return f"{a['name']} -> {b['name']}"

    def knobs(side):
        return ", ".join(str(v) if isinstance(v, str) else f"{k}={v}" for k, v in side["knobs"].items())
    return f"{a['name']} ({knobs(a)}) -> {b['name']} ({knobs(b)})"


def from_records(claim: claimsmod.Claim, e: dict, commit: str) -> Evidence | None:
    """One commit's stored pair as evidence (None where it holds none)."""
    if e["verdict"] == CANNOT:
        return None
    noise = e.get("noise_pct")
    effect = e["effect"] + (f" +-{noise:.1f}%" if noise is not None else "")
    pair = f"{e['pair'][0]} -> {e['pair'][1]}"
    basis = phrase("exact_count" if claim.kind == "fewer-allreduces" else "own_intervals")
    return Evidence(claim.id, e["verdict"], effect, basis, commit, tuple(e["runs"]), e["date"],
                    phrase("on_gpus", pair=pair, n=e["gpus"]) if e.get("gpus") else pair,
                    e.get("noise_phrase") or "" if e["verdict"] not in DECIDED else "")


def evidence(records: list[query.Record], experiments_only: bool = False) -> dict[str, list[Evidence]]:
    """Every piece of evidence of ONE machine's records (of one model), per claim id, oldest first."""
    out: dict[str, list[Evidence]] = {c.id: [] for c in claimsmod.CLAIMS}
    models = {r.case["model"] for r in records}
    model_of = {r.case_id: r.case["model"] for r in records}  # for manifests older than the entry's model
    for m in query.run_manifests(records).values():
        for en in m.get("claims") or []:
            if en.get("model", model_of.get(en["before"]["case_id"], query.ARTICLE_MODEL)) not in models:
                continue
            ev = from_experiment(m, en)
            if ev and ev.claim in out:
                out[ev.claim].append(ev)
    for (commit,), recs in ({} if experiments_only else query.group(records, "commit")).items():
        for claim, e in claimsmod.pair_evaluations(recs):
            ev = from_records(claim, e, commit)
            if ev:
                out[claim.id].append(ev)
    return {k: sorted(v, key=lambda ev: (ev.date, ev.runs)) for k, v in out.items()}


@dataclass(frozen=True)
class Answer:
    claim: claimsmod.Claim
    verdict: str
    latest: Evidence | None
    """The latest decided evidence, else the latest of any kind, else None (cannot be measured here)."""
    disagrees: Evidence | None = None
    """The latest earlier decided evidence with the other verdict."""
    hint: object = ""
    """Why it has no answer, and what would give it one (a phrase)."""


def answer(claim: claimsmod.Claim, found: list[Evidence], records: list[query.Record] = ()) -> Answer:
    decided = [ev for ev in found if ev.verdict in DECIDED]
    if decided:
        latest = decided[-1]
        other = next((ev for ev in reversed(decided[:-1]) if ev.verdict != latest.verdict), None)
        return Answer(claim, latest.verdict, latest, other)
    if found:
        return Answer(claim, found[-1].verdict, found[-1])
    return Answer(claim, CANNOT, None, hint=why_none(claim, records))


def why_none(claim: claimsmod.Claim, records: list[query.Record]) -> str:
    """Why a claim has no answer on this machine, and the sweep that would give it one: its recipes'
    records stored under an older metric definition are counted, with the newest one's date."""
    names = {n for pair in claim.change for n in pair}
    older = [r for r in records if r.ok and not r.current]
    # its recipes by name, or any two cases that differ the way the claim is about (claims.Claim.after_is)
    paired = {id(x) for a in older for b in older if claim.after_is and a.case["gpus"] == b.case["gpus"]
              and a.case["gpus"] >= claim.min_gpus and claim.after_is(a.case, b.case)
              and not differing_fields(a.case, b.case) - set(claim.knobs or ()) for x in (a, b)}
    old = [r for r in older if r.case["name"] in names or id(r) in paired]
    first, _, second = claim.sweep_hint.partition(" or ")
    hint = phrase("either", a=first, b=second) if second else first
    sweep = (phrase("seed_sweep_2_4") if claim.kind == "table" else
             phrase("the_sweep_gpus", sweep=hint, n=claim.min_gpus) if claim.min_gpus > 1
             else phrase("the_sweep", sweep=hint))
    if old:
        return phrase("older_records", n=len(old), date=max(r.started_at for r in old)[:10], sweep=sweep)
    # a recipe that ran here and never ended ok (a CPU without bf16 timed out both accumulation cases): say
    # so, rather than that nothing was stored
    never_ok = names - {r.case["name"] for r in records if r.ok}
    failed = [r for r in records if r.case["name"] in never_ok]
    if failed:
        counts = [phrase("status_count", n=n, status=phrase(f"status:{s}"))
                  for s, n in sorted(Counter(r.status for r in failed).items())]
        return phrase("failed_records", counts=counts, date=max(r.started_at for r in failed)[:10], sweep=sweep)
    return phrase("no_stored_pair", sweep=sweep) if claim.kind != "table" else phrase("run_only", sweep=sweep)


def models_of(records: list[query.Record]) -> list[str]:
    """The models these records trained, the article's ResNet-50 first, then by name."""
    return sorted({r.case["model"] for r in records}, key=lambda m: (m != query.ARTICLE_MODEL, m))


def by_model(records: list[query.Record]) -> list[tuple[str, list[query.Record]]]:
    """(model, its records) for each model, the article's ResNet-50 first: answers are given per model."""
    return [(m, [r for r in records if r.case["model"] == m]) for m in models_of(records)]


def answers(records: list[query.Record], experiments_only: bool = False) -> list[Answer]:
    """Each claim's answer on ONE machine for ONE model, from every commit stored for it
    (`experiments_only`: from the claim experiments of their runs alone)."""
    machines, models = {r.machine for r in records}, models_of(records)
    if len(machines) > 1:
        raise ValueError(f"answers are given per machine; got records of {', '.join(sorted(machines))}")
    if len(models) > 1:
        raise ValueError(f"answers are given per model; got records of {', '.join(models)}")
    found = evidence(records, experiments_only)
    return [answer(c, found[c.id], records) for c in claimsmod.CLAIMS]
