"""Each machine's answers, first in every report and last on screen: the seed table beside the
article's published figures, the best configuration and recommend's winners, and each claim's latest
decided verdict across all the machine's commits, newest evidence first. Lines within 120 columns."""
from __future__ import annotations

from ..analysis import answers as answersmod
from ..analysis import feed, targets
from ..core import phrases, stats, untrusted, verdicts
from ..core.labels import describe, noise
from ..store import query
from ..store.record import Record
from . import feed_text, i18n
from .text import fmt, marked, table, wrap

PUBLISHED = {1: (183.2, None), 2: (312.7, 347.5), 4: (498.4, 698.3)}
"""The article's own table (ResNet-50, 4x RTX 3090, PyTorch 2.1, nn.DataParallel), images/s:
(baseline, optimized) per GPU count."""
SEED_NAMES = ("seed-baseline", "seed-optimized")


def day(iso: str) -> str:
    return iso[:10] if iso else "-"


def _measured(r: Record | None, lang: str = "en") -> str:
    return f"{fmt(r.images_per_s)} {noise(r.metrics)}{marked(r, lang)}" if r else "-"


def _noise(a: Record, b: Record, lang: str = "en") -> str:
    """The noise of a ratio of two figures, as every comparison weighs it (verdicts.compare_metrics)."""
    pct = verdicts.compare_metrics(a.metrics, b.metrics)["noise_pct"]
    return f" +-{pct:.1f}%" if pct is not None else i18n.t(lang, "a_no_interval")


def _efficiency(r: Record | None, one: Record | None, n: int, lang: str = "en") -> str:
    """Scaling efficiency and its noise."""
    if not r or not one or n == 1:
        return "-"
    return f"{stats.scaling_efficiency(r.images_per_s, n, one.images_per_s):.1f}%" + _noise(r, one, lang)


def seed_lines(records: list[Record], lang: str = "en") -> list[str]:
    """The seed table of the newest commit that measured it, beside the article's figures."""
    cells = [r for r in records if r.ok and r.current and r.case["name"] in SEED_NAMES]
    article = [r for r in cells if r.case["model"] == query.ARTICLE_MODEL]
    cells = article or cells  # the articles' ResNet-50 experiment, however new another model's seed run is
    if not cells:
        return [i18n.t(lang, "a_seed_none")]
    newest = max(cells, key=lambda r: (r.started_at, r.run_id))
    mine, setting = query.article_cells(query.latest([r for r in cells if r.commit == newest.commit]), SEED_NAMES)
    base, opt = (query.by_name_and_gpus(mine, n) for n in SEED_NAMES)
    rows = []
    for n in sorted(set(base) | set(opt) | set(PUBLISHED)):
        b, o = base.get(n), opt.get(n)
        pb, po = PUBLISHED.get(n, (None, None))
        gain_article = f"{stats.improvement_pct(pb, po):+.1f}%" if pb and po else "-"
        gain = (f"{stats.improvement_pct(b.images_per_s, o.images_per_s):+.1f}%{_noise(b, o, lang)}" if b and o
                else "-")
        rows.append([str(n), f"{_measured(b, lang)} ({fmt(pb)})", f"{_measured(o, lang)} ({fmt(po)})",
                     f"{gain} ({gain_article})",
                     _efficiency(o, opt.get(1), n, lang)])
    head = i18n.t(lang, "a_seed_head", commit=newest.commit, day=day(newest.started_at), model=setting[0],
                  px=setting[1], batch=setting[2])
    cols = i18n.t(lang, "a_seed_cols")
    return wrap(head) + [table(rows, cols, ("right",) * len(cols))]


def best_lines(records: list[Record], lang: str = "en") -> list[str]:
    """The fastest configuration of the newest commit per GPU count, and recommend's winners."""
    ok = [r for r in records if r.ok and r.current and not r.case.get("loader_only") and not r.slowed_pct]
    if not ok:
        return []
    newest = max(ok, key=lambda r: (r.started_at, r.run_id)).commit
    mine = query.latest([r for r in ok if r.commit == newest])
    out = []
    winners = targets.recommend_winners(records)
    for n in sorted({r.case["gpus"] for r in mine}):
        at_n = [r for r in mine if r.case["gpus"] == n]
        top = max(at_n, key=lambda r: r.images_per_s)
        out += _fastest_line("a_fastest", top, newest, n, lang)
        eager = [r for r in at_n if not r.case.get("compile") and not r.case.get("cuda_graph")]
        if eager and top not in eager:  # the fastest known is compiled: the fastest eager set-up below it
            out += _fastest_line("a_fastest_eager", max(eager, key=lambda r: r.images_per_s), newest, n, lang)
        won = winners.get((n, top.case["model"]))
        if won and won.get("recipe"):  # recommend keeps each machine's latest scripts in its recipes/ folder
            recipe = f"{top.machine}/recipes/{won['recipe'].rsplit('/', 1)[-1]}"
            out += wrap(i18n.t(lang, "a_recipe", n=n, run=won["run"], recipe=recipe))
    if not winners and any(r.case["device"] == "cuda" for r in mine):
        out += wrap(i18n.t(lang, "a_no_recommend"))
    out += [ln for row in targets.recommend_rows(records)
            for ln in wrap(i18n.t(lang, "a_hint", claim=i18n.recommend_label(lang, row[0]),
                                  hint=i18n.recommend_shown(lang, row[4])))]
    return out


def _fastest_line(key: str, r: Record, commit: str, n: int, lang: str) -> list[str]:
    return wrap(i18n.t(lang, key, commit=commit, n=n, name=r.case["name"], config=describe(r.case),
                       ips=fmt(r.images_per_s), noise=f"{noise(r.metrics)}{marked(r, lang)}",
                       k=r.metrics.get("processes", 1)))


