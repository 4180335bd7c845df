"""The answer to each claim on one machine, across all its commits: the latest decided verdict (by
when it was measured, not by commit hash) and an earlier decided one that disagrees with it.

A verdict comes from one of two kinds of evidence, both frozen when made:
- a claim experiment stored in a run's manifest (harness/experiments.py): its own paired processes;
- two stored records of one commit that differ only in the claim's knobs (analysis/claims.py), each
  figure with an interval of its own; a pair lacking one is shown, never judged.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.identity import differing_fields
from ..core.phrases import phrase
from ..core.verdicts import CANNOT, FAILS, HOLDS, INCONCLUSIVE, reworded
from ..store import query
from . import claims as claimsmod

DECIDED = (HOLDS, FAILS)


@dataclass(frozen=True)
class Evidence:
    claim: str
    verdict: str
    effect: str
    """The change, and its 95% interval where one was measured."""
    basis: str
    """How it was judged: `K pairs` (paired, interleaved processes) or `own intervals`."""
    commit: str
    runs: tuple
    date: str
    pair: str
    """The two recipes, before -> after, and the GPU count."""
    detail: str = ""
    """What more pairs would take, why a run stopped, or the evidence sentence."""


def from_experiment(m: dict, en: dict) -> Evidence | None:
    """One experiment of a run's manifest as evidence (None before its first verdict)."""
    if not en.get("verdict"):
        return None
    n = len(en.get("pairs") or [])
    effect = claimsmod.experiment_effect(en)
    # why it stopped short of a decision (a run still measuring says nothing yet)
    detail = "" if en.get("status") in ("decided", "measuring") else en.get("reason") or en.get("status", "")
    verdict = reworded(en["verdict"], en.get("ci95_pct")) or en["verdict"]
    if verdict == INCONCLUSIVE and en.get("more_pairs"):
        detail = f"about {en['more_pairs']} more pair(s) would decide it" + (f"; {detail}" if detail else "")
    if verdict != en["verdict"]:  # frozen under an older rule: its numbers kept, today's word beside its own
        detail = (f"{detail}; " if detail else "") + phrase("reworded", was=en["verdict"], now=verdict).text()[2:]
    return Evidence(en["claim"], verdict, effect, f"{n} pair(s)", m.get("commit_folder", "?"), (m["run_id"],),
                    m.get("finished_at") or m.get("started_at", ""),
                    f"{pair_label(en)}, {en['gpus']} GPU(s)", detail)


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
    gpus = f", {e['gpus']} GPU(s)" if e.get("gpus") else ""
    basis = "an exact count" if claim.kind == "fewer-allreduces" else "own intervals"
    return Evidence(claim.id, e["verdict"], effect, basis, commit, tuple(e["runs"]), e["date"],
                    f"{e['pair'][0]} -> {e['pair'][1]}{gpus}",
                    e.get("noise_text", "") if e["verdict"] not in DECIDED else "")


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
    hint: str = ""


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
    where = f" on {claim.min_gpus} or more GPUs" if claim.min_gpus > 1 else ""
    sweep = (f"the {claim.sweep_hint} sweep{where}" if claim.kind != "table" else "the seed sweep on 2 and 4 GPUs")
    if old:
        return (f"{len(old)} stored record(s) of its cases are of an older metric definition (newest "
                f"{max(r.started_at for r in old)[:10]}), shown but never judged; run {sweep} again")
    return f"no stored pair on this machine; run {sweep}" if claim.kind != "table" else f"run {sweep}"


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
