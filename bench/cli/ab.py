"""`bench ab A B`: two commits (or folders) measured side by side in one run, interleaved, judged by
paired differences; exit codes as `bench compare`."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis import compare
from ..core import sweeps
from ..core.errors import BenchError
from ..data.defaults import ensure_default_data
from ..harness import env as envmod
from ..harness import sides as sidesmod
from ..harness.ab import AbRun, Settings
from ..present import compare_text
from ..store.tree import Store
from . import sweep as sweepcmd
from .flags import add_results_flag, add_shared_flag, parse_budget


def add(sub) -> None:
    p = sub.add_parser("ab", help="measure two commits side by side in one run and judge the change",
                       description="Measure the cases of a sweep in two trees in one run: each side's worker runs from "
                                   "its own checkout (a git worktree of a commit, or a folder), with the same "
                                   "interpreter and data; processes alternate A, B, B, A, and each case's verdict comes "
                                   "from its paired differences pooled with the run's noise floor. Writes "
                                   "<results>/<machine>/comparisons/ab-<run>.json as it goes. Exit 0: no case slower; "
                                   "1: a case slower beyond its noise (by more than --fail-under), or ok in a and failed "
                                   "in b; 2: bad input, or nothing could be judged.")
    p.add_argument("a", help="the earlier side: a commit (id, branch, tag) or a folder with the suite checked out")
    p.add_argument("b", help="the later side, likewise (the same commit twice is an A/A)")
    p.add_argument("sweep", nargs="?", default=None,
                   help="the sweep whose cases are measured (default: amp; on a machine with no GPU, tiny)")
    p.add_argument("--only", default="", metavar="PATTERNS",
                   help="only the sweep's cases whose id matches one of these comma-separated shell patterns")
    p.add_argument("--threshold", type=float, default=3.0, metavar="PCT",
                   help="the smallest change to decide: pairs are added until each case's 95%% half-width is at "
                        "most half of it, within the budget (default 3)")
    p.add_argument("--budget", default="10m", help="time for the whole A/B, noise floor included: seconds, or with "
                                                   "s, m or h (default 10m)")
    p.add_argument("--pairs", type=int, default=None, metavar="K",
                   help="run exactly K pairs per case instead of choosing them from the noise (default: chosen)")
    p.add_argument("--floor-processes", type=int, default=3, metavar="N",
                   help="fresh processes of the noise-floor case, on side a, before the pairs (default 3; 0: none)")
    p.add_argument("--fail-under", type=float, default=0.0, metavar="PCT",
                   help="exit 1 only for cases slower by more than PCT percent beyond their noise (default 0)")
    p.add_argument("--a-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for side a's processes (repeatable; default none)")
    p.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for side b's processes, e.g. BENCH_INJECT_SLOWDOWN_PCT=3 (default none)")
    p.add_argument("--gpus", type=int, default=None, help="most GPUs to use (default: all visible)")
    p.add_argument("--data", default="", help="ImageFolder tree for the torch and dali loaders (default: generated)")
    p.add_argument("--json", default="", metavar="FILE", help="also write the comparison as JSON to FILE")
    p.add_argument("--wide", action="store_true", help="full case ids in the table, however wide it gets")
    add_shared_flag(p)
    add_results_flag(p)
    p.set_defaults(func=command)


def check(a) -> None:
    if a.threshold <= 0:
        raise BenchError(f"--threshold {a.threshold:g} must be a percentage above 0, e.g. 3")
    if a.pairs is not None and a.pairs < 1:
        raise BenchError(f"--pairs {a.pairs} must be 1 or more")
    if a.floor_processes == 1 or a.floor_processes < 0:
        raise BenchError(f"--floor-processes {a.floor_processes} must be 0 (none) or 2 or more")
    if a.fail_under < 0:
        raise BenchError(f"--fail-under {a.fail_under:g} must be 0 or more")


def command(a) -> int:
    check(a)
    budget = parse_budget(a.budget)
    a_env, b_env = sidesmod.parse_env(a.a_env, "--a-env"), sidesmod.parse_env(a.b_env, "--b-env")
    name = a.sweep or ("amp" if envmod.visible_gpu_count() else "tiny")
    plans, _, _, data_dir = sweepcmd.plan(argparse.Namespace(name=name, gpus=a.gpus, data=a.data, dry_run=False,
                                                            only=a.only))
    seen, cases = set(), []
    for sweep, cs in plans:
        for c in cs:
            if c.case_id not in seen:
                seen.add(c.case_id)
                cases.append((sweep, c))
    if not cases:
        raise BenchError(f"sweep {name!r} has no case to run here; pick one with a sweep name or --only")
    sides = [sidesmod.resolve("a", a.a, a_env), sidesmod.resolve("b", a.b, b_env)]
    if data_dir and not a.data:
        ensure_default_data(Path(data_dir), sweeps.images_needed([c for _, c in cases]))
    base = sidesmod.check_out(sides)
    try:
        run = AbRun((sides[0], sides[1]), cases, Store(a.results),
                    Settings(a.threshold, budget, a.pairs, a.floor_processes, a.fail_under, a.shared_gpu))
        result = run.execute()
    finally:
        sidesmod.remove(sides, base)
    print()
    print(compare_text.render(result, a.wide))
    print("\n".join(run.closing_lines()))
    print(f"wrote {run.path}")
    if a.json:
        doc = compare.to_json(result)
        compare.write_json(a.json, doc)
        print(f"wrote {a.json}")
    if result.regressed:
        print(f"\n{len(result.regressed)} case(s) slower in b beyond their noise"
              + (f" by more than {a.fail_under:g}%" if a.fail_under else "") + " or failed in b: "
              + ", ".join(r["case"] for r in result.regressed))
    elif not any(r["verdict"] in compare.JUDGED for r in result.rows):
        raise BenchError("nothing could be judged: no case has a pair measured on both sides with a noise to judge by")
    return result.exit_code
