"""The report of stored results: per machine and commit the article's table, a summary, the runs
and their noise, plots, targets, the claims and every case; REPORT.md beside the results."""
from __future__ import annotations

from pathlib import Path

from ..analysis import claims, noise, targets
from ..core import phrases, stats, verdicts
from ..core.identity import differing_fields
from ..core.labels import describe, noise as noise_text, profile_text
from ..store import query
from ..store.record import Record
from ..store.tree import DEFAULT_ROOT, MACHINE_PAGE
from . import answers_text, i18n, plots
from .article import article_table, details_table, seed_table
from .cases import cases_table, full_table, short_labels
from .phases_table import phase_table
from .text import fmt, marked, table, wrap


def environment_line(records: list[Record]) -> str:
    envs = {(r.machine, r.data["env"].get("gpu_model"), r.data["env"].get("torch"), r.data["env"].get("cuda"),
             r.data["env"].get("commit", "")[:12], r.data["env"].get("dirty")) for r in records}
    return "; ".join(f"{m}: {g or 'no GPU'}, torch {t}, CUDA {c}, commit {cm}{' (dirty)' if d else ''}"
                     for m, g, t, c, cm, d in sorted(envs, key=str))


def render(records: list[Record], lang: str = "en", plot_files: dict | None = None, wide: bool = False,
           assumed: dict | None = None, answers_first: bool = True) -> str:
    """Each machine's answers (unless `answers_first` is False: a caller that prints them itself), then
    every machine and commit among the records (never mixed in one table), the latest run of each case:
    the article's table first, then a summary, then the details; `wide` adds every column. `assumed`:
    each machine's assumed noise (analysis/noise.py), from these records where not given."""
    if not records:
        return "no stored results found"
    assumed = noise.assumed_noise(records) if assumed is None else assumed
    out = [f"# {i18n.t(lang, 'answers_title')}\n\n{answers_text.render(records, lang)}"] if answers_first else []
    # per machine (newest measured first), its commits newest first: by when they ran, not by hash
    for machine, mine in query.newest_first(records, "machine"):
        for commit, recs in query.newest_first(mine, "commit"):
            out.append(f"# {i18n.t(lang, 'group', machine=machine, commit=commit)}\n")
            out.append(_render_group(query.latest(recs), lang, (plot_files or {}).get((machine, commit), []), wide,
                                     assumed))
    return "\n\n".join(out)


def _judgeable(records: list[Record]) -> list[Record]:
    return [r for r in records if r.ok and not r.case.get("loader_only") and not r.slowed_pct]


def summary_lines(records: list[Record], evals: list, lang: str) -> list[str]:
    lines, labels = [], short_labels(records)
    current = [r for r in _judgeable(records) if r.current]
    judged = current or _judgeable(records)  # only older records here: shown, marked *
    mark = "" if current else "*"
    # ranked only among comparable cases: one model and image size at one GPU count
    for model, px, n in sorted({(r.case["model"], r.case["image_size"], r.case["gpus"]) for r in judged}):
        top = max((r for r in judged if (r.case["model"], r.case["image_size"], r.case["gpus"]) == (model, px, n)),
                  key=lambda r: r.images_per_s)
        lines += wrap("- " + i18n.t(lang, "best_found", label=f"{labels[top.case_id]}{mark}{marked(top, lang)} ({model}, {px} px, "
                                                               f"{describe(top.case)}, {n} GPU(s))",
                                    ips=fmt(top.images_per_s), noise=noise_text(top.metrics).strip("()"),
                                    k=top.metrics.get("processes", 1), sweep=top.sweep))
    for many in sorted(judged, key=lambda r: (r.case["name"], r.case["gpus"])):
        n = many.case["gpus"]
        # against one GPU at exactly the same settings: the case differs in its GPU count alone
        one = next((r for r in judged if r.case["gpus"] == 1 and n > 1
                    and differing_fields(r.case, many.case) == {"gpus"}), None)
        if one:
            eff = stats.scaling_efficiency(many.images_per_s, n, one.images_per_s)
            lines += wrap("- " + i18n.t(lang, "efficiency", name=labels[many.case_id], n=n, eff=f"{eff:.1f}%"))
    counts = {v: 0 for v in (claims.HOLDS, claims.FAILS, claims.INCONCLUSIVE, claims.CANNOT)}
    for _, e in evals:  # a verdict that a shared GPU left open counts as inconclusive
        counts[claims.INCONCLUSIVE if e["verdict"] == verdicts.SHARED else e["verdict"]] += 1
    lines += wrap("- " + i18n.t(lang, "claims_count", holds=counts[claims.HOLDS], fails=counts[claims.FAILS],
                                inconclusive=counts[claims.INCONCLUSIVE], cannot=counts[claims.CANNOT]))
    return lines


