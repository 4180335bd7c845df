"""`python -m bench run|sweep|report|env|data`: every input checked before any work starts."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from . import env as envmod
from . import query, recommend, results, sweeps
from .case import Case, CaseError
from .launch import DistArgs

TEST_ONLY = {"fault", "fault_rank"}


def _field_doc(name: str) -> str:
    # the docstring under each Case field is its help text
    import ast
    import inspect

    from . import case as case_module
    tree = ast.parse(inspect.getsource(case_module.Case))
    body = tree.body[0].body
    for stmt, nxt in zip(body, body[1:]):
        if isinstance(stmt, ast.AnnAssign) and getattr(stmt.target, "id", None) == name and \
                isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant):
            return nxt.value.value
    return ""


def add_case_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("case (defaults: one H200-style case; see bench/case.py)")
    for f in dataclasses.fields(Case):
        flag = "--" + f.name.replace("_", "-")
        help_text = argparse.SUPPRESS if f.name in TEST_ONLY else _field_doc(f.name)
        if f.type == "bool":
            g.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif f.name == "nccl_env":
            g.add_argument(flag, action="append", metavar="NCCL_NAME=VALUE", default=None, help=help_text)
        else:
            kind = {"int": int, "float": float}.get(f.type, str)
            g.add_argument(flag, type=kind, default=None,
                           help=help_text if f.name in TEST_ONLY else help_text + f" (default {f.default!r})")


def case_from_args(a: argparse.Namespace, base: Case = Case()) -> Case:
    changes = {}
    for f in dataclasses.fields(Case):
        v = getattr(a, f.name, None)
        if v is None:
            continue
        if f.name == "nccl_env":
            pairs = []
            for item in v:
                if "=" not in item:
                    raise CaseError(f"--nccl-env {item!r} must look like NCCL_NAME=VALUE")
                pairs.append(tuple(item.split("=", 1)))
            v = tuple(pairs)
        changes[f.name] = v
    return base.replace(**changes)


def add_dist_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("multi-node (passed to torchrun for ddp cases)")
    g.add_argument("--nnodes", type=int, default=1)
    g.add_argument("--node-rank", type=int, default=0)
    g.add_argument("--rdzv-endpoint", default="", help="HOST:PORT of torchrun's c10d rendezvous")
    g.add_argument("--master-addr", default="", help="static rendezvous address (with --master-port)")
    g.add_argument("--master-port", type=int, default=0)


def dist_from_args(a) -> DistArgs:
    if a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        raise CaseError(f"--nnodes={a.nnodes} --node-rank={a.node_rank}: need nnodes >= 1 and 0 <= node-rank < nnodes")
    if a.nnodes > 1 and not (a.rdzv_endpoint or a.master_addr):
        raise CaseError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT or --master-addr/--master-port")
    return DistArgs(a.nnodes, a.node_rank, a.rdzv_endpoint, a.master_addr, a.master_port)


def resolve_gpus(requested: int | None) -> tuple[int, str]:
    """(GPUs to use, device). No request: every visible GPU, or the CPU path where there is none."""
    visible = envmod.visible_gpu_count()
    if requested is None or requested == 0:
        return (visible, "cuda") if visible else (2, "cpu")
    if requested < 0:
        raise CaseError(f"--gpus={requested} must be a positive number of GPUs")
    if requested > visible:
        raise SystemExit(f"error: --gpus={requested} asked, but this machine has {visible} visible GPU(s); "
                         f"ask for at most {visible}" + ("" if visible else " (or leave GPUS unset for the CPU sweep)"))
    return requested, "cuda"


def cmd_run(a) -> int:
    from .runner import Run, run_cases
    case = case_from_args(a)
    dist = dist_from_args(a)
    check_processes(a)
    if case.device == "cuda" and not envmod.visible_gpu_count():
        raise CaseError("this machine shows no GPU; add --device cpu to run the case on the CPU "
                        "(gloo ranks for ddp, tiny images suit it: --image-size 32 --model resnet18)")
    run = Run(results.Store(a.results), dist, a.processes)
    reference = sweeps.noise_reference(case.device)
    run.begin([case])
    try:
        run.measure_floor(reference, a.floor_processes)
        records = run_cases([case], a.sweep_name, run.store, dist, run=run)
        run.measure_floor(reference, a.floor_end_processes, at="end")
    except KeyboardInterrupt:
        run.finish(interrupted=True)
        raise
    run.finish()
    return 0 if records and records[0]["status"] in ("ok", "skipped") else 1


def check_processes(a) -> None:
    if a.processes < 1:
        raise CaseError(f"--processes={a.processes} must be >= 1 (fresh processes per case)")
    check_floor_count("--floor-processes", a.floor_processes)
    check_floor_count("--floor-end-processes", a.floor_end_processes)


def check_floor_count(flag: str, n: int) -> None:
    """A noise floor is a spread: none, or at least two fresh processes."""
    if n == 1 or n < 0:
        raise CaseError(f"{flag}={n} must be 0 (none) or >= 2")


def add_noise_flags(p: argparse.ArgumentParser, floor_default: int) -> None:
    g = p.add_argument_group("noise (README: How it judges)")
    g.add_argument("--processes", type=int, default=1, metavar="K",
                   help="fresh processes per case; the figure is their median (default 1)")
    g.add_argument("--floor-processes", type=int, default=floor_default, metavar="N",
                   help="fresh processes of the reference case that measure this run's noise floor at its "
                        f"start; 0 = none (default {floor_default})")
    g.add_argument("--floor-end-processes", type=int, default=min(floor_default, 2), metavar="M",
                   help="more of them at the run's end, a check that the machine did not drift; 0 = none "
                        f"(default {min(floor_default, 2)})")


def cmd_sweep(a) -> int:
    from . import report
    from .runner import run_cases
    gpus, device = resolve_gpus(a.gpus)
    check_processes(a)
    names = {"default": list(sweeps.DEFAULT_GPU_SWEEPS), "all": list(sweeps.ALL_GPU_SWEEPS)}.get(a.name, a.name.split(","))
    if device == "cpu" and a.dry_run and a.name not in ("smoke", "tiny"):
        gpus, device = a.gpus or 1, "cuda"  # what the sweep would run on a GPU machine, listed here
        print(f"no GPU visible: listing sweep {a.name!r} as planned for {gpus} GPU(s)")
    elif device == "cpu":
        if a.name not in ("default", "all", "smoke", "tiny"):
            raise SystemExit(f"error: sweep {a.name!r} needs GPUs and none is visible; on the CPU run `smoke`")
        names = ["tiny"] if a.name == "tiny" else ["smoke"]
        print("no GPU visible: running the CPU sweep (tiny images, gloo ranks for ddp)")
    data_dir = a.data or (str(default_data_dir()) if any(n in sweeps.NEEDS_DATA for n in names) else "")
    overrides = {"data_dir": data_dir} if data_dir else {}
    plans = [(n, sweeps.build(n, gpus, device, **overrides)) for n in names]  # all validated first
    if device == "cpu":  # a sweep's GPU cases (tiny holds one, for the pytest front end) wait for a GPU
        left_out = sum(c.device == "cuda" for _, cs in plans for c in cs)
        plans = [(n, [c for c in cs if c.device == "cpu"]) for n, cs in plans]
        if left_out:
            print(f"{left_out} case(s) need a GPU and are left out here")
    if a.only:
        plans = select_cases(plans, a.only)
    dist = dist_from_args(a)
    store = results.Store(a.results)
    if a.dry_run:
        from . import plan
        print(plan.render(plans, store, gpus, device, a.processes, a.floor_processes))
        return 0
    if data_dir and not a.data:
        ensure_default_data(Path(data_dir), sweeps.images_needed([c for _, cs in plans for c in cs]))
    from .runner import Run
    run = Run(store, dist, a.processes)
    all_records, measured = [], {}
    reference = sweeps.noise_reference(device)
    run.begin([c for _, cs in plans for c in cs])
    try:
        run.measure_floor(reference, a.floor_processes)
        for name, cases in plans:
            all_records += run_cases(cases, name, store, dist, resume=a.resume, measured=measured, run=run)
        run.measure_floor(reference, a.floor_end_processes, at="end")
    except KeyboardInterrupt:
        run.finish(interrupted=True)
        raise
    run.finish()
    print()
    if not all_records:
        return 0
    # this run's records as stored (so the report finds the run's manifest and noise floor beside them)
    folder = store.root / run.machine / run.commit
    stored = query.load([folder])[0] if folder.is_dir() else []
    print(report.render(query.select(stored, run=run.run_id) or [query.wrap(r) for r in all_records], a.lang))
    if stored:  # REPORT.md beside this commit's results, from everything stored for it
        print(f"\nwrote {report.write_report(stored, folder, a.lang)} (and its plots)")
    return 0


def select_cases(plans: list[tuple[str, list[Case]]], only: str) -> list[tuple[str, list[Case]]]:
    """Keep the cases whose id matches one of the comma-separated shell patterns (re-run one case,
    or split a long sweep); a pattern that matches nothing is an error before anything runs."""
    import fnmatch
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    kept = [(n, [c for c in cs if any(fnmatch.fnmatchcase(c.case_id, p) for p in patterns)]) for n, cs in plans]
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c.case_id, p) for _, cs in plans for c in cs)]
    if unmatched:
        ids = [c.case_id for _, cs in plans for c in cs]
        raise SystemExit(f"error: --only {', '.join(unmatched)} matches no case id of this sweep; "
                         f"ids look like {ids[0] if ids else '(none)'} (shell patterns, e.g. 'ddp-*-g2-*')")
    return [(n, cs) for n, cs in kept if cs]


def default_data_dir() -> Path:
    """Generated JPEGs live outside the repository, made once and reused."""
    import os
    return Path(os.environ.get("BENCH_DATA_CACHE", Path.home() / ".cache" / "gpu-bench")) / "imagenet-like"


DEFAULT_CLASSES = 100


def ensure_default_data(folder: Path, needed: int) -> None:
    from .data import make_dataset
    have = len(list(folder.glob("class_*/*.jpg"))) if folder.is_dir() else 0
    want = max(needed, 2 * DEFAULT_CLASSES)
    if have < want:
        print(f"making {want} ImageNet-like JPEGs in {folder} (once; later runs reuse them)")
        make_dataset(folder, want, DEFAULT_CLASSES)


def cmd_data(a) -> int:
    from . import data
    try:
        if a.action == "make":
            data.make_dataset(Path(a.out), a.images, a.classes, a.seed, a.workers)
        else:
            folder = data.scan(a.dir)
            print(f"{folder.root}: {folder.count} JPEGs in {len(folder.classes)} classes"
                  + (f"; {len(folder.skipped)} non-JPEG or truncated file(s) skipped" if folder.skipped else ""))
    except data.DataError as e:
        raise SystemExit(f"error: {e}")
    return 0


def _shown(path: Path) -> str:
    """A written file as the user can open it from here: relative to the current folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _load(paths) -> list[query.Record]:
    records, problems = query.load(paths)
    results.warn_problems(problems)
    return records


