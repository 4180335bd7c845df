import io
import json
import re
import subprocess
import sys

import pytest

from bench.cli.main import main
from stored import ok_process

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv, needle", [
    (["run", "--strategy", "fsdp"], "error: strategy='fsdp' is not accepted; use one of: single, dp, ddp"),
    (["run", "--precision", "fp8"], "error: precision='fp8' is not accepted; use one of: fp32, tf32, bf16, fp16"),
    (["run", "--batch-size", "0"], "error: batch_size=0 must be >= 1"),
    (["run", "--device", "cpu", "--precision", "tf32"], "error: precision='tf32' needs device='cuda'"),
    (["run", "--strategy", "ddp", "--nccl-env", "NCCL_DEBUG"], "error: --nccl-env 'NCCL_DEBUG' must look like NCCL_NAME=VALUE"),
    (["run", "--strategy", "ddp", "--gpus", "2", "--nnodes", "2"], "--nnodes > 1 needs --rdzv-endpoint"),
    (["sweep", "everything"], "error: unknown sweep 'everything'; accepted: default, all, or one or more of seed"),
    (["sweep", "amp,everything"], "error: unknown sweep 'amp,everything'; accepted: default, all, or one or more"),
    (["recommend", "--budget", "soon"], "error: --budget='soon' is not a duration; use seconds, or a number with s"),
    (["recommend", "--floor-processes", "1"], "error: --floor-processes=1 must be 0 (none) or >= 2"),
    (["recommend", "--confirm-processes", "1"], "error: --confirm-processes=1 must be 0 (none) or >= 2"),
])
def test_bad_input_is_one_line_naming_what_is_wrong(argv, needle, capsys, tmp_path):
    assert main(argv + ["--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert not any(tmp_path.iterdir())  # nothing ran, nothing stored


@pytest.mark.parametrize("argv, needle", [
    (["report", "--results", "/no/such/dir"], "error: no such results file or folder: /no/such/dir"),
    (["claims", "/no/such/dir"], "error: no such results file or folder: /no/such/dir"),
    (["history", "no-such-case"], "error: no stored result has a case id starting with 'no-such-case'"),
    (["data", "check", "/no/such/dir"], "error: data folder /no/such/dir does not exist"),
    (["compare", "20260101T000000Z-zzzz", "HEAD"], "error: '20260101T000000Z-zzzz' is neither a run id"),
])
def test_every_refusal_of_a_reading_command_exits_2_in_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(needle)


def test_an_unwritable_json_path_is_a_refusal_not_a_traceback(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a folder cannot be made under a file, by anyone (root included)
    code = main(["compare", "20261201T061027Z-6864", "20261201T061628Z-c0c6", "--only", "amp-fp32-*",
                 "--json", str(blocker / "c.json")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --json {blocker / 'c.json'} cannot be written")


def test_argparse_type_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--batch-size", "many"])
    assert e.value.code == 2
    assert "--batch-size: invalid int value: 'many'" in capsys.readouterr().err


def test_more_gpus_than_visible_stops_before_running(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench", "sweep", "seed", "--gpus", "4", "--results", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 2
    assert "--gpus=4 asked, but this machine has 0 visible GPU(s)" in out.stderr
    assert not any(tmp_path.iterdir())


def test_cuda_case_on_a_gpu_less_machine_is_refused_up_front(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench", "run", "--gpus", "2", "--strategy", "ddp",
                          "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 2
    assert "this machine shows no GPU; add --device cpu" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["run", "sweep", "report", "env"])
def test_help_on_each_command(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    assert "usage: python -m bench " + command in capsys.readouterr().out


def test_run_help_documents_every_knob(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for flag in ("--batch-size", "--channels-last", "--bucket-cap-mb", "--dp-loss-in-forward", "--nccl-env"):
        assert flag in out
    assert "Per-GPU batch size in images" in out
    assert "Test only" not in out  # test-only knobs are not described in the help


def test_env_prints_provenance(capsys):
    assert main(["env", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    for key in ("torch", "torchvision", "cuda", "cpu_model", "cpu_cores", "hostname", "commit", "dirty", "gpu_count"):
        assert key in env
    assert main(["env"]) == 0  # for a person: one fact a line, cuDNN as a version
    text = capsys.readouterr().out
    assert text.startswith("machine folder  ") and "\ntorch           " in text and "{" not in text
    from bench.harness.env import describe
    assert "cuDNN 9.24.0" in describe({**env, "cudnn": 92400})


def test_only_keeps_the_matching_cases_of_each_sweep():
    from bench.cli.flags import select_cases
    from bench.core import sweeps
    plans = [("seed", sweeps.build("seed", 2)), ("best", sweeps.build("best", 2))]
    kept = select_cases(plans, "seed-optimized-*-g2-*, best-resnet50-*-g1-*")
    assert [(n, [c.name + f"/g{c.gpus}" for c in cs]) for n, cs in kept] == [
        ("seed", ["seed-optimized/g2"]), ("best", ["best/g1"])]


def test_only_matching_nothing_stops_before_running(tmp_path, capsys):
    assert main(["sweep", "smoke", "--only", "nothing-like-this*", "--results", str(tmp_path)]) == 2
    assert "error: --only nothing-like-this* matches no case id of this sweep" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.fixture
def stand_in_runner(monkeypatch):
    """run_cases with every case answered at once as `skipped`; returns the cases it was asked to run."""
    from bench.harness import records
    calls = []

    def fake_run(case, dist=None, then=None, **_):
        calls.append(case)
        return {"status": "skipped", "reason": "stand-in", "wall_s": 1.0, "metrics": {}, "ranks": []}
    monkeypatch.setattr(records, "run_case", fake_run)
    monkeypatch.setattr(records, "diagnose", lambda record, peak: {})
    monkeypatch.setenv("BENCH_SKIP_PEAK", "1")
    return calls


def test_a_case_two_sweeps_share_runs_once_per_invocation(tmp_path, stand_in_runner):
    """`make bench` runs seed then best; both hold the DataParallel baseline, measured once."""
    from bench.core.case import Case
    from bench.harness.run import Run, run_cases
    from bench.store import query
    from bench.store.tree import Store
    shared = Case(device="cpu", name="seed-baseline", strategy="dp", batch_size=2, image_size=32)
    measured = {}
    with Run(Store(tmp_path), out=io.StringIO()) as run:
        run_cases(run, [shared], "seed", measured=measured)
        run_cases(run, [shared, shared.replace(name="best")], "best", measured=measured)
    assert [c.case_id for c in stand_in_runner] == [shared.case_id, shared.replace(name="best").case_id]
    recs = {(r.sweep, r.case["name"]): r.data for r in query.load([tmp_path])[0]}
    assert set(recs) == {("seed", "seed-baseline"), ("best", "seed-baseline"), ("best", "best")}
    assert recs[("best", "seed-baseline")]["reused_from_sweep"] == "seed"
    assert "reused_from_sweep" not in recs[("seed", "seed-baseline")]


def test_a_case_the_start_floor_measured_is_stored_from_its_processes_not_run_again(tmp_path, monkeypatch):
    """On one GPU the floor's reference is the `best` case under another name: its three fresh processes
    are that case's measurement (median and interval from them), and the case is not run a fourth time."""
    from bench.core.case import Case
    from bench.harness import records
    from bench.harness.run import Run, run_cases
    from bench.present.phases_table import phase_table
    from bench.store import query
    from bench.store.tree import Store
    figures, ran = iter([1000.0, 1030.0, 990.0, 500.0, 700.0, 710.0, 720.0, 730.0]), []

    def fake_run(case, dist=None, then=None, **_):
        ran.append(case.name)
        return ok_process(next(figures), wall_s=2.0, repeats=3)
    monkeypatch.setattr(records, "run_case", fake_run)
    monkeypatch.setattr(records, "diagnose", lambda record, peak: {})
    monkeypatch.setenv("BENCH_SKIP_PEAK", "1")
    reference = Case(device="cpu", name="noise-floor", batch_size=2, image_size=32)
    same, other = reference.replace(name="best"), reference.replace(name="other", batch_size=4)
    out = io.StringIO()
    with Run(Store(tmp_path), out=out) as run:
        run.measure_floor(reference, 3)
        made = run_cases(run, [same, other], "best")
        assert run_cases(run, [same], "again", processes=4, header=False)[0]["metrics"]["images_per_s"] == 715.0
    assert ran == ["noise-floor"] * 3 + ["other"] + ["best"] * 4  # four processes asked: more than the floor had
    best = made[0]
    assert best["case_id"] == same.case_id and best["measured_as_floor"] == reference.case_id
    assert best["metrics"]["images_per_s"] == 1000.0 and best["metrics"]["images_per_s_processes"] == [1000.0, 1030.0, 990.0]
    assert best["metrics"]["images_per_s_ci95"] is not None and len(best["processes"]) == 3
    assert "measured as this run's noise floor (3 processes of noise-floor-" in out.getvalue()
    assert made[1]["metrics"]["images_per_s"] == 500.0
    # the floor's row counts those processes once: the case has no row of its own
    rows = phase_table(query.load([tmp_path])[0]) or ""
    assert "| best " not in rows


def test_resume_continues_the_interrupted_run_not_the_commit(tmp_path, stand_in_runner):
    """--resume after Ctrl-C keeps what the interrupted run stored as ok and runs the rest, even cases an
    earlier, finished run of the same commit stored: it resumes the run, not the commit."""
    from bench.core.case import Case
    from bench.harness.run import Run, run_cases
    from bench.store.tree import Store
    base = Case(device="cpu", batch_size=2, image_size=32)
    cases = [base.replace(name=n) for n in ("finished", "failed", "new")]
    store = Store(tmp_path)
    with Run(store, out=io.StringIO()) as run:  # an earlier run that finished: it stored all three
        done = run_cases(run, cases, "s")
    ok_metrics = dict.fromkeys(("images_per_s", "images_per_s_per_gpu", "spread_pct", "data_wait_pct",
                                "step_time_median_s", "global_batch"), 1.0)
    store.save({**done[2], "status": "ok", "run_id": "20250101T000000Z-0000", "metrics": ok_metrics})  # `new`: ok
    with pytest.raises(KeyboardInterrupt), Run(store, out=io.StringIO()) as run:
        # Ctrl-C came after this run had stored the first as ok and the second as skipped
        run.manifest["sweeps"].append("s")
        run.save()
        store.save({**done[0], "status": "ok", "run_id": run.run_id, "metrics": ok_metrics})
        store.save({**done[1], "run_id": run.run_id})
        interrupted = run.run_id
        raise KeyboardInterrupt
    stand_in_runner.clear()
    log = io.StringIO()
    with Run(store, out=log) as run:
        run_cases(run, cases, "s", resume=True)
    text = log.getvalue()
    assert f"--resume: continuing run {interrupted}" in text
    assert [c.name for c in stand_in_runner] == ["failed", "new"]
    assert "finished-" in text and "already stored, skipped (--resume)" in text
    assert "stored as skipped, running it again (--resume)" in text
    # that resumed run, interrupted too, is resumed in turn: what the first run kept stays kept
    resumed = json.loads(next((tmp_path).rglob(f"runs/{run.run_id}.json")).read_text())
    assert resumed["resumed_runs"] == [interrupted]
    with pytest.raises(KeyboardInterrupt), Run(store, out=io.StringIO()) as again:
        again.manifest.update(sweeps=["s"], resumed_runs=[interrupted])
        again.save()
        store.save({**done[2], "run_id": again.run_id})  # it stored one case (skipped) before the stop
        raise KeyboardInterrupt
    stand_in_runner.clear()
    with Run(store, out=(log := io.StringIO())) as run:
        run_cases(run, cases, "s", resume=True)
    assert f"--resume: continuing run {again.run_id}" in log.getvalue()
    assert [c.name for c in stand_in_runner] == ["failed", "new"]  # `finished` stays kept from the first
    stand_in_runner.clear()
    with Run(store, out=(log := io.StringIO())) as run:  # that one finished: nothing is left to resume
        run_cases(run, cases[:1], "s", resume=True)
    assert "--resume: no interrupted run of sweep 's'" in log.getvalue()
    stand_in_runner.clear()
    with Run(Store(tmp_path / "other"), out=(log := io.StringIO())) as run:
        run_cases(run, cases[:1], "s", resume=True)
    assert "--resume: no interrupted run of sweep 's'" in log.getvalue() and len(stand_in_runner) == 1


def test_dry_run_lists_cases_and_their_expected_time_from_stored_ones(tmp_path, capsys):
    from bench.cli.main import main
    from bench.harness import env
    from bench.store import record, tree
    machine = env.machine_slug(env.collect())
    store = tree.Store(tmp_path)
    # a stored `single` case that took 12 s over 2 fresh processes: 6 s a process on this machine
    store.save({"schema": record.SCHEMA, "sweep": "smoke", "case_id": "single-x", "status": "ok", "run_id": "r1",
                "machine": machine, "commit_folder": "abc", "wall_s": 12.0, "processes": [{}, {}],
                "case": {"name": "single", "gpus": 1}, "metrics": {"images_per_s": 1.0, "images_per_s_per_gpu": 1.0,
                "spread_pct": 0, "data_wait_pct": 0, "step_time_median_s": 1, "global_batch": 8}})
    assert main(["sweep", "smoke", "--dry-run", "--processes", "3", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    singles = [ln for ln in out.splitlines() if ln.startswith("| smoke") and "] single " in ln]  # ids keyed below
    # fp32 and bf16, the amp pair, run once a round by the claims; bf16 + NHWC in its 3 processes
    assert [("0m06s/round" in ln, "0m18s" in ln) for ln in singles] == [(True, False), (True, False), (False, True)]
    flat = " ".join(out.split())
    assert "(claim rounds) | - | - |" in flat and "within the claims' budget of 2m30s" in flat
    assert "3 process(es) per case" in flat and "the total is a lower bound" in flat
    assert not list(tmp_path.rglob("smoke/single-resnet50*"))  # nothing ran


def test_several_sweeps_share_one_run(capsys, tmp_path):
    from bench.cli.main import main
    assert main(["sweep", "amp,loaders", "--dry-run", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| amp " in out and "| loaders " in out and "15 case(s)" in out
    assert out.count("(noise floor)") == 1


def test_a_real_loader_is_judged_by_its_own_processes_not_the_synthetic_floor(monkeypatch):
    """The floor is a synthetic case's noise: one process of a loader case gets no interval from it."""
    from bench.core.case import Case
    from bench.harness import records
    figures = iter([1000.0, 1100.0, 1000.0, 1100.0])

    def fake_run(case, dist=None, then=None, **_):
        ips = next(figures)
        return {"status": "ok", "reason": "", "wall_s": 1.0, "ranks": [],
                "metrics": {"images_per_s": ips, "images_per_s_per_gpu": ips, "window_rel_se": 0.0,
                            "images_per_s_repeats": [ips] * 3}}
    monkeypatch.setattr(records, "run_case", fake_run)
    floor = {"rel_sd": 0.005, "n": 3}
    synthetic = Case(device="cpu", batch_size=2, image_size=32)
    fed = synthetic.replace(loader="torch", data_dir="/data", num_workers=1)
    assert records.measure(synthetic, 1, floor)["metrics"]["images_per_s_ci95"] is not None
    assert records.measure(fed, 1, floor)["metrics"]["images_per_s_ci95"] is None
    # two processes of the loader case, 1000 and 1100: their own spread, not the floor's 0.5%
    lo, hi = records.measure(fed, 2, floor)["metrics"]["images_per_s_ci95"]
    assert hi - lo > 1000


def test_every_option_says_its_default_and_every_command_what_it_does():
    """--help answers: each subcommand has a description, each option a help ending in its default (or
    `required`), each positional a help; compare and ab name their exit codes."""
    import argparse

    from bench.cli.main import parser

    def walk(p, path):
        yield path, p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, nested in a.choices.items():
                    yield from walk(nested, f"{path} {name}")

    missing = []
    for path, p in walk(parser(), "bench"):
        if path != "bench" and not (p.description or "").strip() and path != "bench data make" \
                and path != "bench data check":
            missing.append(f"{path}: no description")
        for a in p._actions:
            if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:
                continue
            if not a.help:
                missing.append(f"{path} {a.dest}: no help")
            elif a.option_strings and "default" not in a.help and "required" not in a.help:
                missing.append(f"{path} {a.option_strings[-1]}: no default stated")
    assert missing == []
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("compare", "ab"):
        text = sub.choices[name].format_help()
        assert "Exit 0" in text and "1:" in text and "2:" in text


@pytest.mark.parametrize("args", [
    ["report", "--no-files"], ["report", "--no-files", "--lang", "zh"], ["claims"],
    ["compare", "10cf292d725e", "4c0ef90f62f5"], ["compare", "834f1c7db0c6", "a677da430275", "--force"],
    ["history", "amp-fp16-resnet50-single", "--no-plot"], ["sweep", "default", "--dry-run"],
    ["sweep", "amp", "--dry-run", "--processes", "3"], ["env"], ["run", "--help"], ["ab", "--help"],
], ids=lambda a: " ".join(a))
def test_every_command_fits_120_columns_on_the_committed_results(args, capsys, monkeypatch):
    """Lines within 120 terminal columns (a Chinese character takes two), and Markdown tables that render
    as written: no row whose first cell is empty (a cell wrapped onto a line of its own)."""
    from bench.cli.main import main
    from bench.present.text import display_width
    monkeypatch.setenv("COLUMNS", "120")  # argparse's help follows the terminal's width
    try:
        code = main(args)
    except SystemExit as e:  # --help
        code = e.code
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    lines = (out.out + out.err).splitlines()
    # a result file's path stands whole on a line of its own (copied, never broken), however wide
    wide = [ln for ln in lines if display_width(ln) > 120 and not re.fullmatch(r"  \S+\.json", ln)]
    assert wide == [], wide[:2]
    rows = [ln for ln in lines if ln.startswith("|") and not set(ln) <= set("|-: ")]
    assert all(ln.strip("|").split("|")[0].strip() for ln in rows)


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`bench claims | head -1`: one line through, then no traceback, and SIGPIPE's code."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(f"{sys.executable} -m bench claims | head -1; echo \"code ${{PIPESTATUS[0]}}\"",
                         shell=True, executable="/bin/bash", cwd=root, capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[0].startswith("## ") and out.stdout.splitlines()[-1] == "code 141", out.stdout
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr


@pytest.mark.slow
def test_pip_install_gives_a_bench_command(tmp_path):
    """`pip install .` makes a `bench` command (pyproject's [project.scripts]) that is the suite's command
    line; installed here without dependencies, beside the interpreter that already has them."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    root, src = Path(__file__).resolve().parents[1], tmp_path / "src"  # built in a copy: the checkout stays clean
    shutil.copytree(root / "bench", src / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(root / f, src / f)
    prefix = tmp_path / "prefix"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--prefix",
                    str(prefix), str(src)], check=True, cwd=tmp_path, capture_output=True)
    site = next(prefix.glob("lib/python*/site-packages"))
    out = subprocess.run([str(prefix / "bin" / "bench"), "--help"], capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: ") and "{run,sweep,feed,report" in out.stdout
    bad = subprocess.run([str(prefix / "bin" / "bench"), "sweep", "--gpus", "-1"], capture_output=True, text=True,
                         cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)})
    assert bad.returncode == 2  # the exit code is the command's own
