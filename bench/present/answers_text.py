"""Each machine's answers, first in every report and last on screen: the seed table beside the
article's published figures, the best configuration and recommend's winners, and each claim's latest
decided verdict across all the machine's commits, newest evidence first. Lines within 120 columns."""
from __future__ import annotations

from ..analysis import answers as answersmod
from ..analysis import targets
from ..core import stats, verdicts
from ..core.labels import describe, noise
from ..store import query
from ..store.record import Record
from .text import fmt, marked, table, wrap

PUBLISHED = {1: (183.2, None), 2: (312.7, 347.5), 4: (498.4, 698.3)}
"""The article's own table (ResNet-50, 4x RTX 3090, PyTorch 2.1, nn.DataParallel), images/s:
(baseline, optimized) per GPU count."""
SEED_NAMES = ("seed-baseline", "seed-optimized")


def day(iso: str) -> str:
    return iso[:10] if iso else "-"


def _measured(r: Record | None) -> str:
    return f"{fmt(r.images_per_s)} {noise(r.metrics)}{marked(r)}" if r else "-"


def _noise(a: Record, b: Record) -> str:
    """The noise of a ratio of two figures, as every comparison weighs it (verdicts.compare_metrics)."""
    pct = verdicts.compare_metrics(a.metrics, b.metrics)["noise_pct"]
    return f" +-{pct:.1f}%" if pct is not None else " (no interval)"


def _efficiency(r: Record | None, one: Record | None, n: int) -> str:
    """Scaling efficiency and its noise."""
    if not r or not one or n == 1:
        return "-"
    return f"{stats.scaling_efficiency(r.images_per_s, n, one.images_per_s):.1f}%" + _noise(r, one)


def seed_lines(records: list[Record]) -> list[str]:
    """The seed table of the newest commit that measured it, beside the article's figures."""
    cells = [r for r in records if r.ok and r.current and r.case["name"] in SEED_NAMES]
    article = [r for r in cells if r.case["model"] == query.ARTICLE_MODEL]
    cells = article or cells  # the articles' ResNet-50 experiment, however new another model's seed run is
    if not cells:
        return ["Seed table: not measured on this machine; `make bench` measures it."]
    newest = max(cells, key=lambda r: (r.started_at, r.run_id))
    mine, setting = query.article_cells(query.latest([r for r in cells if r.commit == newest.commit]), SEED_NAMES)
    base, opt = (query.by_name_and_gpus(mine, n) for n in SEED_NAMES)
    rows = []
    for n in sorted(set(base) | set(opt) | set(PUBLISHED)):
        b, o = base.get(n), opt.get(n)
        pb, po = PUBLISHED.get(n, (None, None))
        gain_article = f"{stats.improvement_pct(pb, po):+.1f}%" if pb and po else "-"
        gain = f"{stats.improvement_pct(b.images_per_s, o.images_per_s):+.1f}%{_noise(b, o)}" if b and o else "-"
        rows.append([str(n), f"{_measured(b)} ({fmt(pb)})", f"{_measured(o)} ({fmt(po)})", f"{gain} ({gain_article})",
                     _efficiency(o, opt.get(1), n)])
    head = (f"Seed table (commit {newest.commit}, {day(newest.started_at)}; {setting[0]}, {setting[1]} px, "
            f"{setting[2]} images per GPU), images/s measured here with the article's own figure in brackets "
            "(4x RTX 3090, PyTorch 2.1):")
    cols = ["GPUs", "baseline (article)", "optimized (article)", "improvement (article)", "optimized efficiency"]
    return wrap(head) + [table(rows, cols, ("right",) * len(cols))]


def best_lines(records: list[Record]) -> list[str]:
    """The fastest configuration of the newest commit per GPU count, and recommend's winners."""
    ok = [r for r in records if r.ok and r.current and not r.case.get("loader_only") and not r.slowed_pct]
    if not ok:
        return []
    newest = max(ok, key=lambda r: (r.started_at, r.run_id)).commit
    mine = query.latest([r for r in ok if r.commit == newest])
    out = []
    for n in sorted({r.case["gpus"] for r in mine}):
        top = max((r for r in mine if r.case["gpus"] == n), key=lambda r: r.images_per_s)
        k = top.metrics.get("processes", 1)
        out += wrap(f"- Fastest measured at commit {newest}, {n} GPU(s): {top.case['name']} ({describe(top.case)}), "
                    f"{fmt(top.images_per_s)} images/s {noise(top.metrics)}{marked(top)}, {k} process(es)")
    out += [ln for row in targets.recommend_rows(records) for ln in wrap(f"- {row[0]}: {row[4]}")]
    return out