def _select(a, records: list[query.Record]) -> list[query.Record]:
    """--machine, --commit and --run narrow what a reading command sees."""
    return query.select(records, machine=a.machine or None, commit=a.commit or None, run=a.run or None)


def cmd_report(a) -> int:
    from . import report
    paths = a.paths or [a.results]
    records = _select(a, _load(paths))
    print(report.render(records, a.lang, wide=a.wide))
    if records and not a.no_files:
        out = Path(a.out) if a.out else (Path(paths[0]) if len(paths) == 1 and Path(paths[0]).is_dir() else Path(a.results))
        print(f"\nwrote {report.write_report(records, out, a.lang, a.wide)} (and its plots)")
    if a.csv:
        latest = query.dicts(query.latest(records))
        Path(a.csv).parent.mkdir(parents=True, exist_ok=True)
        report.seed_frame(latest, a.lang).to_csv(a.csv, index=False)
        report.full_frame(latest).to_csv(Path(a.csv).with_suffix(".cases.csv"), index=False)
        print(f"\nCSV written: {a.csv} and {Path(a.csv).with_suffix('.cases.csv')}")
    return 0


def cmd_compare(a) -> int:
    """Exit 0: no regression; 1: a regression (with --fail-under); 2: bad input or nothing in common."""
    from . import compare
    records = _load([a.results])
    try:
        a_label, a_recs = compare.resolve(a.a, records, a.machine or None)
        b_label, b_recs = compare.resolve(a.b, records, a.machine or None)
        if a.only:  # the cases whose id matches one of the comma-separated shell patterns
            import fnmatch
            patterns = [p.strip() for p in a.only.split(",") if p.strip()]
            a_recs, b_recs = ([r for r in recs if any(fnmatch.fnmatchcase(r.case_id, p) for p in patterns)]
                              for recs in (a_recs, b_recs))
        rows = compare.compare(a_recs, b_recs, force=a.force, include_old=a.include_old)
    except compare.CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    kind = compare.kind(a_recs, b_recs)
    print(compare.render(rows, a_label, b_label))
    print(f"kind: {kind}; each verdict weighs the change against both sides' 95% intervals")
    if a.json:
        compare.write_json(a.json, compare.to_json(rows, a_label, b_label, kind, a.results))
        print(f"wrote {a.json}")
    if a.fail_under is not None:
        bad = compare.regressions(rows, a.fail_under)
        if bad:
            print(f"\n{len(bad)} case(s) regressed: slower by more than {a.fail_under:g}% beyond their noise, "
                  f"or ok in a but failed or missing in b: {', '.join(r['case'] for r in bad)}")
            return 1
        print(f"\nno case regressed by more than {a.fail_under:g}% beyond its noise, and none ok in a is lost in b")
    return 0


