"""`bench recommend`: the fastest configuration here, searched within a budget, written as a script."""
from __future__ import annotations

from ..analysis import search
from ..core.errors import FAILED, CaseError
from ..harness.recommend_run import base_for, recommend
from ..present import recipe, recommend_text
from ..store.tree import Store
from .flags import add_dist_flags, add_results_flag, add_shared_flag, check_floor_count, dist_from_args, parse_budget
from .reading import shown


def add(sub) -> None:
    rc = sub.add_parser("recommend", help="search the fastest configuration here within a budget; write its recipe",
                        description="Measure candidate configurations one knob at a time, keep what is faster "
                                    "beyond noise, re-measure the finalists, and write the winner as a script. "
                                    "Exit 0: an answer for every GPU count (a script for single and ddp "
                                    "ones); 1: some count found none; 2: refused.")
    rc.add_argument("--gpus", type=int, default=None,
                    help="most GPUs (1, 2, 4, ... up to it are searched; default: all visible; CPU ranks if none)")
    rc.add_argument("--model", default="", metavar="NAME",
                    help="search for this model instead of ResNet-50 (ResNet-18 on the CPU): any torchvision "
                         "classification model (`bench models` lists them) or package.module:factory")
    rc.add_argument("--budget", default="10m", help="time for the whole search: seconds, or with s, m or h (default 10m)")
    rc.add_argument("--data", default="", help="ImageFolder tree: also search the winner fed by JPEGs (DALI and its "
                                               "knobs, the torch DataLoader) and write its recipe_<N>gpu_jpeg.py")
    rc.add_argument("--no-compile", action="store_true", help="leave torch.compile out (each compiled candidate "
                                                               "compiles for about a minute)")
    rc.add_argument("--final-processes", type=int, default=search.FINAL_PROCESSES, metavar="K",
                    help="fresh processes for each of the best two at the end (default %(default)s)")
    rc.add_argument("--confirm-processes", type=int, default=search.CONFIRM_PROCESSES, metavar="K",
                    help="fresh processes for a candidate that looks faster but is within noise, and for the best "
                         "it is judged against where that has fewer (default %(default)s; 0 = none)")
    # one process carries the floor's t(N-1) alone: on one H200 a floor sd of 1.27% over 3 processes gave
    # each candidate +-5.5%, and a 5.6% gain (batch 512) stayed within noise; over 5, t falls from 4.30 to 2.78
    rc.add_argument("--floor-processes", type=int, default=5, metavar="N",
                    help="fresh processes of the first starting set-up, whose spread is the run's noise floor "
                         "(default 5; 0 = none)")
    add_shared_flag(rc)
    add_results_flag(rc)
    add_dist_flags(rc)
    rc.set_defaults(func=command)


def command(a) -> int:
    budget = parse_budget(a.budget)
    if a.final_processes < 0:
        raise CaseError(f"--final-processes={a.final_processes} must be 0 (none) or more")
    check_floor_count("--confirm-processes", a.confirm_processes)
    check_floor_count("--floor-processes", a.floor_processes)
    gpus, base, note = base_for(a.gpus, a.model)
    if note:
        print(note)

    def write_recipe(case, record, folder):
        return recipe.write(case, record, search.describe_case(case), folder)

    outcomes, recipes = recommend(Store(a.results), dist_from_args(a), gpus, base, budget, a.data,
                                  not a.no_compile, a.final_processes, a.floor_processes, write_recipe,
                                  confirm_processes=a.confirm_processes, shared_gpu=a.shared_gpu)
    print()
    print(recommend_text.render(outcomes, budget, {k: shown(p) for k, p in recipes.items()}))
    # answered at every count (a DataParallel yardstick that won has no script, yet is an answer)
    return 0 if outcomes and all(search.figure(search.winner_record(o)) is not None for o in outcomes) else FAILED
