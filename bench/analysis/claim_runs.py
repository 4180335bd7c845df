"""A run's claim experiments (harness/experiments.py, stored in its manifest) read as claim evaluations,
shaped as analysis/claims.evaluate's: the one place a verdict frozen with its run is turned into what
every reader shows, in today's word where the rule that judged it has changed since."""
from __future__ import annotations

import re

from ..core import verdicts
from ..core.phrases import phrase, verdict_word
from ..core.verdicts import FAILS, HOLDS, INCONCLUSIVE
from ..store import query


def experiment_evaluations(records: list[query.Record]) -> dict[str, dict]:
    """Claim id -> the evaluation its latest experiment among these records' runs gives (a decided one
    before one left open; the articles' ResNet-50 before another model), shaped as `evaluate`'s."""
    models = {r.case["model"] for r in records}
    best: dict[str, tuple] = {}
    for run_id, m in query.run_manifests(records).items():
        for en in m.get("claims") or []:
            if not en.get("verdict") or en.get("model", query.ARTICLE_MODEL) not in models:
                continue
            rank = (en["verdict"] in (HOLDS, FAILS), en.get("model", query.ARTICLE_MODEL) == query.ARTICLE_MODEL,
                    en.get("decided_at") or m.get("finished_at") or m.get("started_at", ""))
            if en["claim"] not in best or rank > best[en["claim"]][0]:
                best[en["claim"]] = (rank, from_experiment_entry(run_id, m, en, records))
    return {k: v for k, (_, v) in best.items()}


def experiment_effect(en: dict) -> str:
    """An experiment's change with its paired 95% interval, or its all-reduce counts ('-' before a pair)."""
    pairs = en.get("pairs") or []
    if en.get("measures") == "images_per_s":
        low, high = en.get("ci95_pct") or (None, None)
        return "-" if en.get("delta_pct") is None else (
            f"{en['delta_pct']:+.1f}%" + (f" ({low:+.1f}% to {high:+.1f}%)" if low is not None else ""))
    return f"{pairs[-1][0]:g} vs {pairs[-1][1]:g} all-reduces per step" if pairs else "-"


STOPPED = ("budget spent", "rounds spent", "interrupted")
"""How an experiment stops short of a decision, said in the reader's language (core/phrases.py)."""
BUDGET_REASON = re.compile(r"the next round \(about (\S+)\) would pass the claims' budget of (\S+) \((\S+) spent\)")


def stopped(en: dict):
    """Why an experiment stopped short of a decision: a phrase where the suite said it (the budget's
    figures read back from the stored sentence), else its stored reason (a failure's is data)."""
    m = BUDGET_REASON.fullmatch(en.get("reason") or "")
    if en.get("status") == "budget spent" and m:
        return phrase("budget_next_round", next=m.group(1), budget=m.group(2), spent=m.group(3))
    if en.get("status") in STOPPED:
        return phrase(en["status"])
    return en.get("reason") or en.get("status") or ""


def experiment_notes(en: dict) -> tuple[str, list]:
    """(today's verdict, what every reader says beside it): about how many more pairs would decide it,
    why it stopped short of a decision (a run still measuring says nothing yet), and, for a verdict
    frozen under an older rule, the word it was judged with (its numbers are kept)."""
    verdict = verdicts.reworded(en["verdict"], en.get("ci95_pct")) or en["verdict"]
    notes = [] if en.get("status") in ("decided", "measuring") else [stopped(en)]
    if verdict == INCONCLUSIVE and en.get("more_pairs"):
        notes.insert(0, phrase("more_pairs_detail", n=en["more_pairs"]))
    if verdict != en["verdict"]:
        notes.append(phrase("reworded_detail", was=verdict_word(en["verdict"]), now=verdict_word(verdict)))
    return verdict, [note for note in notes if note]


def from_experiment_entry(run_id: str, m: dict, en: dict, records: list[query.Record]) -> dict:
    """One experiment entry of a run's manifest as an evaluation: its verdict, its change with the
    paired 95% interval, and the records its cases were stored as."""
    effect = experiment_effect(en)
    verdict, notes = experiment_notes(en)
    a, b = en["before"], en["after"]
    where = phrase("where", gpus=en.get("gpus"), a=a["name"], b=b["name"])
    ids = {a["case_id"], b["case_id"]}
    files = [r.path for r in records if r.run_id == run_id and r.case_id in ids]
    return {"verdict": verdict, "effect": effect, "files": files,
            "evidence_phrase": phrase("experiment", where=where, effect=effect, n=len(en.get("pairs") or []),
                                      run=run_id, more=phrase("then", notes=notes) if notes else ""),
            "date": en.get("decided_at") or m.get("finished_at") or m.get("started_at", ""), "runs": [run_id],
            "pair": (a["name"], b["name"]), "gpus": en.get("gpus")}
