"""`bench history CASE`: one case on every machine, across its stored commits in order, every run
with its figure and 95% interval, and a plot per machine under build/history/<machine>/ (which git ignores;
<results>/<machine>/history/ for a results tree outside this checkout)."""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from ..core.errors import StoreError
from ..core.labels import describe
from ..present import i18n
from ..present.history_plot import commit_order, history_plot, history_rows
from ..store import query
from ..store.tree import generated_folder
from .flags import add_results_flag
from .reading import load, shown


def add(sub) -> None:
    h = sub.add_parser("history", help="one case across every stored commit, oldest first",
                       description="One case (a case id or its beginning; ids it was stored under before work too) "
                                   "across every stored commit of each machine, in the order first measured, with "
                                   "its figure and 95% interval; a plot per case under build/history/<machine>/ "
                                   "(git ignores it; <results>/<machine>/history/ for another results tree). "
                                   "Exit 0; 2 when no stored case matches.")
    h.add_argument("case", help="a case id, or its beginning")
    h.add_argument("--no-plot", action="store_true", help="print only; write no plot")
    add_results_flag(h)
    h.set_defaults(func=command)


def command(a) -> int:
    every = load([a.results])
    matching = [r for r in every if r.case_id.startswith(a.case) or r.stored_id.startswith(a.case)]
    if not matching:
        raise StoreError(f"no stored result has a case id starting with {a.case!r}")
    for (machine, case_id), recs in query.group(matching, "machine", "case_id").items():
        order = commit_order([r for r in every if r.machine == machine])
        print(f"{case_id} on {machine}\n  {describe(recs[0].case)}")
        print(tabulate(history_rows(recs, order), headers=i18n.t("en", "history_cols"), tablefmt="github",
                       disable_numparse=True))
        if not a.no_plot:
            folder = generated_folder(a.results, "history")  # build/history/ for this checkout's results
            folder = folder / machine if folder else Path(a.results) / machine / "history"
            path = history_plot(case_id, recs, order, folder)
            if path:
                print(f"plot: {shown(path)}")
        print()
    return 0