def runs_used_lines(records: list[Record], lang: str = "en", bullet: str = "") -> list[str]:
    """Which runs a table used, by the stated rule, and how many records it only shows; `bullet` "- "
    makes each a list item (so Markdown keeps them apart)."""
    ids = query.runs_of(records)
    texts = [i18n.t(lang, "runs_used", runs=", ".join(ids[:4]) + (f" +{len(ids) - 4}" if len(ids) > 4 else ""))]
    old = sum(not r.current for r in records)
    again = sum(r.rederived for r in records)
    texts += ([i18n.t(lang, "rederived", n=again)] if again else []) + ([i18n.t(lang, "old_defs", n=old)] if old else [])
    return [ln for text in texts for ln in wrap(bullet + text)]


def noise_floor_lines(records: list[Record], lang: str = "en") -> list[str]:
    """The runs used, then each run's noise floor at its start and end, one list item each."""
    lines = runs_used_lines(records, lang, bullet="- ")
    for run_id, m in sorted(query.run_manifests(records).items()):
        start, end = m.get("noise_floor") or {}, m.get("noise_floor_end") or {}
        if "rel_sd" in start:
            text = i18n.t(lang, "floor", run=run_id, sd=f"{100 * start['rel_sd']:.2f}",
                          case=start["case_id"].rsplit("-", 1)[0], n=start["n"])
            if (drift := noise.floor_drift_pct(m)) is not None:
                text += i18n.t(lang, "floor_end", sd=f"{100 * end['rel_sd']:.2f}", n=end["n"], drift=f"{drift:+.1f}")
        else:
            text = i18n.t(lang, "no_floor", run=run_id, k=m.get("processes", 1))
        if m.get("interrupted"):
            text += i18n.t(lang, "interrupted", at=m.get("finished_at") or "?")
        lines += wrap("- " + text)
    return lines


def claims_section(evals: list, lang: str) -> list[str]:
    rows = [[c.id, i18n.word(lang, e["verdict"]), e["effect"]] for c, e in evals]
    out = [table(rows, i18n.t(lang, "claims_cols")), "", f"{i18n.t(lang, 'evidence')}:"]
    for c, e in evals:
        evidence = phrases.render(e.get("evidence_phrase") or e["evidence"], lang)
        out += wrap(f"- {c.id} ({i18n.claim_source(lang, c)}): {i18n.claim_text(lang, c)} {evidence}")
    files = files_lines(claims.files_compared(evals, root=str(DEFAULT_ROOT)))
    return out + (["", f"{i18n.t(lang, 'files')}:"] + files if files else [])


def files_lines(files: list[tuple[str, list[str]]]) -> list[str]:
    """Each claim, then the files it compared: their folder and run on one line, then each case id on a
    line of its own (a file is <folder><case id>/<run>.json), so no line is wider than a terminal."""
    out = []
    for claim, paths in files:
        out.append(f"- {claim}:")
        groups: dict[tuple[str, str], list[str]] = {}
        for p in paths:
            folder, case_id, run = _path_parts(p)
            groups.setdefault((folder, run), []).append(case_id)
        for (folder, run), ids in groups.items():
            out += [f"  {folder} (run {run}):" if run else f"  {folder}"] + [f"    {i}" for i in ids]
    return out


def _path_parts(path: str) -> tuple[str, str, str]:
    """(folder with its trailing slash, case id, run id) of <folder><case id>/<run>.json; a path of
    another shape whole, as the folder."""
    parts = path.rsplit("/", 2)
    if len(parts) == 3 and parts[2].endswith(".json"):
        return parts[0] + "/", parts[1], parts[2].removesuffix(".json")
    return path, "", ""


def targets_section(records: list[Record], lang: str) -> list[str]:
    rows = targets.evaluate(records)
    out = [table([[r[0], r[1], r[2], i18n.word(lang, r[3])] for r in rows], i18n.t(lang, "targets_cols"))]
    return out + [ln for r in rows if r[4] or r[5] for ln in wrap(f"- {r[0]}: {r[4]}" + (f" ({r[5]})" if r[5] else ""))]


def standing(evals: list, run: str, lang: str) -> str:
    """The verdicts an unreliable run still decides (a count, not a timing), or that none does."""
    decided = [f"{c.id} ({i18n.word(lang, e['verdict'])}, {e['effect']})" for c, e in evals
               if e["verdict"] in (claims.HOLDS, claims.FAILS) and any(f.endswith(f"/{run}.json") for f in e["files"])]
    return i18n.t(lang, "stand", which="; ".join(decided)) if decided else i18n.t(lang, "none_stand")


