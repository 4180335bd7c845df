"""`bench run`: one case from flags, in fresh processes, stored."""
from __future__ import annotations

from ..core import recipes, untrusted
from ..core.errors import FAILED, CaseError
from ..harness import env as envmod
from ..harness.run import Run, run_cases
from ..store.tree import Store
from .flags import add_case_flags, add_dist_flags, add_noise_flags, add_results_flag, add_shared_flag, \
    case_from_args, check_processes, dist_from_args


def add(sub) -> None:
    r = sub.add_parser("run", help="run one case from flags and store it",
                       description="Run one case in fresh processes and store its result. Exit 0: stored "
                                   "(ok or skipped); 1: the case failed (stored with its reason); 2: refused.")
    add_case_flags(r)
    add_dist_flags(r)
    r.add_argument("--sweep-name", default="run", help="results sub-folder (default: run)")
    add_noise_flags(r, 0)
    add_shared_flag(r)
    add_results_flag(r)
    r.set_defaults(func=command)


def command(a) -> int:
    if untrusted.path_part_problem(a.sweep_name, "--sweep-name") or untrusted.problem(a.sweep_name):
        raise CaseError(f"--sweep-name {a.sweep_name[:60]!r} must be one plain folder name (no '/', not starting "
                        "with '.', printable), e.g. my-run")
    case = case_from_args(a)
    dist = dist_from_args(a)
    check_processes(a)
    if case.device == "cuda" and not envmod.visible_gpu_count():
        raise CaseError("this machine shows no GPU; add --device cpu to run the case on the CPU "
                        "(gloo ranks for ddp, tiny images suit it: --image-size 32 --model resnet18)")
    run = Run(Store(a.results), dist, a.processes, shared_gpu=a.shared_gpu)
    reference = recipes.noise_reference(case.device)
    run.begin([case])
    with run:
        run.measure_floor(reference, a.floor_processes, then=case)
        stored = run_cases(run, [case], a.sweep_name, then=reference)
        run.measure_floor(reference, a.floor_end_processes, at="end")
    return 0 if stored and stored[0]["status"] in ("ok", "skipped") else FAILED
