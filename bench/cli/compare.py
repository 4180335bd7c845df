"""`bench compare A B`: the same cases in two commits, runs or result folders, judged against noise."""
from __future__ import annotations

from ..analysis import compare, noise
from ..present import compare_text
from .flags import add_results_flag, matches, patterns
from .reading import load


def add(sub) -> None:
    c = sub.add_parser("compare", help="images/s of the same cases in two commits or result folders",
                       description="Compare stored throughput between two commits (ids or prefixes), runs or "
                                   "result folders. Exit 0: no regression; 1: a regression (with --fail-under); "
                                   "2: bad input, or no case ok on both sides.")
    c.add_argument("a", help="the earlier side: a run id, a commit (exact tree; name -dirty to get a dirty one) or a result folder")
    c.add_argument("b", help="the later side, likewise")
    c.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                   help="exit 1 when a case is slower by more than PCT percent beyond its noise, or ok in a and "
                        "failed in b (default: no gate)")
    c.add_argument("--require-same-cases", action="store_true",
                   help="with --fail-under, a case ok in a and missing in b is a regression too (default: off; it is "
                        "listed as `not in both`)")
    c.add_argument("--force", action="store_true", help="compare results from different GPU models or counts")
    c.add_argument("--machine", default="", help="the machine folder to read (needed when a commit ran on several)")
    c.add_argument("--include-old", action="store_true",
                   help="judge records made under an older metric definition too (by their windows' range)")
    c.add_argument("--json", default="", metavar="FILE", help="also write the comparison as JSON")
    c.add_argument("--only", default="", metavar="PATTERNS", help="compare only the cases whose id matches one of "
                                                                   "these comma-separated shell patterns")
    c.add_argument("--wide", action="store_true", help="full case ids in the table, however wide it gets")
    add_results_flag(c)
    c.set_defaults(func=command)


def command(a) -> int:
    records = load([a.results])
    a_label, a_recs = compare.resolve(a.a, records, a.machine or None)
    b_label, b_recs = compare.resolve(a.b, records, a.machine or None)
    if a.only:
        wanted = patterns(a.only)
        a_recs, b_recs = ([r for r in recs if matches(r.case_id, wanted)] for recs in (a_recs, b_recs))
    # the noise a figure without an interval is judged against: what this machine has shown in every stored run
    result = compare.judge_sides(a_label, a_recs, b_label, b_recs, a.fail_under, a.require_same_cases, a.force,
                                 a.include_old, noise.assumed_noise(records))
    print(compare_text.render(result, a.wide))
    if a.json:
        compare.write_json(a.json, compare.to_json(result, a.results))
        print(f"wrote {a.json}")
    if a.fail_under is not None:
        if result.regressed:
            print(f"\n{len(result.regressed)} case(s) regressed: slower by more than {a.fail_under:g}% beyond their noise, "
                  f"or ok in a but failed{' or missing' if a.require_same_cases else ''} in b: "
                  f"{', '.join(r['case'] for r in result.regressed)}")
        else:
            print(f"\nno case regressed by more than {a.fail_under:g}% beyond its noise, and none ok in a failed in b")
    return result.exit_code
