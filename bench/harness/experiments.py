"""The claims a sweep can test, measured as experiments (analysis/experiments.py): every case of an
undecided experiment runs one fresh process per round, the order reversed each round (A, B, B, A
across two rounds), so drift slower than a round falls on both sides of each pair. After each round
every experiment is judged by its own pairs; a decided one stops adding pairs, and the rounds end
when all are decided, after MAX_ROUNDS, or when the next round would overrun the budget. The
verdicts go into the run's manifest as the rounds go, and each case is stored from its processes."""
from __future__ import annotations

import time

from ..analysis import answers
from ..analysis import experiments as ex
from ..core import paired, phrases, sharing, verdicts
from ..core.case import Case
from ..core.identity import differing_fields
from ..core.labels import duration
from . import records
from .run import Run, keep, now_iso

MAX_ROUNDS = 12
DEFAULT_BUDGET_S = {"cuda": 480.0, "cpu": 150.0}
"""Seconds of rounds a sweep gives its claims by default. On one H100 a round of the seven one-GPU
cases took 160 s and two rounds decided four of the five claims; the DALI pair (about 40 s a round)
needed five pairs there. On the CPU the smoke sweep's tiny cases take seconds a process."""


def entry(e: ex.Experiment, sweep_of: dict) -> dict:
    """What the manifest keeps of one experiment before its first pair."""
    knobs = sorted(differing_fields(e.before, e.after))
    side = {k: {"case_id": c.case_id, "name": c.name, "sweep": sweep_of[c.case_id],
                "knobs": {n: getattr(c, n) for n in knobs}}  # what the pair changed, named where the names agree
            for k, c in (("before", e.before), ("after", e.after))}
    return {"claim": e.claim.id, "gpus": e.before.gpus, "model": e.before.model, **side, "knobs": knobs,
            "measures": "allreduce_calls_per_step" if e.counted else "images_per_s", "pairs": [],
            "status": "measuring", "reason": "", "verdict": None}


def run_experiments(run: Run, found: list[ex.Experiment], cases: list[Case], sweep_of: dict,
                    budget_s: float, max_rounds: int = MAX_ROUNDS) -> dict[str, dict]:
    """Measure the experiments; `cases` gives their order, `sweep_of` each case id's sweep. Returns the
    stored records by case id (each case stored once, under its sweep)."""
    involved = {c.case_id for e in found for c in (e.before, e.after)}
    order = [c for c in dict.fromkeys(cases) if c.case_id in involved]
    runs: dict[str, list[dict]] = {c.case_id: [] for c in order}
    started = {c.case_id: "" for c in order}
    failed: dict[str, str] = {}
    entries = [entry(e, sweep_of) for e in found]
    run.manifest["claims"] = entries
    run.manifest["claims_budget_s"] = budget_s
    t0 = time.monotonic()
    say = run.say
    say(f"claims: {len(found)} experiment(s) over {len(order)} case(s), processes interleaved, each round reversed; "
        f"pairs added until each verdict is decided (at least {paired.MIN_PAIRS}) or {duration(budget_s)} is spent")
    stored: dict[str, dict] = {}
    ended = False
    try:
        for rnd in range(1, max_rounds + 1):
            live = [i for i, en in enumerate(entries) if en["status"] == "measuring"]
            if not live:
                break
            todo = [c for c in order if c.case_id not in failed and any(
                c.case_id in (entries[i]["before"]["case_id"], entries[i]["after"]["case_id"]) for i in live)]
            todo = todo if rnd % 2 else todo[::-1]
            guess = sum(runs[c.case_id][-1].get("wall_s") or 0 for c in todo if runs[c.case_id])
            spent = time.monotonic() - t0
            if rnd > paired.MIN_PAIRS and spent + guess > budget_s:
                for i in live:
                    entries[i].update(status="budget spent",
                                      reason=f"the next round (about {duration(guess)}) would pass the claims' "
                                             f"budget of {duration(budget_s)} ({duration(spent)} spent)")
                break
            say(f"claims, round {rnd}: {len(todo)} process(es) ({duration(spent)} spent)")
            for k, case in enumerate(todo):
                started[case.case_id] = started[case.case_id] or now_iso()
                result = records.run_case(case, run.dist, then=todo[k + 1] if k + 1 < len(todo) else None,
                                          on_phase=run.progress if run.live else None, guard=run.guard)
                run.progress(None)
                runs[case.case_id].append(result)
                if result["status"] == "ok":
                    say(f"  {case.case_id}: {result['metrics']['images_per_s']:,.1f} images/s")
                else:
                    failed[case.case_id] = f"{result['status']}: {result.get('reason', '')}"
                    say(f"  {case.case_id}: {failed[case.case_id]}")
            for i in live:
                _add_pair(found[i], entries[i], runs, failed)
                if entries[i]["status"] != "measuring" or entries[i]["verdict"]:
                    say("  " + line(run.manifest, entries[i]))
            run.save()
        ended = True
    finally:
        for en in entries:
            if en["status"] == "measuring":  # still undecided: its verdict is what its pairs gave
                en.update(status="rounds spent" if ended else "interrupted")
        for case in order:
            if runs[case.case_id]:
                result = records.combine(case, runs[case.case_id], None)
                rec = records.assemble(case, result, sweep_of[case.case_id], run.env, started[case.case_id],
                                       run.peak(case.device), run.run_id)
                stored[case.case_id] = keep(run, {**rec, "measured_as_claim": True})
        run.save()
    return stored


def _add_pair(e: ex.Experiment, en: dict, runs: dict, failed: dict) -> None:
    """This round's pair for one experiment (both sides ran ok), then its judgement."""
    a, b = en["before"]["case_id"], en["after"]["case_id"]
    bad = [f"{side} {cid} {failed[cid]}" for side, cid in (("before", a), ("after", b)) if cid in failed]
    if bad:
        en.update(status="failed", reason="; ".join(bad))
        return
    seen = (runs[a][-1].get("gpu_shared") or []) + (runs[b][-1].get("gpu_shared") or [])
    if seen and not e.counted:  # its differences are not this machine's noise; more pairs would not help
        en.update(status="GPU shared", verdict=verdicts.SHARED, reason=sharing.summary(seen, 1))
        return
    fa = ex.figure(e, runs[a][-1]["metrics"])
    fb = ex.figure(e, runs[b][-1]["metrics"])
    if fa is None or fb is None:
        en.update(status="failed", reason=f"a process stored no {en['measures']}")
        return
    en["pairs"].append([fa, fb])
    j = ex.judge(e, [tuple(p) for p in en["pairs"]])
    en.update({k: v for k, v in j.items() if k not in ("decided",)})
    if j["decided"]:
        en.update(status="decided", decided_at=now_iso())


def line(manifest: dict, en: dict) -> str:
    """One experiment in one line: its verdict, and the change with the 95% interval its own pairs gave,
    as the answers show it (analysis/answers.from_experiment)."""
    ev = answers.from_experiment(manifest, en)
    if ev is None:  # failed, or stopped before its first verdict
        return f"{en['claim']}: {answers.pair_label(en)}: {en['status']} ({en['reason']})"
    return (f"{ev.claim}: {ev.pair}, 95% interval from {ev.basis}: {ev.effect}: {ev.verdict}"
            + (f"; {phrases.render(ev.detail)}" if ev.detail else ""))
