"""`bench history CASE`: one case in every stored run, oldest first."""
from __future__ import annotations

from tabulate import tabulate

from ..analysis import compare
from ..core.errors import StoreError
from ..core.labels import describe
from ..store import query
from .flags import add_results_flag
from .reading import load


def add(sub) -> None:
    h = sub.add_parser("history", help="one case across every stored commit, oldest first",
                       description="One case (a case id or its beginning) in every stored run, oldest first, "
                                   "with its figure and 95% interval. Exit 0; 2 when no stored case matches.")
    h.add_argument("case", help="a case id, or its beginning")
    add_results_flag(h)
    h.set_defaults(func=command)


def command(a) -> int:
    records = [r for r in load([a.results]) if r.case_id.startswith(a.case)]
    if not records:
        raise StoreError(f"no stored result has a case id starting with {a.case!r}")
    for case_id, recs in query.group(records, "case_id").items():
        print(f"{case_id[0]}\n  {describe(recs[0].case)}")
        print(tabulate(compare.history(case_id[0], recs), headers=["started", "commit", "run", "machine", "sweep",
                       "status", "images/s", "95% interval"], tablefmt="github", disable_numparse=True) + "\n")
    return 0
