"""`bench sweep NAME`: a named sweep (or several sharing one run and noise floor), every case
stored, then the tables and REPORT.md."""
from __future__ import annotations

import contextlib
from pathlib import Path

from ..analysis import experiments, noise, targets
from ..core import models, recipes, sweeps
from ..core.case import Case
from ..core.errors import BenchError
from ..data.defaults import default_data_dir, default_data_short, ensure_default_data
from ..harness import env as envmod
from ..harness import launch
from ..harness.experiments import DEFAULT_BUDGET_S, MAX_ROUNDS, run_experiments
from ..harness.checks import resolve_gpus
from ..harness.prime import Prime
from ..harness.run import Run, run_cases
from ..present import answers_text, plan_table, report
from ..store import query
from ..store.tree import Store
from .flags import (
    add_dist_flags,
    add_noise_flags,
    add_results_flag,
    add_shared_flag,
    check_processes,
    dist_from_args,
    parse_budget,
    select_cases,
)

CPU_SWEEPS = ("smoke", "tiny")


def add(sub) -> None:
    s = sub.add_parser("sweep", help="run a named sweep, store every case, print the tables",
                       description="Run a named sweep. With no GPU visible, the CPU smoke sweep runs. Exit 0: "
                                   "the sweep ran (failed cases are stored with their reasons); 2: refused.")
    s.add_argument("name", nargs="?", default="default",
                   help=f"one of: default ({', '.join(sweeps.DEFAULT_GPU_SWEEPS)}), all, {', '.join(sweeps.SWEEPS)}; "
                        "several joined by commas share one run and its noise floor (amp,loaders)")
    s.add_argument("--gpus", type=int, default=None, help="most GPUs to use (default: all visible; CPU path if none)")
    s.add_argument("--data", default="", help="ImageFolder tree for the torch and dali loaders")
    s.add_argument("--model", default="", metavar="NAME",
                   help="train this model in every case instead of the sweep's own (ResNet-50 on a GPU): any "
                        "torchvision classification model (`bench models` lists them) or package.module:factory")
    s.add_argument("--resume", action="store_true", help="continue this commit's latest interrupted run of the sweep: skip the cases it stored as ok, "
                        "run the rest (failed, skipped or not reached)")
    s.add_argument("--only", default="", metavar="PATTERNS",
                   help="run only the cases whose id matches one of these comma-separated shell patterns")
    s.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="the language of the answers it ends on and of REPORT.md (zh: the article's own headings)")
    s.add_argument("--details", action="store_true",
                   help="also print this run's details (every table of its REPORT.md) above the answers")
    s.add_argument("--claims-budget", default="", metavar="DURATION",
                   help="time for the claims' experiments: pairs of cases differing only in a claim's knobs, their "
                        f"processes interleaved until each verdict is decided (default: {DEFAULT_BUDGET_S['cuda']:g}s on "
                        f"a GPU, {DEFAULT_BUDGET_S['cpu']:g}s on the CPU; 0 measures each case once, as listed)")
    s.add_argument("--dry-run", action="store_true", help="list the cases and what each sweep is expected to cost; run nothing")
    add_noise_flags(s, 3)
    add_shared_flag(s)
    add_results_flag(s)
    add_dist_flags(s)
    s.set_defaults(func=command)


def sweep_names(name: str) -> list[str]:
    """`default`, `all`, or sweeps joined by commas; an unknown one is refused with what is accepted."""
    names = {"default": list(sweeps.DEFAULT_GPU_SWEEPS), "all": list(sweeps.ALL_GPU_SWEEPS)}.get(name, name.split(","))
    if any(n not in sweeps.SWEEPS for n in names):
        raise BenchError(f"unknown sweep {name!r}; accepted: default, all, or one or more of "
                         f"{', '.join(sweeps.SWEEPS)} joined by commas")
    return names


def plan(a) -> tuple[list[tuple[str, list]], int, str, str]:
    """(sweep name and its validated cases, GPUs, device, data folder): the CPU sweep where no GPU is."""
    names = sweep_names(a.name)
    gpus, device = resolve_gpus(a.gpus)
    if device == "cpu" and a.dry_run and a.name not in CPU_SWEEPS:
        gpus, device = a.gpus or 1, "cuda"  # what the sweep would run on a GPU machine, listed here
        print(f"no GPU visible: listing sweep {a.name!r} as planned for {gpus} GPU(s)")
    elif device == "cpu":
        if a.name not in ("default", "all", *CPU_SWEEPS):
            raise BenchError(f"sweep {a.name!r} needs GPUs and none is visible; on the CPU run `smoke`")
        names = ["tiny"] if a.name == "tiny" else ["smoke"]
        print("no GPU visible: running the CPU sweep (tiny images, gloo ranks for ddp)")
    data_dir = a.data or (str(default_data_dir()) if any(n in sweeps.NEEDS_DATA for n in names) else "")
    overrides = {"data_dir": data_dir} if data_dir else {}
    if getattr(a, "model", ""):  # `bench ab` plans its sweep without the flag
        overrides.update(models.model_fields(a.model))
    plans = [(n, sweeps.build(n, gpus, device, **overrides)) for n in names]  # all validated first
    if device == "cpu":  # a sweep's GPU cases (tiny holds one, for the pytest front end) wait for a GPU
        left_out = sum(c.device == "cuda" for _, cs in plans for c in cs)
        plans = [(n, [c for c in cs if c.device == "cpu"]) for n, cs in plans]
        if left_out:
            print(f"{left_out} case(s) need a GPU and are left out here")
    if a.only:
        plans = select_cases(plans, a.only)
    return plans, gpus, device, data_dir