def _render_group(records: list[Record], lang: str, plot_files: list, wide: bool = False,
                  assumed: dict | None = None) -> str:
    unreliable = getattr(assumed, "unreliable", {})
    evals = claims.evaluations(records)  # judged once, for the warning, the summary and the claims section
    out = [ln for run in query.runs_of(records) if run in unreliable
           for ln in wrap("**" + i18n.t(lang, "unreliable", run=run, why=phrases.render(unreliable[run], lang),
                                        stand=standing(evals, run, lang)) + "**")]
    out += [""] if out else []
    for optimized, title in (("seed-optimized", "seed_title"), ("best", "best_title")):
        if optimized == "best" and not any(r.case["name"] == "best" for r in records):
            continue
        seed, notes, pairs = article_table(records, lang, optimized)
        out += [f"## {i18n.t(lang, title)}", seed] + notes
        if any(b or o for _, b, o in pairs):
            details, config_notes = details_table(pairs, lang)
            out += ["", i18n.t(lang, "details_title") + ":", details] + config_notes
        out.append("")
    out += [f"## {i18n.t(lang, 'summary_title')}"] + summary_lines(records, evals, lang)
    out += ["", f"## {i18n.t(lang, 'runs_title')}"] + noise_floor_lines(records, lang)
    if plot_files:
        out += ["", f"## {i18n.t(lang, 'plots_title')}"] + [f"![{p.stem}]({p})" for p in plot_files]
    if any(r.case["name"].startswith(("target-", "recommend-")) for r in records):
        out += ["", f"## {i18n.t(lang, 'targets_title')}"] + targets_section(records, lang)
    out += ["", f"## {i18n.t(lang, 'claims_title')}"] + claims_section(evals, lang)
    every, notes = cases_table(records, lang)
    out += ["", f"## {i18n.t(lang, 'cases_title')}", every] + notes
    profiled = [(r, profile_text(r.data)) for r in records if profile_text(r.data)]
    if profiled:
        out += ["", f"## {i18n.t(lang, 'profile_title')}"]
        out += [f"- {r.case_id}{text}" for r, text in profiled]
    spent = phase_table(records, lang)
    if spent:
        out += ["", f"## {i18n.t(lang, 'phases_title')}", spent, ""] + wrap(i18n.t(lang, "phases_note"))
    if wide:
        out += ["", f"## {i18n.t(lang, 'wide_seed')}", seed_table(records, lang), "",
                f"## {i18n.t(lang, 'wide_cases')}", full_table(records)]
    out += [""] + wrap(f"{i18n.t(lang, 'environment')}: {environment_line(records)}")
    return "\n".join(out)


def write_report(records: list[Record], out_dir: Path, lang: str = "en", wide: bool = False,
                 assumed: dict | None = None) -> Path:
    """REPORT.md (REPORT.zh.md in Chinese) with the tables and PNG plots (under plots/) beside the results
    it reads."""
    out_dir = Path(out_dir)
    path = out_dir / report_name(lang)
    path.write_text(as_markdown_file(i18n.t(lang, "report_head") + "\n\n" + render(
        records, lang, write_plots(records, out_dir), wide, assumed) + "\n"))
    return path


def as_markdown_file(text: str) -> str:
    """Text for a Markdown file a site renders (GitHub): every `<` as an entity, so no string of a record
    becomes HTML there; the report itself writes no HTML, and `&lt;` renders as the character."""
    return text.replace("<", "&lt;")


def machine_page_text(folder: Path, machine: str, records: list[Record], lang: str = "en") -> str:
    """The page of the machine folder `folder` in `lang`, linking each commit's report in that language
    (else its REPORT.md) and the recipes it holds."""
    reports = {}
    for c in {r.commit for r in records}:
        name = next((n for n in (report_name(lang), "REPORT.md") if (folder / c / n).is_file()), None)
        if name:
            reports[c] = f"{c}/{name}"
    recipes = sorted(f"recipes/{p.name}" for p in (folder / "recipes").glob("*.py"))
    return as_markdown_file(answers_text.machine_page(machine, records, reports, recipes, lang))


def page_name(lang: str) -> str:
    """README.md in English; README.zh.md beside it in Chinese."""
    return MACHINE_PAGE if lang == "en" else MACHINE_PAGE.replace(".md", f".{lang}.md")


def write_machine_pages(records: list[Record], root: Path) -> list[Path]:
    """Each machine's pages, root/<machine>/README.md and README.zh.md, from every record of that machine
    given: written only where its text changed, so a page of results that did not change is left as it is."""
    written = []
    for machine, mine in query.newest_first(records, "machine"):
        folder = Path(root) / machine
        if not folder.is_dir():
            continue
        for lang in ("en", "zh"):
            text = machine_page_text(folder, machine, mine, lang)
            page = folder / page_name(lang)
            if not page.is_file() or page.read_text() != text:
                page.write_text(text)
                written.append(page)
    return written


def write_plots(records: list[Record], out_dir: Path) -> dict:
    """Each machine and commit's plots under out_dir/plots/ (a folder each where there are several);
    (machine, commit) -> their paths relative to out_dir, as render() links them."""
    groups = query.group(records, "machine", "commit")
    links = {}
    for key, recs in groups.items():
        folder = out_dir / "plots" / (f"{key[0]}-{key[1]}" if len(groups) > 1 else "")
        links[key] = [p.relative_to(out_dir) for p in plots.write_all(query.latest(recs), folder, key)]
    return links


def report_name(lang: str) -> str:
    """REPORT.md in English; each other language its own file (REPORT.zh.md), so neither replaces the other."""
    return "REPORT.md" if lang == "en" else f"REPORT.{lang}.md"