def cmd_history(a) -> int:
    from tabulate import tabulate

    from . import compare
    from .report import describe
    records = [r for r in _load([a.results]) if r.case_id.startswith(a.case)]
    if not records:
        raise SystemExit(f"error: no stored result has a case id starting with {a.case!r}")
    for case_id, recs in query.group(records, "case_id").items():
        print(f"{case_id[0]}\n  {describe(recs[0].data['case'])}")
        print(tabulate(compare.history(case_id[0], recs), headers=["started", "commit", "run", "machine", "sweep",
                       "status", "images/s", "95% interval"], tablefmt="github", disable_numparse=True) + "\n")
    return 0


def cmd_claims(a) -> int:
    """Per machine, the claims judged on one commit's latest runs (the newest commit unless --commit)."""
    from tabulate import tabulate

    from . import claims, report
    records = _select(a, _load(a.paths or [a.results]))
    if not records:
        raise SystemExit("error: no stored results match")
    for machine, recs in query.group(records, "machine").items():
        newest = max(recs, key=lambda r: r.started_at).commit
        chosen = [r for r in recs if r.commit == newest]
        print(f"## {machine[0]}, commit {newest}\n" + "\n".join(report.runs_used_lines(query.latest(chosen))) + "\n")
        evals = claims.evaluations(chosen, a.include_old)
        print(tabulate(claims.table(chosen, evals=evals), headers=claims.HEADERS, tablefmt="github",
                       disable_numparse=True))
        files = claims.files_compared(evals, str(Path(a.results).resolve()))
        if files:
            print("\nfiles compared:\n" + "\n".join(f"- {ln}" for ln in files))
        print()
    return 0