MEASURED_AS_SWEPT = ("warmup_steps", "steps", "min_window_s", "repeats", "timeout_s", "model", "model_source",
                     "model_path", "num_classes", "image_size", "data_dir")
"""What a recommend winner keeps from the sweep's own case: how it is measured, and the model the user asked
for (a stored case never names the code that runs)."""


def with_recommend_winners(plans: list[tuple[str, list[Case]]], stored: list) -> tuple[list, list[str]]:
    """The sweep with each `best-compiled` case replaced by this machine's own recommend winner for its GPU
    count and model, where one is stored (analysis/targets.recommend_winners); and a line for each."""
    winners, said = targets.recommend_winners(stored), []

    def swap(c: Case) -> Case:
        won = winners.get((c.gpus, c.model)) if c.name == "best-compiled" else None
        if not won:
            return c
        try:
            case = Case.from_dict(won["case"]).replace(name=recipes.RECOMMENDED,
                                                       **{k: getattr(c, k) for k in MEASURED_AS_SWEPT})
        except (BenchError, TypeError, ValueError):  # a winner of a case definition this code no longer takes
            return c
        said.append(f"{c.gpus} GPU(s): this machine's recommend winner (run {won['run']}, "
                    f"{won['images_per_s']:,.1f} images/s) replaces best-compiled")
        return case
    return [(n, [swap(c) for c in cs]) for n, cs in plans], said


def prepare(device: str, default_data: str, cases, reference: Case | None = None) -> None:
    """Make the default data folder where the cases need it and it is short. On a GPU machine the machine
    is primed beside that (harness/prime.py: imports, libraries, the reference case's first steps), which
    ends before anything is measured; with no data to make there is nothing to hide it behind, and a
    machine that made its data before has paid for those once already."""
    needed = sweeps.images_needed(cases)
    if not default_data or not default_data_short(Path(default_data), needed):
        return
    with Prime(reference) if device == "cuda" else contextlib.nullcontext() as prime:
        ensure_default_data(Path(default_data), needed)
        if prime and (line := prime.finish()):
            print(line)


def claims_budget(a, device: str) -> float:
    """Seconds for the claims' experiments: --claims-budget, else the device's default; 0 for none."""
    if not a.claims_budget:
        return DEFAULT_BUDGET_S[device]
    return parse_budget(a.claims_budget, "--claims-budget", zero_ok=True)


def command(a) -> int:
    check_processes(a)
    plans, gpus, device, data_dir = plan(a)
    budget = claims_budget(a, device)
    dist = dist_from_args(a)
    store = Store(a.results)
    if device == "cuda" or a.dry_run:  # this machine's stored results: its recommend winners, its cases' times
        machine = envmod.machine_slug(envmod.collect(software=False))
        folder = store.root / machine
        stored = query.load([folder])[0] if folder.is_dir() else []
    if device == "cuda":  # the fastest this machine knows: its own recommend winner, where it has one
        plans, said = with_recommend_winners(plans, stored)
        for line in said:
            print(line)
    if a.dry_run:
        found = experiments.find([c for _, cs in plans for c in cs]) if budget else []
        rounds = plan_table.ClaimRounds(len(found), frozenset(c.case_id for e in found for c in (e.before, e.after)),
                                        budget, MAX_ROUNDS)
        print(plan_table.render(plans, stored, machine, gpus, device, a.processes, a.floor_processes, rounds))
        return 0
    every = [c for _, cs in plans for c in cs]
    reference = recipes.noise_reference(device)
    run = Run(store, dist, a.processes, software_now=False, shared_gpu=a.shared_gpu)
    run.check(every)
    run.claim(every)  # the GPUs and this machine's lock before anything runs: the data and the priming would slow another run
    if a.floor_processes >= 2:  # the floor's first process imports while the data is made
        launch.start_ahead(reference, dist)
    prepare(device, data_dir if not a.data else "", every, reference)
    run.begin(every)
    made, measured = [], {}
    with run:
        run.measure_floor(reference, a.floor_processes, then=next((c for _, cs in plans for c in cs), None))
        found = experiments.find(every) if budget else []
        if found:  # the claims first: their cases are then stored, not run again, by their sweeps
            sweep_of = {c.case_id: n for n, cs in reversed(plans) for c in cs}
            measured.update(run_experiments(run, found, every, sweep_of, budget))
        for k, (name, cases) in enumerate(plans):
            following = next((c for _, cs in plans[k + 1:] for c in cs), reference)
            made += run_cases(run, cases, name, resume=a.resume, measured=measured, then=following)
        run.measure_floor(reference, a.floor_end_processes, at="end")
    print()
    if not made:
        return 0
    # this run's records as stored (so the report finds the run's manifest and noise floor beside them)
    machine = query.load([store.root / run.machine])[0]
    stored = query.select(machine, commit=run.commit)
    assumed = noise.assumed_noise(machine)  # what this machine has shown, over every stored run
    if a.details:
        print(report.render(query.select(stored, run=run.run_id) or [query.wrap(r) for r in made], a.lang,
                            assumed=assumed, answers_first=False))
    if stored:  # REPORT.md beside this commit's results, from everything stored for it
        folder = store.root / run.machine / run.commit
        # a file, not a terminal: every column, each figure beside its MFU and step time
        print(f"wrote {report.write_report(stored, folder, a.lang, wide=True, assumed=assumed)} (this run's every "
              "table, and its plots; --details prints them here)")
        for page in report.write_machine_pages(machine, store.root):
            print(f"wrote {page}")
    # the answers last, on screen when the run ends: this machine's for the model this run trained
    models = sorted({c.model for c in every})
    print("\n" + answers_text.machine_answers(run.machine, machine, models=models, lang=a.lang))
    return 0
