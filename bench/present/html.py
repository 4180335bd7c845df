"""`bench report --html`: the report as one self-contained page a person opens in a browser. It holds
what REPORT.md holds (tables, summary, the runs' noise, plots, claims, every case, where the time went)
with every plot inlined, a contents list at the top and numbers right-aligned, then each machine's
history: its headline cases across commits and every run's noise floor. REPORT.md's Markdown becomes HTML through python-markdown.

What the records say is data from elsewhere, and the page must never run it: python-markdown's raw HTML
is turned off with its links, references and emphasis (a record's `<script>` or `[a](javascript:..)`
stays text), an image is kept only where it is a plot this page wrote, and the page carries a
Content-Security-Policy that forbids scripts and every load but its own inlined images, so a missed
escape still cannot execute."""
from __future__ import annotations

import base64
import html
import re
import tempfile
from pathlib import Path

from ..analysis import noise
from ..core.errors import BenchError
from ..store import query
from ..store.record import Record
from . import i18n
from .history_plot import commit_order, history_plot, history_rows
from .report import render, write_plots
from .text import table

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""The page needs no script and loads nothing: its style is inline and its plots are data: URIs."""
INERT = {"inlinePatterns": ("html", "link", "reference", "image_reference", "short_reference", "short_image_ref",
                            "autolink", "automail", "em_strong", "em_strong2", "not_strong", "backtick"),
         "preprocessors": ("html_block",)}
"""python-markdown's parts that turn text into markup beyond the report's own headings, tables, lists and
plots: off, so a record's string is shown as written (python-markdown has no switch for raw HTML)."""