def cmd_recommend(a) -> int:
    """Search the fastest configuration at each GPU count within a budget; write its recipe."""
    from . import plan, recipe
    from .runner import Run, run_cases
    budget = recommend.parse_budget(a.budget)
    if a.final_processes < 0:
        raise CaseError(f"--final-processes={a.final_processes} must be 0 (none) or more")
    check_floor_count("--floor-processes", a.floor_processes)
    if envmod.visible_gpu_count():
        gpus, device = resolve_gpus(a.gpus)
        base = sweeps.GPU_BASE
    else:
        gpus, device = a.gpus or 1, "cpu"
        if gpus < 1:
            raise CaseError(f"--gpus={gpus} must be a positive number of CPU ranks")
        base = sweeps.CPU_RECOMMEND_BASE
        print(f"no GPU visible: searching on the CPU ({base.model}, {base.image_size} px images, gloo ranks for ddp)")
    if a.data:
        from .data import DataError, check_size, scan
        try:
            check_size(scan(a.data), base.replace(loader="torch", data_dir=a.data))
        except DataError as e:
            raise SystemExit(f"error: {e}")
    counts = sweeps.gpu_counts(gpus)
    dist = dist_from_args(a)
    store = results.Store(a.results)
    run = Run(store, dist)
    starts = [recommend.start_case(base, n) for n in counts]
    run.begin(starts)
    machine_dir = store.root / run.machine
    stored = _load([machine_dir]) if machine_dir.is_dir() else []
    reusable = {r.case_id: r.data for r in query.latest(query.select(stored, commit=run.commit, include_old=False))
                if r.ok and not r.data.get("injected_slowdown_pct")}

    def measure(case, processes, sweep):
        return run_cases([case], sweep, store, dist, run=run, processes=processes, header=False)[0]

    def adopt_floor(case, figures, reason):
        print(f"noise floor (run {run.run_id}): the first starting set-up in {a.floor_processes} fresh processes")
        run.adopt_floor(case, figures, reason)

    search = recommend.Search(measure, budget, final_processes=a.final_processes, stored=reusable,
                              known_times=plan.per_process_times(stored), floor_processes=a.floor_processes,
                              on_floor=adopt_floor)
    outcomes, recipes = [], {}
    print(f"recommend: {', '.join(map(str, counts))} {'GPU' if device == 'cuda' else 'CPU rank'}(s), budget "
          f"{budget / 60:.1f} min, run {run.run_id}; every candidate is stored")
    try:
        for i, n in enumerate(counts):
            outcome = search.run(base, n, a.data, with_compile=not a.no_compile, budget_share=1 / (len(counts) - i))
            outcomes.append(outcome)
            win = recommend.winner_record(outcome)
            if recommend.figure(win) is not None:
                path = recipe.write(outcome.best.case, win, recommend.describe_case(outcome.best.case),
                                    store.root / run.machine / run.commit / recommend.SWEEP)
                recipes[n] = path
        # the manifest names the recipe inside the results tree, so it stays true wherever that tree is copied
        run.manifest["recommend"] = [recommend.summary(o, str(recipes[o.gpus].relative_to(store.root))
                                                       if o.gpus in recipes else None) for o in outcomes]
    except KeyboardInterrupt:
        run.finish(interrupted=True)
        raise
    run.finish()
    print()
    print(recommend.render(outcomes, budget, {n: _shown(p) for n, p in recipes.items()}))
    return 0 if outcomes and all(o.gpus in recipes for o in outcomes) else 1


