"""`bench report`: each machine's answers on screen; REPORT.md and plots (build/report/ for this checkout's
results), each machine's page (results/<machine>/README.md, rewritten only where it changed), CSV and
HTML on request."""
from __future__ import annotations

from pathlib import Path

from ..analysis import noise
from ..present import answers_text, exports, html, report
from ..store.tree import generated_folder
from .flags import add_results_flag, add_selection_flags
from .reading import load, selected, shown


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
    rep.add_argument("--out", default="", help="folder for REPORT.md and plots/ (default: the one folder read, "
                                               "else build/report/ for this checkout's results, which git ignores)")
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
    stored = load(paths)
    records = selected(a, stored)
    # a figure without an interval is judged against what its machine has shown in every stored run
    every = (load([a.results]) if Path(a.results).is_dir() else []) if a.paths else stored
    assumed = noise.assumed_noise(every + records if a.paths else every)
    # the answers on screen (about one screen a machine); every commit's details with --all and in REPORT.md
    print(report.render(records, a.lang, wide=a.wide, assumed=assumed) if a.all or a.wide
          else answers_text.render(records, a.lang))
    out = Path(a.out) if a.out else (Path(paths[0]) if a.paths and len(paths) == 1 and Path(paths[0]).is_dir()
                                     else generated_folder(a.results, "report") or Path(a.results))
    machines = {r.machine for r in records}
    if records and not a.no_files:
        out.mkdir(parents=True, exist_ok=True)
        print(f"\nwrote {shown(report.write_report(records, out, a.lang, a.wide, assumed))} (and its plots)")
        # each machine's page, from every record of the machine (whatever was selected)
        for page in report.write_machine_pages([r for r in every if r.machine in machines], Path(a.results)):
            print(f"wrote {shown(page)}")
    if records and a.html:
        # the history reaches past the selection: every stored record of the same machines
        history = [r for r in every if r.machine in machines] or records
        page = html.write_html(records, history, out / report.report_name(a.lang).replace(".md", ".html"), a.lang,
                               a.wide, assumed)
        print(f"\nwrote {shown(page)} (one page: open it in a browser)")
    if a.csv:
        every_record, seed = exports.write_csv(records, Path(a.csv))
        print(f"\nCSV written: {every_record} (every record) and {seed} (the seed table)")
    return 0
