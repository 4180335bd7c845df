"""`bench report`: the tables of stored results, REPORT.md and plots, and CSV on request."""
from __future__ import annotations

from pathlib import Path

from ..analysis import noise
from ..present import exports, report
from ..store import query
from .flags import add_results_flag, add_selection_flags
from .reading import load, selected


def add(sub) -> None:
    rep = sub.add_parser("report", help="tables from stored results",
                         description="Render tables from stored results only (markdown; CSV with --csv). "
                                     "Exit 0; 2 when a path does not exist.")
    rep.add_argument("paths", nargs="*", help="result files or folders (default: the results root)")
    rep.add_argument("--lang", choices=("en", "zh"), default="en",
                     help="seed-table headings: en, or zh for the article's own")
    rep.add_argument("--csv", default="", help="also write the seed table here as CSV (and .cases.csv)")
    add_results_flag(rep)
    rep.add_argument("--out", default="", help="folder for REPORT.md and plots/ (default: the folder read)")
    rep.add_argument("--no-files", action="store_true", help="print only; write no REPORT.md or plots")
    rep.add_argument("--wide", action="store_true", help="also every column of every case (wider than a terminal)")
    add_selection_flags(rep)
    rep.set_defaults(func=command)


def command(a) -> int:
    paths = a.paths or [a.results]
    records = selected(a, load(paths))
    # a figure without an interval is judged against what its machine has shown in every stored run
    every = load([a.results]) if a.paths and Path(a.results).is_dir() else []
    assumed = noise.assumed_noise(every + records)
    print(report.render(records, a.lang, wide=a.wide, assumed=assumed))
    if records and not a.no_files:
        out = Path(a.out) if a.out else (Path(paths[0]) if len(paths) == 1 and Path(paths[0]).is_dir() else Path(a.results))
        print(f"\nwrote {report.write_report(records, out, a.lang, a.wide, assumed)} (and its plots)")
    if a.csv:
        seed, cases = exports.write_csv(query.latest(records), Path(a.csv), a.lang)
        print(f"\nCSV written: {seed} and {cases}")
    return 0