def cmd_env(a) -> int:
    env = envmod.collect()
    if a.json:
        print(json.dumps(env, indent=1, default=str))
        return 0
    print(envmod.describe(env))
    return 0


def add_selection_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("which results (default: the latest run of each case)")
    g.add_argument("--machine", default="", help="only this machine folder, e.g. 1x-nvidia-h200")
    g.add_argument("--commit", default="", help="only this exact tree: a commit id or prefix; -dirty names a dirty one")
    g.add_argument("--run", default="", help="only this run id (see `history` or the report's 'runs used' line)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description="Multi-GPU ResNet-50 training benchmark.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run one case from flags and store it",
                       description="Run one case in fresh processes and store its result.")
    add_case_flags(r)
    add_dist_flags(r)
    r.add_argument("--sweep-name", default="run", help="results sub-folder (default: run)")
    add_noise_flags(r, 0)
    r.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("sweep", help="run a named sweep, store every case, print the tables",
                       description="Run a named sweep. With no GPU visible, the CPU smoke sweep runs.")
    s.add_argument("name", nargs="?", default="default",
                   help=f"one of: default ({', '.join(sweeps.DEFAULT_GPU_SWEEPS)}), all, {', '.join(sweeps.SWEEPS)}; "
                        "several joined by commas share one run and its noise floor (amp,loaders)")
    s.add_argument("--gpus", type=int, default=None, help="most GPUs to use (default: all visible; CPU path if none)")
    s.add_argument("--data", default="", help="ImageFolder tree for the torch and dali loaders")
    s.add_argument("--resume", action="store_true", help="skip cases stored as ok for this commit; run failed or skipped ones again")
    s.add_argument("--only", default="", metavar="PATTERNS",
                   help="run only the cases whose id matches one of these comma-separated shell patterns")
    s.add_argument("--lang", choices=("en", "zh"), default="en", help="headings of the seed table")
    s.add_argument("--dry-run", action="store_true", help="list the cases and what each sweep is expected to cost; run nothing")
    add_noise_flags(s, 3)
    s.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    add_dist_flags(s)
    s.set_defaults(func=cmd_sweep)

    rep = sub.add_parser("report", help="tables from stored results",
                         description="Render tables from stored results only (markdown; CSV with --csv).")
    rep.add_argument("paths", nargs="*", help="result files or folders (default: the results root)")
    rep.add_argument("--lang", choices=("en", "zh"), default="en",
                     help="seed-table headings: en, or zh for the article's own")
    rep.add_argument("--csv", default="", help="also write the seed table here as CSV (and .cases.csv)")
    rep.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    rep.add_argument("--out", default="", help="folder for REPORT.md and plots/ (default: the folder read)")
    rep.add_argument("--no-files", action="store_true", help="print only; write no REPORT.md or plots")
    rep.add_argument("--wide", action="store_true", help="also every column of every case (wider than a terminal)")
    add_selection_flags(rep)
    rep.set_defaults(func=cmd_report)

    d = sub.add_parser("data", help="make an ImageNet-like JPEG folder, or check one",
                       description="Make an ImageNet-like JPEG ImageFolder tree, or check a folder before use.")
    dsub = d.add_subparsers(dest="action", required=True)
    mk = dsub.add_parser("make", help="write N JPEGs in C class folders (deterministic, resumable)")
    mk.add_argument("--images", type=int, required=True, help="how many JPEGs")
    mk.add_argument("--classes", type=int, default=None,
                    help="class folders (default: about ten images each, at most 100)")
    mk.add_argument("--out", required=True)
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--workers", type=int, default=None, help="processes (default: every core)")
    ck = dsub.add_parser("check", help="count the usable JPEGs of an ImageFolder tree")
    ck.add_argument("dir")
    d.set_defaults(func=cmd_data)

    c = sub.add_parser("compare", help="images/s of the same cases in two commits or result folders",
                       description="Compare stored throughput between two commits (ids or prefixes) or result folders.")
    c.add_argument("a", help="the earlier side: a run id, a commit (exact tree; name -dirty to get a dirty one) or a result folder")
    c.add_argument("b", help="the later side, likewise")
    c.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                   help="exit 1 when a case is slower by more than PCT percent beyond its noise, or ok in a and "
                        "failed or missing in b")
    c.add_argument("--force", action="store_true", help="compare results from different GPU models or counts")
    c.add_argument("--machine", default="", help="the machine folder to read (needed when a commit ran on several)")
    c.add_argument("--include-old", action="store_true",
                   help="judge records made under an older metric definition too (by their windows' range)")
    c.add_argument("--json", default="", metavar="FILE", help="also write the comparison as JSON")
    c.add_argument("--only", default="", metavar="PATTERNS", help="compare only the cases whose id matches one of "
                                                                   "these comma-separated shell patterns")
    c.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    c.set_defaults(func=cmd_compare)

    h = sub.add_parser("history", help="one case across every stored commit, oldest first")
    h.add_argument("case", help="a case id, or its beginning")
    h.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    h.set_defaults(func=cmd_history)

    cl = sub.add_parser("claims", help="each claim of the two articles, with the measured effect and a verdict",
                        description="Check the articles' claims against stored results.")
    cl.add_argument("paths", nargs="*", help="result files or folders (default: the results root)")
    cl.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    cl.add_argument("--include-old", action="store_true", help="judge records made under an older metric definition too")
    add_selection_flags(cl)
    cl.set_defaults(func=cmd_claims)

    rc = sub.add_parser("recommend", help="search the fastest configuration here within a budget; write its recipe",
                        description="Measure candidate configurations one knob at a time, keep what is faster "
                                    "beyond noise, re-measure the finalists, and write the winner as a script.")
    rc.add_argument("--gpus", type=int, default=None,
                    help="most GPUs (1, 2, 4, ... up to it are searched; default: all visible; CPU ranks if none)")
    rc.add_argument("--budget", default="10m", help="time for the whole search: seconds, or with s, m or h (default 10m)")
    rc.add_argument("--data", default="", help="ImageFolder tree: also measure the winner fed by DALI and the torch DataLoader")
    rc.add_argument("--no-compile", action="store_true", help="leave torch.compile out (each compiled candidate "
                                                               "compiles for about a minute)")
    rc.add_argument("--final-processes", type=int, default=recommend.FINAL_PROCESSES, metavar="K",
                    help="fresh processes for each of the best two at the end (default %(default)s)")
    rc.add_argument("--floor-processes", type=int, default=3, metavar="N",
                    help="fresh processes of the first starting set-up, whose spread is the run's noise floor "
                         "(default 3; 0 = none)")
    rc.add_argument("--results", default=str(results.DEFAULT_ROOT), help="results root folder")
    add_dist_flags(rc)
    rc.set_defaults(func=cmd_recommend)

    e = sub.add_parser("env", help="print the machine and software facts a result records")
    e.add_argument("--json", action="store_true", help="as JSON, for machines")
    e.set_defaults(func=cmd_env)
    return p


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(argv)
    if a.command == "sweep" and (a.name not in ("default", "all") and
                                 any(n not in sweeps.SWEEPS for n in a.name.split(","))):
        p.exit(2, f"error: unknown sweep {a.name!r}; accepted: default, all, or one or more of "
                  f"{', '.join(sweeps.SWEEPS)} joined by commas\n")
    from .results import StoreError
    from .runner import Stopped, terminate_as_interrupt
    try:
        with terminate_as_interrupt():
            return a.func(a)
    except CaseError as e:
        p.exit(2, f"error: {e}\n")
    except StoreError as e:
        p.exit(2, f"error: {e}\n")
    except KeyboardInterrupt as e:
        import signal
        signum = e.signum if isinstance(e, Stopped) else signal.SIGINT
        print(f"\ninterrupted ({signal.Signals(signum).name}): the running case's processes were stopped and every "
              f"finished case is stored; run again with --resume to go on", file=sys.stderr)
        return 128 + signum