HEADLINE_CASES = ("best", "seed-optimized")
"""The cases whose history the page shows, per machine and GPU count: what a user reads first."""

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { border-bottom: 2px solid #444; } h2 { margin-top: 1.6em; border-bottom: 1px solid #bbb; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; } th { background: #eee; }
td { font-variant-numeric: tabular-nums; } td.num { text-align: right; white-space: nowrap; }
nav { background: #f7f7f7; border: 1px solid #ddd; padding: 0.3em 1em; } nav ul { margin: 0.2em 0; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
code { background: #f3f3f3; padding: 0 0.2em; }
"""


def _markdown():
    try:
        import markdown
    except ImportError:
        raise BenchError("bench report --html needs python-markdown; install it with `pip install markdown` "
                         "(environments/requirements-common.txt lists it)") from None
    return markdown


def blocks_apart(text: str) -> str:
    """A blank line wherever a table or a list begins or ends, so each is its own block in Markdown
    (REPORT.md puts a table straight under its title line, which GitHub accepts and python-markdown not)."""
    out, prev = [], ""
    for line in text.splitlines():
        kind = "table" if line.startswith("|") else "list" if line.startswith("- ") else \
            "more" if line.startswith("  ") and prev in ("list", "more") else "text" if line.strip() else ""
        before = {"more": "list"}.get(prev, prev)
        if kind and before and kind != "more" and kind != before and out and out[-1]:
            out.append("")
        out.append(line)
        prev = kind
    return "\n".join(out)


NUMBER_CELL = re.compile(r"<td>\s*((?:[+\-~]|&plusmn;|±)*\d[\d,.]*\s*(?:%|x|s|ms|GiB|GB|MB|W)?"
                         r"(?:\s*(?:\(|\[)[^<]*(?:\)|\]))?|-)\s*</td>")
"""A cell that holds a number (signed, with a unit, perhaps its interval or the article's figure beside it)
or a lone "-" for one not measured: right-aligned, so digits line up."""


def align_numbers(body: str) -> str:
    return NUMBER_CELL.sub(lambda m: f'<td class="num">{m.group(1)}</td>', body)


def contents_list(tokens: list[dict], lang: str) -> str:
    """Every top-level section (the answers, each machine and commit, the history), with the machines
    under the answers and the history: a list of links that fits one screen however many commits."""
    def item(t, children=()):
        inner = "".join(item(c) for c in children)
        return (f'<li><a href="#{t["id"]}">{t["name"]}</a>' + (f"<ul>{inner}</ul>" if inner else "") + "</li>")
    keep = {i18n.t(lang, "answers_title"), i18n.t(lang, "history_title")}
    items = "".join(item(t, t["children"] if html.unescape(t["name"]) in keep else ()) for t in tokens)
    return f'<nav>\n<h2>{html.escape(i18n.t(lang, "contents"))}</h2>\n<ul>{items}</ul>\n</nav>\n'


def inert_markdown(md):
    """The converter with every part that could make markup of a record's text deregistered."""
    for kind, names in INERT.items():
        registry = getattr(md, kind)
        for name in names:
            if name in registry:
                registry.deregister(name)
    return md


def inline_images(body: str, folder: Path) -> str:
    """Each image this page wrote (a PNG under `folder`) as a data: URI, so the page needs no file beside
    it; any other image (a record's own Markdown) becomes its alt text, loading nothing."""
    written = {str(p.relative_to(folder)) for p in folder.rglob("*.png")}

    def data_uri(m):
        src = html.unescape(m.group(2))
        if src not in written:
            return m.group(1) and html.escape(html.unescape(m.group(1)))
        png = (folder / src).read_bytes()
        return f'<img alt="{m.group(1)}" src="data:image/png;base64,{base64.b64encode(png).decode()}" />'
    return re.sub(r'<img alt="([^"]*)" src="([^"]*)" ?/?>', data_uri, body)


def history_section(records: list[Record], folder: Path, lang: str) -> str:
    """Per machine: the headline cases across its commits (a table and a plot each), then every run's
    noise floor and how far its median moved by the run's end."""
    out = [f"# {i18n.t(lang, 'history_title')}"]
    for (machine,), recs in query.group(records, "machine").items():
        order = commit_order(recs)
        out.append(f"## {machine}")
        headline = [r for r in recs if r.case["name"] in HEADLINE_CASES]
        for (case_id,), runs in sorted(query.group(headline, "case_id").items()):
            out += [f"### {case_id}", "", table(history_rows(runs, order), i18n.t(lang, "history_cols"))]
            png = history_plot(case_id, runs, order, folder / "plots" / "history" / machine)
            if png:
                out += ["", f"![{case_id}]({png.relative_to(folder)})"]
        rows = []
        for run_id, m in sorted(query.run_manifests(recs).items()):
            start, end = m.get("noise_floor") or {}, m.get("noise_floor_end") or {}
            if "rel_sd" not in start:
                continue
            moved = noise.floor_drift_pct(m)
            rows.append([m.get("commit_folder", "-"), run_id, f"{100 * start['rel_sd']:.2f}", start["n"],
                         f"{100 * end['rel_sd']:.2f}" if "rel_sd" in end else "-",
                         f"{moved:+.1f}" if moved is not None else "-"])
        if rows:
            out += ["", f"### {i18n.t(lang, 'history_noise')}", "", table(rows, i18n.t(lang, "noise_cols"))]
    return "\n".join(out)


def write_html(records: list[Record], history: list[Record], path: Path, lang: str = "en", wide: bool = False,
               assumed: dict | None = None) -> Path:
    """The page at `path`: the report of `records`, then the history of `history` (every stored record
    of their machines, so the history reaches past the selection)."""
    markdown = _markdown()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = render(records, lang, write_plots(records, folder), wide, assumed) + "\n\n" + \
            history_section(history, folder, lang)
        md = inert_markdown(markdown.Markdown(extensions=["tables", "toc"],
                                              extension_configs={"toc": {"toc_depth": "1-2"}}))
        body = inline_images(align_numbers(md.convert(blocks_apart(text))), folder)
        contents = contents_list(md.toc_tokens, lang)
    title = i18n.t(lang, "report_head").splitlines()[0].lstrip("# ")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
                    f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
                    f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
                    f"<h1>{html.escape(title)}</h1>\n{contents}{body}\n</body>\n</html>\n", encoding="utf-8")
    return path
