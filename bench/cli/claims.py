"""`bench claims`: each claim of the two articles, judged per machine on one commit's latest runs."""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from ..analysis import claims, noise
from ..core.errors import StoreError
from ..present.report import claims_section, files_lines, runs_used_lines
from ..store import query
from .flags import add_results_flag, add_selection_flags
from .reading import load, selected


def add(sub) -> None:
    cl = sub.add_parser("claims", help="each claim of the two articles, with the measured effect and a verdict",
                        description="Check the articles' claims against stored results: per machine, the newest "
                                    "commit unless --commit names one. Exit 0; 2 when no stored result matches.")
    cl.add_argument("paths", nargs="*", help="result files or folders (default: the results root)")
    add_results_flag(cl)
    cl.add_argument("--include-old", action="store_true", help="judge records made under an older metric definition too")
    add_selection_flags(cl)
    cl.add_argument("--wide", action="store_true", help="one row per claim with its sentence and evidence, however wide")
    cl.set_defaults(func=command)


def command(a) -> int:
    every = load(a.paths or [a.results])
    records = selected(a, every)
    assumed = noise.assumed_noise(every)  # what each machine has shown, over every stored run
    if not records:
        raise StoreError("no stored results match")
    for machine, recs in query.group(records, "machine").items():
        newest = query.newest_commit(recs)
        chosen = query.select(recs, commit=newest)
        print(f"## {machine[0]}, commit {newest}\n" + "\n".join(runs_used_lines(query.latest(chosen))) + "\n")
        evals = claims.evaluations(chosen, a.include_old, assumed)
        if a.wide:  # one row per claim with its sentence and evidence, however wide
            print(tabulate(claims.table(chosen, evals=evals), headers=claims.HEADERS, tablefmt="github",
                           disable_numparse=True))
            files = files_lines(claims.files_compared(evals, str(Path(a.results).resolve())))
            if files:
                print("\nfiles compared:\n" + "\n".join(files))
        else:  # the report's section: verdicts in a table, evidence and files as wrapped lines
            print("\n".join(claims_section(evals, "en")))
        print()
    return 0
