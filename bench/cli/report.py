"""`bench report`: the tables of stored results, REPORT.md and plots, and CSV on request."""
from __future__ import annotations

from pathlib import Path

from ..analysis import noise
from ..present import answers_text, exports, html, report
from .flags import add_results_flag, add_selection_flags
from .reading import load, selected


def add(sub) -> None:
    rep = sub.add_parser("report", help="tables from stored results",
                         description="Render tables from stored results only (markdown; CSV with --csv). "
                                     "Exit 0; 2 when a path does not exist.")
    rep.add_argument("paths", nargs="*", help="result files or folders (default: the results root)")
    rep.add_argument("--lang", choices=("en", "zh"), default="en",
                     help="seed-table headings: en, or zh for the article's own")
    rep.add_argument("--csv", default="", metavar="FILE",
                     help="also write every record here as tidy CSV (one row per record: machine, commit, run, every "
                          "knob, numbers with units in the column names) and the seed table beside it (.seed.csv)")
    add_results_flag(rep)
    rep.add_argument("--out", default="", help="folder for REPORT.md and plots/ (default: the folder read)")
    rep.add_argument("--no-files", action="store_true", help="print only; write no REPORT.md or plots")
    rep.add_argument("--all", action="store_true",
                     help="print every commit's details after the answers (REPORT.md always holds them)")
    rep.add_argument("--wide", action="store_true", help="also every column of every case (wider than a terminal)")
    rep.add_argument("--html", action="store_true",
                     help="also write REPORT.html (REPORT.zh.html in Chinese) beside REPORT.md: one self-contained "
                          "page with the tables, plots, claims, each machine's history and every run's noise")
    add_selection_flags(rep)
    rep.set_defaults(func=command)


def command(a) -> int:
    paths = a.paths or [a.results]
    records = selected(a, load(paths))
    # a figure without an interval is judged against what its machine has shown in every stored run
    every = load([a.results]) if a.paths and Path(a.results).is_dir() else []
    assumed = noise.assumed_noise(every + records)
    # the answers on screen (about one screen a machine); every commit's details with --all and in REPORT.md
    print(report.render(records, a.lang, wide=a.wide, assumed=assumed) if a.all or a.wide
          else answers_text.render(records))
    out = Path(a.out) if a.out else (Path(paths[0]) if len(paths) == 1 and Path(paths[0]).is_dir() else Path(a.results))
    if records and not a.no_files:
        print(f"\nwrote {report.write_report(records, out, a.lang, a.wide, assumed)} (and its plots)")
    if records and a.html:
        machines = {r.machine for r in records}
        # the history reaches past the selection: every stored record of the same machines
        stored = every or (load([a.results]) if Path(a.results).is_dir() else [])
        history = [r for r in stored if r.machine in machines] or records
        page = html.write_html(records, history, out / report.report_name(a.lang).replace(".md", ".html"), a.lang,
                               a.wide, assumed)
        print(f"\nwrote {page} (one page: open it in a browser)")
    if a.csv:
        every_record, seed = exports.write_csv(records, Path(a.csv))
        print(f"\nCSV written: {every_record} (every record) and {seed} (the seed table)")
    return 0
