"""`bench feed`: can this host feed N GPUs? R = 1, 2, 4 ... N whole input pipelines at once on this host,
no model, each in fresh processes, stored as the `feed` sweep and set against what one GPU consumes."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ..analysis import feed
from ..core import models, recipes
from ..core.errors import CaseError
from ..core.feed_cases import (DEFAULT_FEED_LOADERS, FEED_PROCESSES, FEED_WINDOW_S, FEED_WINDOWS, feed_sweep,
                               parse_loaders, rank_counts)
from ..core.software import DALI_INSTALL
from ..core.sweeps import images_needed
from ..data.defaults import default_data_dir, ensure_default_data
from ..data.folder import scan
from ..harness import env as envmod
from ..harness.run import Run, run_cases
from ..present import feed_text, report
from ..store import query
from ..store.tree import DEFAULT_ROOT, Store
from .flags import add_dist_flags, add_results_flag, check_processes, dist_from_args


def add(sub) -> None:
    f = sub.add_parser("feed", help="can this host feed N GPUs? each loader's input side at 1, 2, 4 ... N ranks",
                       description="Measure how many images/s this host's input pipelines deliver with R = 1, 2, 4 "
                                   "... N loader ranks at once (no model runs), and how many GPUs of a kind that "
                                   "feeds at full speed. Exit 0: stored; 2: refused.")
    f.add_argument("--gpus", type=int, default=None, metavar="N",
                   help="the most ranks to try (default: the GPUs this machine shows, at least 1)")
    f.add_argument("--data", default="", help="ImageFolder tree of JPEGs (default: the generated set, made if short)")
    f.add_argument("--model", default="resnet50", help="the model whose one-GPU pace is to be fed (default resnet50)")
    f.add_argument("--loaders", default="", help="comma-separated, from torch, dali-cpu, dali-mixed (default: each "
                                                 "one installed here; dali-mixed needs a GPU per rank, so it stops "
                                                 "at the GPUs present)")
    f.add_argument("--cold", action="store_true", help="also measure with the data set's files dropped from the page "
                                                       "cache before each window, so reads come from storage")
    f.add_argument("--per-gpu", type=float, default=None, metavar="IMAGES_PER_S",
                   help="what one GPU consumes (default: the fastest stored one-GPU figure of the model on "
                        "--gpu-model)")
    f.add_argument("--gpu-model", default="", help="the GPU model to feed (default: this machine's)")
    f.add_argument("--batch-size", type=int, default=recipes.GPU_BASE.batch_size, help="images per rank and batch")
    f.add_argument("--image-size", type=int, default=None, help="pixels a side (default: the model's)")
    f.add_argument("--window-s", type=float, default=FEED_WINDOW_S, help="each measured window's least seconds")
    f.add_argument("--windows", type=int, default=FEED_WINDOWS, help="measured windows per process")
    f.add_argument("--lang", choices=("en", "zh"), default="en", help="the language of its page and REPORT.md")
    f.add_argument("--resume", action="store_true",
                   help="continue this commit's latest interrupted feed run: skip the rungs it stored as ok, run the "
                        "rest; the ladder is judged as one")
    f.add_argument("--processes", type=int, default=FEED_PROCESSES, metavar="K",
                   help=f"fresh processes per rung, whose spread is its interval (default {FEED_PROCESSES})")
    add_dist_flags(f)
    add_results_flag(f)
    f.set_defaults(func=command, floor_processes=0, floor_end_processes=0)


def dali_installed() -> bool:
    return importlib.util.find_spec("nvidia") is not None and importlib.util.find_spec("nvidia.dali") is not None


def loaders(a, gpus_present: int) -> tuple[str, ...]:
    """The loaders asked for (refused where one cannot run here), or the default ones this host has."""
    if a.loaders:
        names = parse_loaders(a.loaders)
        if any(n.startswith("dali") for n in names) and not dali_installed():
            raise CaseError(f"--loaders {a.loaders}: nvidia-dali is not installed; {DALI_INSTALL}, or leave DALI out")
        if "dali-mixed" in names and not gpus_present:
            raise CaseError("--loaders dali-mixed decodes on a GPU and this machine shows none; use torch or dali-cpu")
        return names
    if not dali_installed():
        print(f"nvidia-dali is not installed: the torch loader alone ({DALI_INSTALL} adds DALI's pipelines)")
        return ("torch",)
    return DEFAULT_FEED_LOADERS + (("dali-mixed",) if gpus_present else ())


def check(a) -> None:
    if a.per_gpu is not None and not a.per_gpu > 0:
        raise CaseError(f"--per-gpu={a.per_gpu} must be a positive images/s figure")
    if a.window_s <= 0 or a.windows < 2:
        raise CaseError(f"--window-s={a.window_s} --windows={a.windows}: need seconds > 0 and at least 2 windows")
    check_processes(a)


def command(a) -> int:
    check(a)
    gpus_present = envmod.visible_gpu_count()
    n = a.gpus if a.gpus is not None else max(1, gpus_present)
    rank_counts(n)  # N below 1 is refused before anything else
    names = loaders(a, gpus_present)
    fields = models.model_fields(a.model)
    base = recipes.GPU_BASE.replace(device="cpu", batch_size=a.batch_size, min_window_s=a.window_s, steps=2,
                                    repeats=a.windows, warmup_steps=2, **fields,
                                    **({"image_size": a.image_size} if a.image_size else {}))
    if a.data:
        scan(a.data)  # a missing or empty folder is refused here, before any work
    cases = feed_sweep(n, names, a.cold, base.replace(data_dir=a.data or str(default_data_dir())), gpus_present)
    env = envmod.collect(software=False)
    gpu = a.gpu_model or env.get("gpu_model") or ""
    store = Store(a.results)
    per_gpu, source = pace(a, gpu, store.root)
    if not a.data:
        ensure_default_data(default_data_dir(), images_needed(cases))
    run = Run(store, dist_from_args(a), a.processes)
    run.check(cases)
    run.claim(cases)
    # what the ladder is judged by, kept with the run: the machine's answers read it again later
    run.manifest["feed_pace"] = {"gpu": gpu, "model": a.model, "images_per_s": per_gpu,
                                 "source": source.path if source else "--per-gpu" if per_gpu else None}
    run.begin(cases)
    with run:
        run_cases(run, cases, feed.FEED_SWEEP, resume=a.resume)
    stored = query.load([store.root / run.machine])[0]
    runs = {run.run_id, *run.manifest.get("resumed_runs", [])}  # a resumed run's rungs are this ladder's too
    ids = {c.case_id for c in cases}
    page = feed_text.render(a.lang, feed.ladders([r for r in stored if r.run_id in runs and r.case_id in ids], per_gpu),
                            n, gpu or "GPU", a.model, per_gpu, source)
    folder = store.root / run.machine / run.commit
    print(f"\nwrote {report.write_report(query.select(stored, commit=run.commit), folder, a.lang, wide=True)}")
    for written in report.write_machine_pages(stored, store.root):
        print(f"wrote {written}")
    print("\n" + page)
    return 0


def pace(a, gpu: str, root: Path) -> tuple[float | None, query.Record | None]:
    """What one GPU consumes: --per-gpu, else the fastest one-GPU figure of the model stored for the GPU
    model on any machine of this results tree or of this checkout's (None where there is none)."""
    if a.per_gpu is not None or not gpu:
        return a.per_gpu, None
    roots = {Path(r).resolve() for r in (root, DEFAULT_ROOT) if Path(r).is_dir()}
    folders = [p for r in sorted(roots) for p in r.iterdir() if p.is_dir()]
    found = feed.per_gpu_figure(query.load(folders)[0], gpu, a.model)
    return found if found else (None, None)