def claim_rows(found: list[answersmod.Answer]) -> tuple[str, list[str]]:
    rows, notes = [], []
    for a in found:
        ev = a.latest
        rows.append([a.claim.id, a.verdict, ev.effect if ev else "-", ev.commit if ev else "-",
                     day(ev.date) if ev else "-"])
        if ev is None:
            notes += wrap(f"- {a.claim.id}: {a.hint}")
            continue
        text = f"- {a.claim.id}: {ev.pair}, {ev.basis}, run {', '.join(ev.runs)}"
        if ev.detail:
            text += f"; {ev.detail}"
        if a.disagrees:
            d = a.disagrees
            text += f". Earlier: {d.verdict} ({d.effect}) at commit {d.commit}, {day(d.date)}, {d.basis}"
        notes += wrap(text)
    return table(rows, ["claim", "verdict", "effect (95% interval)", "commit", "measured"]), notes


def machine_answers(machine: str, records: list[Record], models: list[str] | None = None) -> str:
    """One machine's answers, about one screen for each model it trained: the seed table (the article's
    ResNet-50 experiment), then per model its best configuration and which of the articles' advice holds.
    `models`: only these models' answers (what a run just trained), each other model in one line saying
    where its answers are."""
    commits = len({r.commit for r in records})
    out = [f"## {machine}: the answers (latest evidence from {commits} commit(s))", ""]
    out += seed_lines(records) + [""]
    per_model = answersmod.by_model(records)
    others = [m for m, _ in per_model if models is not None and m not in models]
    per_model = [(m, mine) for m, mine in per_model if m not in others]
    for i, (model, mine) in enumerate(per_model):
        found = answersmod.answers(mine)
        claims_table, notes = claim_rows(found)
        decided = sum(a.verdict in answersmod.DECIDED for a in found)
        of = f" for {model}" if len(per_model) > 1 else ""
        best = best_lines(mine)
        if best:
            out += [f"Best configuration{of}:"] + best + [""]
        out += wrap(f"Does the articles' advice hold here{of}? {decided} of {len(found)} claims decided; each "
                    "verdict is the latest decided one, judged by its own pairs or intervals and never changed by "
                    "later runs:")
        out += [claims_table] + notes + ([""] if i + 1 < len(per_model) else [])
    if others:
        out += [""] + [ln for m in others for ln in wrap(
            f"- {m}: also answered on this machine; `bin/bench report --machine {machine}` shows every model's")]
    return "\n".join(out)


def render(records: list[Record]) -> str:
    """Every machine's answers, the machines in order of their newest measurement (newest first)."""
    if not records:
        return "no stored results found"
    return "\n\n".join(machine_answers(machine, recs) for machine, recs in query.newest_first(records, "machine"))


def machine_page(machine: str, records: list[Record], reports: dict[str, str], recipes: list[str]) -> str:
    """The machine folder's page (results/<machine>/README.md): its answers, then where the evidence lies,
    each commit newest first with a link to its REPORT.md (`reports`: commit -> relative link), and the
    latest recipes (relative links)."""
    out = [f"# {machine}: what its stored results answer", "",
           "Generated by `bin/bench report` (and at the end of `make bench`) from the results in this folder; "
           "edits are overwritten.", "", machine_answers(machine, records), "", "## Where the evidence lies", ""]
    for commit, recs in query.newest_first(records, "commit"):
        sweeps = ", ".join(sorted({r.sweep for r in recs}))
        when = day(max(r.started_at for r in recs))
        link = f"[{commit}]({reports[commit]})" if commit in reports else commit
        out += wrap(f"- {link} ({when}): {len(query.runs_of(recs))} run(s), sweeps {sweeps}")
    if recipes:
        out += [""] + wrap("The latest winners of `bench recommend` as scripts to copy: "
                           + ", ".join(f"[{p.rsplit('/', 1)[-1]}]({p})" for p in recipes) + ".")
    return "\n".join(out) + "\n"