def claim_rows(found: list[answersmod.Answer], lang: str = "en") -> tuple[str, list[str]]:
    rows, notes = [], []
    for a in found:
        ev = a.latest
        rows.append([a.claim.id, i18n.word(lang, a.verdict), i18n.effect(lang, ev.effect) if ev else "-",
                     ev.commit if ev else "-", day(ev.date) if ev else "-"])
        if ev is None:
            notes += wrap(i18n.t(lang, "a_hint", claim=a.claim.id, hint=phrases.render(a.hint, lang)))
            continue
        text = i18n.t(lang, "a_evidence", claim=a.claim.id, pair=phrases.render(ev.pair, lang),
                      basis=phrases.render(ev.basis, lang), runs=", ".join(ev.runs))
        if ev.detail:
            text += phrases.SEPARATOR[lang] + phrases.render(ev.detail, lang)
        if a.disagrees:
            d = a.disagrees
            text += i18n.t(lang, "a_earlier", verdict=i18n.word(lang, d.verdict), effect=i18n.effect(lang, d.effect),
                           commit=d.commit,
                           day=day(d.date), basis=phrases.render(d.basis, lang))
        notes += wrap(text)
    return table(rows, i18n.t(lang, "a_claim_cols")), notes


def feed_lines(records: list[Record], lang: str = "en") -> list[str]:
    """The newest feed answer (bench feed) of each loader: how many GPUs this host feeds with it, judged by the
    pace its run kept; nothing where no feed ran here."""
    runs = feed.latest_feeds(records)
    if not runs:
        return []
    manifests = query.run_manifests([r for run in runs for r in run])
    paces = [(manifests.get(run[0].run_id) or {}).get("feed_pace") or {} for run in runs]
    ladders = [ladder for run, kept in zip(runs, paces) for ladder in feed.ladders(run, kept.get("images_per_s"))]
    said = feed_text.answers(lang, ladders, untrusted.clean(str(paces[0].get("gpu") or "GPU")))
    ids = ("、" if lang == "zh" else ", ").join(run[0].run_id for run in runs)
    head = i18n.t(lang, "feed_answer" if len(runs) == 1 else "feed_answer_runs", run=ids)
    return wrap(head) + [ln for a in said for ln in wrap("- " + a)] + [""]


def machine_answers(machine: str, records: list[Record], models: list[str] | None = None, lang: str = "en") -> str:
    """One machine's answers, about one screen for each model it trained: the seed table (the article's
    ResNet-50 experiment), then per model its best configuration and which of the articles' advice holds.
    `models`: only these models' answers (what a run just trained), each other model in one line saying
    where its answers are."""
    commits = len({r.commit for r in records})
    out = [i18n.t(lang, "a_title", machine=machine, commits=commits), ""]
    out += seed_lines(records, lang) + [""] + feed_lines(records, lang)
    per_model = answersmod.by_model(records)
    others = [m for m, _ in per_model if models is not None and m not in models]
    per_model = [(m, mine) for m, mine in per_model if m not in others]
    for i, (model, mine) in enumerate(per_model):
        found = answersmod.answers(mine)
        claims_table, notes = claim_rows(found, lang)
        decided = sum(a.verdict in answersmod.DECIDED for a in found)
        of = i18n.t(lang, "a_for_model", model=model) if len(per_model) > 1 or others else ""
        best = best_lines(mine, lang)
        if best:
            out += [i18n.t(lang, "a_best", of=of)] + best + [""]
        out += wrap(i18n.t(lang, "a_advice", of=of, decided=decided, n=len(found)))
        out += [claims_table] + notes + ([""] if i + 1 < len(per_model) else [])
    if others:
        out += [""] + [ln for m in others for ln in wrap(i18n.t(lang, "a_other_model", model=m, machine=machine))]
    return "\n".join(out)


def render(records: list[Record], lang: str = "en") -> str:
    """Every machine's answers, the machines in order of their newest measurement (newest first)."""
    if not records:
        return i18n.t(lang, "a_none")
    return "\n\n".join(machine_answers(machine, recs, lang=lang)
                        for machine, recs in query.newest_first(records, "machine"))


def machine_page(machine: str, records: list[Record], reports: dict[str, str], recipes: list[str],
                 lang: str = "en") -> str:
    """The machine folder's page (results/<machine>/README.md, README.zh.md in Chinese): its answers, then
    where the evidence lies, each commit newest first with a link to its REPORT.md (`reports`: commit ->
    relative link), and the latest recipes (relative links)."""
    out = [i18n.t(lang, "page_title", machine=machine), "", i18n.t(lang, "page_generated"), "",
           machine_answers(machine, records, lang=lang), "", i18n.t(lang, "page_evidence"), ""]
    for commit, recs in query.newest_first(records, "commit"):
        names = sorted({r.sweep for r in recs})
        sweeps = ", ".join(names) if lang == "en" else "、".join(f"`{n}`" for n in names)  # names as typed
        when = day(max(r.started_at for r in recs))
        link = f"[{commit}]({reports[commit]})" if commit in reports else commit
        out += wrap(i18n.t(lang, "page_commit", link=link, when=when, runs=len(query.runs_of(recs)), sweeps=sweeps))
    if recipes:
        out += [""] + wrap(i18n.t(lang, "page_recipes", links=", ".join(f"[{p.rsplit('/', 1)[-1]}]({p})"
                                                                          for p in recipes)))
    return "\n".join(out) + "\n"
