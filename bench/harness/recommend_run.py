"""`bench recommend` as a run: the search (analysis/search.py) handed a way to measure and store
each candidate, the first starting set-up doubling as the noise floor, and a recipe per GPU count."""
from __future__ import annotations

import statistics

from ..analysis import plan, search
from ..core import models, recipes, sweeps
from ..core.case import Case
from ..core.errors import CaseError
from ..data.folder import check_size, scan
from ..store import query
from ..store.tree import Store
from . import env as envmod
from .checks import resolve_gpus
from .dist import DistArgs
from .run import Run, run_cases


def base_for(gpus: int | None, model: str = "") -> tuple[int, Case, str]:
    """(GPU count, base case, a line to print): the GPU base where GPUs are visible, else the CPU's
    small search base (ResNet-18, 32 px) on gloo ranks; training `model` where one is named (the
    search, its yardsticks and its recipes)."""
    fields = models.model_fields(model) if model else {}
    if envmod.visible_gpu_count():
        n, _ = resolve_gpus(gpus)
        return n, sweeps.with_model(recipes.GPU_BASE, **fields) if fields else recipes.GPU_BASE, ""
    n = gpus or 1
    if n < 1:
        raise CaseError(f"--gpus={n} must be a positive number of CPU ranks")
    base = sweeps.with_model(recipes.CPU_RECOMMEND_BASE, **fields) if fields else recipes.CPU_RECOMMEND_BASE
    return n, base, (f"no GPU visible: searching on the CPU ({base.model}, {base.image_size} px images, "
                     "gloo ranks for ddp)")


RECIPES_FOLDER = "recipes"


def recommend(store: Store, dist: DistArgs, gpus: int, base: Case, budget_s: float, data_dir: str,
              with_compile: bool, final_processes: int, floor_processes: int,
              write_recipe, confirm_processes: int = search.CONFIRM_PROCESSES,
              shared_gpu: bool = False) -> tuple[list[search.Outcome], dict]:
    """Search at 1, 2, 4 ... `gpus`, each count with its share of what is left of the budget; every
    candidate is stored; `write_recipe(case, record, folder)` writes a winner's script. Returns the
    outcomes and the scripts written: by GPU count, and by (GPU count, "jpeg") for the winner fed by JPEGs."""
    if data_dir:
        check_size(scan(data_dir), base.replace(loader="torch", data_dir=data_dir))
    counts = recipes.gpu_counts(gpus)
    run = Run(store, dist, shared_gpu=shared_gpu)
    run.begin([search.start_case(base, n) for n in counts])
    with run:
        machine_dir = store.root / run.machine
        stored = query.load([machine_dir])[0] if machine_dir.is_dir() else []
        reusable = {r.case_id: r.data for r in query.latest(query.select(stored, commit=run.commit, include_old=False))
                    if r.ok and not r.slowed_pct}

        def measure(case, processes, sweep):
            return run_cases(run, [case], sweep, processes=processes, header=False)[0]

        def adopt_floor(case, figures, reason):
            print(f"noise floor (run {run.run_id}): the first starting set-up in {floor_processes} fresh processes")
            run.adopt_floor(case, figures, reason)

        finder = search.Search(measure, budget_s, final_processes=final_processes, stored=reusable,
                               known_times=plan.per_process_times(stored), floor_processes=floor_processes,
                               on_floor=adopt_floor, confirm_processes=confirm_processes)
        print(f"recommend: {', '.join(map(str, counts))} {'GPU' if base.device == 'cuda' else 'CPU rank'}(s), budget "
              f"{budget_s / 60:.1f} min, run {run.run_id}; every candidate is stored")
        # the winners' scripts: the machine's latest, one per GPU count and input, not a copy per commit
        outcomes, written, folder = [], {}, store.root / run.machine / RECIPES_FOLDER
        for i, n in enumerate(counts):
            outcome = finder.run(base, n, data_dir, with_compile=with_compile, budget_share=1 / (len(counts) - i))
            outcomes.append(outcome)
            win = search.winner_record(outcome)
            # a script is written for single and ddp set-ups; an article's DataParallel yardstick that won
            # is reproduced by `bench run` (recommend_text says so)
            if search.figure(win) is not None and outcome.best.case.strategy != "dp":
                written[n] = write_recipe(outcome.best.case, win, folder)
            fed = outcome.fed_best
            if fed is not None and fed.case.strategy != "dp":
                written[(n, "jpeg")] = write_recipe(fed.case, fed.record, folder)
        # the manifest names the recipes inside the results tree, so it stays true wherever that tree is copied
        run.manifest["recommend"] = [summary(o, *(str(written[k].relative_to(store.root)) if k in written else None
                                                  for k in (o.gpus, (o.gpus, "jpeg")))) for o in outcomes]
    return outcomes, written


def summary(outcome: search.Outcome, recipe: str | None, jpeg_recipe: str | None = None) -> dict:
    """What the run's manifest keeps of one GPU count's search."""
    win = search.winner_record(outcome)
    return {"gpus": outcome.gpus, "seconds": round(outcome.seconds, 1),
            "best_case_id": outcome.best.case.case_id if outcome.best else None,
            "best_case": outcome.best.case.to_dict() if outcome.best else None,
            "best_images_per_s": search.figure(win), "best_images_per_s_ci95": (win or {}).get("metrics", {}).get("images_per_s_ci95"),
            "runner_up_case_id": outcome.runner_up.case.case_id if outcome.runner_up else None,
            "versus_runner_up": outcome.versus_runner_up,
            "baseline_images_per_s": search.figure(outcome.references.get("baseline")),
            "optimized_images_per_s": search.figure(outcome.references.get("optimized")),
            "fed": [{"case_id": c.case.case_id, "images_per_s": search.figure(c.record), "note": c.note}
                    for c in outcome.fed],
            "fed_best_case_id": outcome.fed_best.case.case_id if outcome.fed_best else None,
            "fed_best_images_per_s": search.figure(outcome.fed_best.record) if outcome.fed_best else None,
            "jpeg_recipe": jpeg_recipe,
            "candidates": [{"stage": c.stage, "case_id": c.case.case_id, "images_per_s": search.figure(c.record),
                            "processes": search.processes_of(c.record), "status": c.record["status"], "note": c.note,
                            **({"screening_images_per_s": search.figure(c.screening)} if c.screening else {})}
                           for c in outcome.candidates if c.record],
            "not_measured": outcome.skipped, "recipe": recipe,
            "median_process_s": statistics.median([plan.seconds_per_process(c.record) for c in outcome.candidates if c.record])
            if any(c.record for c in outcome.candidates) else None}
