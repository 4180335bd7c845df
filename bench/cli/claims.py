"""`bench claims`: each claim of the two articles, answered per machine by the latest decided verdict
across its commits; `--commit` (or `--run`) judges one commit's latest runs alone."""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from ..analysis import answers, claims
from ..core.errors import StoreError
from ..present import answers_text
from ..present.report import claims_section, files_lines, runs_used_lines
from ..store import query
from .flags import add_results_flag, add_selection_flags
from .reading import load, selected


def add(sub) -> None:
    cl = sub.add_parser("claims", help="each claim of the two articles, answered per machine with its evidence",
                        description="Check the articles' claims against stored results: per machine, each claim's "
                                    "latest decided verdict across all its commits (and an earlier one that "
                                    "disagrees); --commit judges one commit alone. Exit 0; 2 when no stored "
                                    "result matches.")
    cl.add_argument("paths", nargs="*", help="result files or folders (default: the results root)")
    add_results_flag(cl)
    cl.add_argument("--include-old", action="store_true",
                    help="with --commit: judge records made under an older metric definition too")
    add_selection_flags(cl)
    cl.add_argument("--wide", action="store_true",
                    help="with --commit: one row per claim with its sentence and evidence, however wide")
    cl.set_defaults(func=command)


def command(a) -> int:
    records = selected(a, load(a.paths or [a.results]))
    if not records:
        raise StoreError("no stored results match")
    if not (a.commit or a.run):
        for machine, recs in query.newest_first(records, "machine"):
            per_model = answers.by_model(recs)
            for model, mine in per_model:
                table, notes = answers_text.claim_rows(answers.answers(mine))
                of = f" for {model}" if len(per_model) > 1 else ""
                print(f"## {machine}: each claim's latest decided verdict{of}, across "
                      f"{len({r.commit for r in mine})} commit(s)\n{table}\n" + "\n".join(notes) + "\n")
        return 0
    for machine, recs in query.group(records, "machine").items():
        newest = query.newest_commit(recs)
        chosen = query.select(recs, commit=newest)
        print(f"## {machine[0]}, commit {newest}\n" + "\n".join(runs_used_lines(query.latest(chosen))) + "\n")
        evals = claims.evaluations(chosen, a.include_old)
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
