"""`bench recommend`: the search driven by a stand-in of known figures and noise, then the real command on
the CPU and the recipe it writes, run on its own."""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.analysis import search as recommend
from bench.cli.flags import parse_budget
from bench.core import procfs, recipes, sweeps
from bench.core.case import CaseError
from bench.present import recipe, recommend_text
from forked_python import run_script, torchrun_script

ROOT = Path(__file__).resolve().parent.parent
BASE = sweeps.GPU_BASE


def test_budget_parsing():
    assert parse_budget("10m") == 600
    assert parse_budget("90") == 90
    assert parse_budget("45s") == 45
    assert parse_budget("1h") == 3600
    for bad in ("ten", "0", "-5m", "5d", ""):
        with pytest.raises(CaseError, match="--budget=.*use seconds, or a number with s, m or h"):
            parse_budget(bad)


class StandIn:
    """Figures by knob, each with a +-`noise_pct` interval for one process (narrower by sqrt(K) for K
    processes), and a clock that advances by each process's seconds (eager or compiled), so the budget
    is exercised without running anything."""

    def __init__(self, gains: dict, noise_pct: float = 2.0, eager_s: float = 30.0, compile_s: float = 90.0,
                 final_gains: dict | None = None, fail: dict | None = None, extra=None, host_bound=None,
                 first_step_s: float | None = None, real_loader_alone: bool = False):
        self.gains, self.noise, self.eager_s, self.compile_s = gains, noise_pct, eager_s, compile_s
        # where set, each compiled process's record keeps its first step (its compilation) in its phases
        self.first_step_s = first_step_s
        # as the suite stores it: one process of a real loader has no interval (the floor does not cover it)
        self.real_loader_alone = real_loader_alone
        self.final_gains, self.fail = final_gains or {}, fail or {}
        # extra(case): a further gain in %; host_bound(case): whether its record's diagnosis says so
        self.extra, self.host_bound = extra or (lambda case: 0.0), host_bound or (lambda case: False)
        self.now, self.calls = 0.0, []

    def clock(self):
        return self.now

    def figure(self, case, sweep):
        f = 1000.0 if case.strategy == "dp" else 5000.0
        gains = self.final_gains if sweep == recommend.FINAL_SWEEP and self.final_gains else self.gains
        for (knob, value), gain in gains.items():
            if getattr(case, knob) == value:
                f *= 1 + gain / 100
        return f * (1 + self.extra(case) / 100)

    def __call__(self, case, processes, sweep):
        per = self.compile_s if case.compile else self.eager_s
        self.now += per * processes
        self.calls.append((case, processes, sweep))
        phases = {"phases_s": {"first_step_s": self.first_step_s}} if case.compile and self.first_step_s else {}
        rec = {"case": case.to_dict(), "case_id": case.case_id, "wall_s": per * processes,
               "processes": [phases] * processes, "status": "ok", "machine": "m", "commit_folder": "c", "run_id": "r"}
        for (knob, value), status in self.fail.items():
            if getattr(case, knob) == value:
                return {**rec, "status": status, "reason": f"{status} at {knob}={value}", "metrics": {}}
        f = self.figure(case, sweep)
        half = f * self.noise / 100 / processes ** 0.5
        alone = self.real_loader_alone and case.loader != "synthetic" and processes == 1
        rec["metrics"] = {"images_per_s": f, "images_per_s_ci95": None if alone else [f - half, f + half],
                          "processes": processes, "spread_pct": 1.0,
                          "images_per_s_processes": [f] * processes, "steps_per_window": 10}
        rec["diagnosis"] = {"verdict": "host-bound" if self.host_bound(case) else "compute-bound"}
        return rec


def search(standin, budget_s=10_000.0, **kw):
    return recommend.Search(standin, budget_s, clock=standin.clock, **kw)


def test_keeps_only_changes_faster_beyond_noise():
    # compiling the whole step: +12%; fused SGD: +5% (noise +-2% each side: combined 2.8%); batch 512: +1%
    standin = StandIn({("compile_scope", "step"): 12.0, ("compile", "reduce-overhead"): -3.0,
                       ("optimizer_impl", "fused"): 5.0, ("batch_size", 512): 1.0, ("precision", "bf16"): -15.0,
                       ("channels_last", False): -40.0})
    out = search(standin).run(BASE, 1)
    best = out.best.case
    assert (best.compile, best.compile_scope, best.optimizer_impl, best.batch_size) == ("default", "step", "fused", 256)
    assert (best.precision, best.channels_last, best.strategy) == ("fp16", True, "single")
    assert recommend.figure(out.final_best) == pytest.approx(5000 * 1.12 * 1.05)
    # the runner-up (batch 512, +1%) is within the noise of the best: said, not decided
    assert out.runner_up.case.batch_size == 512
    assert out.versus_runner_up["verdict"] == "within noise"
    notes = {(c.stage, c.case.batch_size, c.case.optimizer_impl): c.note for c in out.candidates}
    # batch 512 looked faster within one process's noise: it and the best then ran in 3 fresh processes
    # each (+-1.2% apiece, combined 1.6%), and the gain still stayed within noise
    assert notes[("batch", 512, "fused")] == ("+1.0%: within noise (+-1.6%) in 3 fresh processes; carried into the "
                                               "later candidates")
    assert notes[("optimizer", 256, "fused")].startswith("kept, +5.0%: faster (+-2.8%)")
    confirmed = [(c.batch_size, k) for c, k, sweep in standin.calls if sweep == recommend.CONFIRM_SWEEP]
    # the later candidates carried batch 512 and gained no more than it had: none was measured again
    later = [c.case.batch_size for c in out.candidates if c.stage in ("graph", "kernels", "wrapper", "precision")]
    assert later and set(later) == {512}
    assert confirmed == [(256, 3), (512, 3)]
    # both finalists already had more fresh processes than the finals ask for: none ran again
    assert not [c for c in standin.calls if c[2] == recommend.FINAL_SWEEP]
    assert out.final_best["metrics"]["processes"] == 3
    # the articles' set-ups at this GPU count were measured as the yardsticks
    assert recommend.figure(out.references["baseline"]) == pytest.approx(1000 * 0.6)  # dp, fp32, NCHW


def test_a_compiled_candidate_measured_again_is_expected_to_compile_from_the_cache():
    standin = StandIn({}, compile_s=90.0, first_step_s=70.0)
    finder = search(standin)
    compiled = BASE.replace(name="recommend-compile", compile="default", compile_scope="step")
    other = compiled.replace(batch_size=512)
    finder.measure(compiled)
    # its 70 s of compiling become the cache's 15 s; a compiled case not run yet keeps the full 90 s
    assert finder.estimate(compiled) == pytest.approx(90 - 70 + 15)
    assert finder.estimate(other) == pytest.approx(90)
    # an eager case measured again costs what it cost
    eager = BASE.replace(name="recommend-start")
    finder.measure(eager)
    assert finder.estimate(eager) == pytest.approx(30)


@pytest.mark.parametrize("first_step_s, confirmed", [(None, False), (70.0, True)])
def test_a_cached_compilation_lets_a_close_compiled_candidate_be_confirmed(first_step_s, confirmed):
    # batch 512 compiled looks 2% faster, within one process's +-2% each side; the budget left holds six
    # more compiled processes only where they compile from the cache (6 x 35 s, not 6 x 90 s)
    standin = StandIn({("compile_scope", "step"): 12.0, ("batch_size", 512): 2.0, ("batch_size", 384): -5.0},
                      first_step_s=first_step_s)
    out = search(standin, budget_s=30 * 3 + 30 + 90 * 3 + 6 * 35 + 10).run(BASE, 1)
    confirms = [(c.batch_size, k) for c, k, sweep in standin.calls if sweep == recommend.CONFIRM_SWEEP and c.compile]
    assert bool(confirms) == confirmed
    if confirmed:
        assert confirms == [(256, 3), (512, 3)]


def test_the_start_measures_the_noise_floor_first_and_a_clear_winner_is_not_measured_again():
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("batch_size", 128): -20.0, ("batch_size", 512): -20.0,
                       ("batch_size", 384): -20.0, ("cuda_graph", True): -20.0,
                       ("precision", "bf16"): -10.0, ("channels_last", False): -40.0})
    floors = []

    def on_floor(case, figures, reason):
        floors.append((case.name, figures, len(standin.calls)))

    out = search(standin, floor_processes=3, on_floor=on_floor).run(BASE, 1, with_compile=False)
    # the floor comes from the start's three fresh processes, before anything else is measured
    assert floors == [("recommend-start", [5000.0] * 3, 1)]
    assert standin.calls[0][1] == 3
    # fused wins by 20%, far beyond the noise of any runner-up: no finals were needed
    assert out.best.case.optimizer_impl == "fused" and out.versus_runner_up["verdict"] == "faster"
    assert not [c for c in standin.calls if c[2] == recommend.FINAL_SWEEP]


def test_noise_wider_than_the_gain_keeps_the_start():
    standin = StandIn({("optimizer_impl", "fused"): 5.0}, noise_pct=6.0)
    out = search(standin, confirm_processes=0).run(BASE, 1, with_compile=False)
    assert out.best.case.optimizer_impl == "default"
    fused = next(c for c in out.candidates if c.case.optimizer_impl == "fused")
    assert fused.note.startswith("+5.0%: within noise")


def test_a_gain_within_one_process_noise_is_measured_again_and_kept_when_fresh_processes_decide():
    # the CUDA graph: +4% against +-4% per one-process figure (combined 5.7%): within noise measured once;
    # in 3 fresh processes each (+-2.3% apiece, combined 3.3%) it is faster, and it is kept
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("cuda_graph", True): 4.0}, noise_pct=4.0)
    out = search(standin).run(BASE, 1, with_compile=False)
    assert out.best.case.cuda_graph is True
    graph = next(c for c in out.candidates if c.stage == "graph")
    assert graph.note == "kept, +4.0%: faster (+-3.3%) in 3 fresh processes"
    assert graph.screening["metrics"]["processes"] == 1 and graph.record["metrics"]["processes"] == 3
    # the fused best it was judged against ran again too; the candidates after it are judged
    # against the graph's confirmation, and what is confirmed once is never measured again
    confirmed = [(c.cuda_graph, c.optimizer_impl, sweep) for c, k, sweep in standin.calls if k == 3]
    assert confirmed[:2] == [(False, "fused", recommend.CONFIRM_SWEEP), (True, "fused", recommend.CONFIRM_SWEEP)]
    keys = [recommend.knobs_key(c) for c, _, sweep in standin.calls if sweep == recommend.CONFIRM_SWEEP]
    assert len(keys) == len(set(keys))
    assert next(c for c in out.candidates if c.stage == "precision").against == graph.case


def test_a_best_with_fresh_processes_of_its_own_is_not_measured_again_and_no_budget_no_confirmation():
    # the start has the floor's 3 processes: only the candidate is confirmed
    standin = StandIn({("optimizer_impl", "fused"): 4.0}, noise_pct=4.0)
    search(standin, floor_processes=3, on_floor=lambda *a: None).run(BASE, 1, with_compile=False)
    assert [(c.optimizer_impl, k) for c, k, sweep in standin.calls if sweep == recommend.CONFIRM_SWEEP] == \
        [("fused", 3)]
    # three more processes of 30 s do not fit in what a 100 s budget has left: the one-process verdict stands
    standin = StandIn({("optimizer_impl", "fused"): 4.0}, noise_pct=4.0)
    out = search(standin, 100.0).run(BASE, 1, with_compile=False)
    fused = next(c for c in out.candidates if c.case.optimizer_impl == "fused")
    assert fused.note == "+4.0%: within noise (+-5.7%); carried into the later candidates" and fused.screening is None
    assert not [c for c in standin.calls if c[2] == recommend.CONFIRM_SWEEP]


def test_two_gains_within_noise_each_are_carried_and_kept_together_beyond_it():
    # the CUDA graph and the 4-channel input: +1% each against +-1.6% in 3 fresh processes a side, as on one
    # H200 (+0.6% and +0.7% against +-1.0%); together +2%, beyond it
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("compile", "default"): 15.0, ("cuda_graph", True): 1.0,
                       ("input_channels", 4): 1.0})
    finder = search(standin)
    out = finder.run(BASE, 1)
    graph = next(c for c in out.candidates if c.stage == "graph")
    assert graph.note == "+1.0%: within noise (+-1.6%) in 3 fresh processes; carried into the later candidates"
    padded = next(c for c in out.candidates if c.stage == "kernels")
    assert (padded.case.cuda_graph, padded.case.input_channels) == (True, 4)  # tried with the graph carried
    assert padded.against == graph.against and padded.note.startswith("kept, +2.0%: faster (+-1.6%)")
    assert out.best.case.cuda_graph and out.best.case.input_channels == 4
    # once kept, nothing is carried: the next candidate changes the new best alone
    after = next(c for c in out.candidates if c.stage == "kernels" and c.case.cudnn_benchmark_limit == 0)
    assert after.against == padded.case and finder.carried == {}
    # a slower change is not carried
    assert not any(c.note.endswith("carried into the later candidates") for c in out.candidates
                   if c.stage == "precision")


def test_a_change_that_cannot_take_what_is_carried_is_tried_alone():
    standin = StandIn({("bucket_cap_mb", 100.0): -5.0})
    finder = search(standin)
    ddp = recommend.start_case(BASE, 2)
    current = recommend.Candidate("start", ddp, finder.measure(ddp), "where the search starts")
    outcome = recommend.Outcome(2)
    finder.limit, finder.carried, finder.carried_pct = 10_000.0, {"cuda_graph": True}, 1.0  # none under DDP
    assert finder._carrying(outcome, current, "ddp", dict(bucket_cap_mb=100.0)) is current
    (tried,) = outcome.candidates
    assert tried.case.bucket_cap_mb == 100.0 and not tried.case.cuda_graph and finder.carried == {"cuda_graph": True}


def test_the_runner_up_that_wins_in_fresh_processes_is_the_answer():
    # measured once, fused looks like a tie; in fresh processes it is 10% faster
    standin = StandIn({("optimizer_impl", "fused"): 1.0}, final_gains={("optimizer_impl", "fused"): 10.0})
    out = search(standin, confirm_processes=0).run(BASE, 1, with_compile=False)
    assert [k for _, k, sweep in standin.calls if sweep == recommend.FINAL_SWEEP] == [2, 2]
    assert out.best.case.optimizer_impl == "fused"
    assert out.versus_runner_up["verdict"] == "faster"


def test_a_failed_candidate_is_kept_with_its_reason_and_the_search_goes_on():
    standin = StandIn({("optimizer_impl", "fused"): 8.0}, fail={("batch_size", 512): "oom"})
    out = search(standin).run(BASE, 1, with_compile=False)
    big = next(c for c in out.candidates if c.case.batch_size == 512)
    assert big.note == "oom: oom at batch_size=512"
    assert out.best.case.optimizer_impl == "fused" and out.best.case.batch_size == 256


def test_the_budget_is_kept_and_what_it_left_out_is_named():
    standin = StandIn({("compile_scope", "step"): 12.0}, eager_s=30.0, compile_s=90.0)
    budget = 300.0
    out = search(standin, budget).run(BASE, 1)
    assert standin.now <= budget
    assert any("(budget)" in s for s in out.skipped)
    assert len(out.candidates) < 1 + 3 + 3 + 1 + 2  # start, precision, compile, optimizer, batch


def test_a_case_started_near_the_end_of_the_budget_is_stopped_at_it():
    standin = StandIn({})
    s = search(standin, budget_s=600.0)
    case = BASE.replace(compile="default", compile_scope="step")
    standin.now = 500.0  # 100 s left, plus 30 s of grace: one process gets 130 s
    s.measure(case)
    assert standin.now == 590.0  # the stand-in's compiled process took 90 s: 40 s left to share
    s.measure(case.replace(batch_size=384), processes=2)
    assert [c.timeout_s for c, _, _ in standin.calls] == [130.0, 20.0]
    standin.now = 0.0  # a case's own shorter timeout stands, and the id ignores the cap
    s.measure(case.replace(batch_size=512, timeout_s=90.0))
    assert standin.calls[-1][0].timeout_s == 90.0 and standin.calls[0][0].case_id == case.case_id


def test_time_kept_for_finals_that_cannot_fit_goes_to_the_candidates():
    # start, fused (+10%), compile step (+17%) and batch 512 (a tie): 240 s of a 400 s budget; the two
    # compiled finalists would need 2 x (90 + 90) s, more than is left, so batch 384 runs instead
    standin = StandIn({("optimizer_impl", "fused"): 10.0, ("compile", "default"): 17.0,
                       ("cuda_graph", True): 2.0}, eager_s=30.0, compile_s=90.0)
    out = search(standin, 400.0).run(BASE, 1)
    tried = [(c.stage, c.case.cuda_graph, c.case.batch_size) for c in out.candidates if c.case.compile]
    assert tried == [("compile", False, 256), ("batch", False, 512), ("batch", False, 384)]
    assert "the finalists' re-measurement (budget)" in out.skipped
    assert standin.now <= 400.0


def test_the_batch_grows_while_the_largest_wins_and_shrinks_only_where_none_did():
    # each larger batch +2% beyond the last (noise +-0.5%): 512, 768 and 1024 are kept in turn; 384 and
    # 128 never run
    gains = {("batch_size", b): g for b, g in ((384, 2.0), (512, 4.0), (768, 6.0), (1024, 8.0))}
    out = search(StandIn(gains, noise_pct=0.5)).run(BASE, 1, with_compile=False)
    batches = [c.case.batch_size for c in out.candidates if c.stage == "batch"]
    assert batches == [512, 768, 1024] and out.best.case.batch_size == 1024
    # 512 wins but 768 does not: growth stops there, and no smaller batch is tried
    standin = StandIn({("batch_size", 384): 2.0, ("batch_size", 512): 4.0}, noise_pct=0.5)
    out = search(standin).run(BASE, 1, with_compile=False)
    assert [c.case.batch_size for c in out.candidates if c.stage == "batch"] == [512, 768]
    # 512 does not win, 384 does: kept, and nothing smaller or larger follows
    out = search(StandIn({("batch_size", 384): 3.0}, noise_pct=0.5)).run(BASE, 1, with_compile=False)
    assert [c.case.batch_size for c in out.candidates if c.stage == "batch"] == [512, 384]
    assert out.best.case.batch_size == 384
    # nothing larger wins: half the start is tried
    out = search(StandIn({("batch_size", 128): 3.0}, noise_pct=0.5)).run(BASE, 1, with_compile=False)
    assert [c.case.batch_size for c in out.candidates if c.stage == "batch"] == [512, 384, 128]
    assert out.best.case.batch_size == 128
    assert recommend.next_batch(1, 1, [1, 2]) is None  # no half of a batch of one


def test_a_batch_beyond_2x_waits_for_the_graph_and_kernel_stages():
    # 512 wins: the whole step as one CUDA graph and the kernel settings come next, 768 only after them
    # (on one H200 768 never beat 512 and its first compilation took 75 s that the graph then lacked)
    gains = {("optimizer_impl", "fused"): 3.0, ("compile", "default"): 15.0, ("batch_size", 512): 5.0,
             ("batch_size", 768): 10.0}
    out = search(StandIn(gains, noise_pct=0.5)).run(BASE, 1)
    order = [(c.stage, c.case.batch_size) for c in out.candidates]
    assert order.index(("graph", 512)) < order.index(("kernels", 512)) < order.index(("batch", 768))
    # 768 kept, 1024 (no gain of its own) not: the stages after them go on from 768
    assert order.index(("batch", 768)) < order.index(("batch", 1024)) < order.index(("wrapper", 768))
    assert out.best.case.batch_size == 768 and [b for s, b in order if s == "batch"] == [512, 768, 1024]
    # where 512 did not win (384 did), the later walk tries nothing larger; nor after a budget-skipped 512
    assert recommend.larger_batch(256, 384, [512, 384]) is None and recommend.larger_batch(256, 256, []) is None
    assert recommend.larger_batch(256, 768, [512, 768]) == 1024 and recommend.larger_batch(256, 1024, [512, 768, 1024]) is None


def test_ddp_knobs_are_searched_over_several_gpus():
    standin = StandIn({("gradient_as_bucket_view", True): 4.0})
    out = search(standin).run(BASE, 4, with_compile=False)
    assert out.best.case.strategy == "ddp" and out.best.case.gpus == 4
    assert out.best.case.gradient_as_bucket_view is True
    assert {c.stage for c in out.candidates} >= {"ddp"}


def test_a_stored_yardstick_is_reused_not_measured_again():
    standin = StandIn({})
    baseline = sweeps.seed_baseline(BASE, 1)
    stored = {baseline.case_id: standin(baseline, 1, recommend.SWEEP)}
    standin.calls.clear()
    search(standin, stored=stored).run(BASE, 1, with_compile=False)
    assert baseline.case_id not in {c.case_id for c, _, _ in standin.calls}


def test_render_fits_a_terminal_and_names_the_recipe():
    standin = StandIn({("optimizer_impl", "fused"): 6.0})
    out = search(standin).run(BASE, 1, with_compile=False)
    text = recommend_text.render([out], 600, {1: "results/m/recipes/recipe_1gpu.py"})
    assert "best: single, fp16, NHWC, SGD fused, synthetic, batch 256" in text
    assert "recipe: results/m/recipes/recipe_1gpu.py" in text
    assert "article's baseline (dp, fp32)" in text and "| runner-up: " in text
    assert max(len(ln) for ln in text.splitlines()) <= 120


@pytest.fixture(scope="module")
def recommended(tmp_path_factory):
    """One recommend search on the CPU, fed by a JPEG folder too, that both tests below read: (its
    output, its results tree, the folder)."""
    from bench.data import generate
    tmp = tmp_path_factory.mktemp("recommend")
    data = tmp / "jpegs"
    # enough for a window at any batch the search can reach: up to 4x the start's 8, 4 steps a window
    # (with 64, a search whose 3x batch won refused the loader stage: "reads 96 per rank")
    generate.make_dataset(data, 128, 4, seed=1, workers=2, echo=lambda m: None)
    out = subprocess.run([sys.executable, "-m", "bench", "recommend", "--gpus", "1", "--budget", "20s", "--no-compile",
                          "--floor-processes", "2", "--final-processes", "1", "--data", str(data),
                          "--results", str(tmp / "r")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, "BENCH_SKIP_PEAK": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    return out, tmp / "r", data


@pytest.mark.slow
def test_recommend_on_the_cpu_stores_every_candidate_and_writes_a_recipe_that_runs(recommended):
    out, tmp_path, _ = recommended
    stored = list(tmp_path.rglob("recommend/*/*.json"))
    if "fastest configuration measured" in out.stdout:
        # on a 2-core CPU the article's fp32 DataParallel baseline can outrun every candidate the budget allows:
        # then it is the answer, said so, and no script is written for a DataParallel set-up
        assert "best: dp" in out.stdout and "recipe: none written" in out.stdout
        assert not list(tmp_path.rglob("recipe_1gpu_resnet18.py"))
        return
    assert "best: single" in out.stdout
    measured = [ln for ln in out.stdout.splitlines() if ln.startswith("  ok: ")]
    # the start and at least one candidate: a budget that started in bf16 held only those two in 30 s on 2 cores
    assert len(stored) >= 2 and len(measured) >= len(stored)
    (manifest,) = tmp_path.rglob("runs/*.json")
    summary = json.loads(manifest.read_text())["recommend"][0]
    assert summary["gpus"] == 1 and summary["best_images_per_s"] > 0
    (script,) = tmp_path.rglob("recipes/recipe_1gpu_resnet18.py")  # named by its model: not the articles' ResNet-50
    assert script.relative_to(tmp_path).parts[1:] == ("recipes", "recipe_1gpu_resnet18.py")  # <machine>/recipes/: the latest
    assert summary["recipe"] == str(script.relative_to(tmp_path))  # inside the results tree, wherever it lies
    assert f"recipe: {script}" in out.stdout  # printed so the user can open it from where they ran the command
    ran = run_script(script, "--warmup", "1", "--steps", "2", "--windows", "2")
    assert ran.returncode == 0, ran.stderr
    figure = float(ran.stdout.split("images/s: ")[1].split()[0])
    assert figure > 0 and "window 2:" in ran.stdout


@pytest.mark.slow
def test_a_ddp_recipe_runs_under_torchrun_on_gloo(tmp_path, tiny):
    case = tiny.replace(strategy="ddp", gpus=2, optimizer_impl="fused", gradient_as_bucket_view=True,
                        broadcast_buffers=False)
    record = {"machine": "cpu-test", "commit_folder": "abc", "run_id": "r1",
              "metrics": {"images_per_s": 100.0, "images_per_s_ci95": [90.0, 110.0], "steps_per_window": 2}}
    path = recipe.write(case, record, "ddp, fp32", tmp_path)
    assert path.name == "recipe_2gpu_resnet18.py" and "torchrun --standalone --nproc-per-node 2" in path.read_text()
    again = recipe.write(case, {**record, "run_id": "r2"}, "ddp, fp32", tmp_path)
    assert again == path and sorted(p.name for p in tmp_path.iterdir()) == ["recipe_2gpu_resnet18.py"]  # the latest only
    assert ", run r2" in path.read_text()
    ran = torchrun_script(path, "--warmup", "1", "--steps", "2", "--windows", "1")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "2 process(es)" in ran.stdout and float(ran.stdout.split("images/s: ")[1].split()[0]) > 0
    assert "FutureWarning" not in ran.stderr  # buffer sync turned off by the keyword this torch knows


def test_the_winner_fed_by_jpegs_is_judged_against_its_synthetic_figure_with_the_noise():
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("batch_size", 128): -20.0, ("batch_size", 512): -20.0,
                       ("precision", "bf16"): -10.0, ("channels_last", False): -40.0,
                       ("loader", "dali"): -3.0, ("loader", "torch"): -30.0})
    out = search(standin).run(BASE, 1, data_dir="/data", with_compile=False)
    assert [(c.case.loader, c.case.optimizer_impl, c.case.min_window_s) for c in out.fed] == \
        [("dali", "fused", recipes.LOADER_WINDOW_S)] * 3 + [("torch", "fused", recipes.LOADER_WINDOW_S)] + \
        [("dali", "fused", recipes.LOADER_WINDOW_S)] * 5
    dali = out.fed[0].case
    assert (dali.dali_device, dali.hw_decoder_load, dali.dali_prefetch_depth) == ("mixed", -1, 2)
    assert dali.dali_handoff == "host" and dali.dali_crop == "resize"  # whole images to the hardware decoder
    assert dali.cuda_max_connections == 32  # CUDA's most hardware work queues from the start
    # a share of each batch decoded on the CPU; DALI on 4 threads; DALI's batches handed to the training
    # stream, its queue, its decoder share, the crop decoded alone and the environment's queues, one at a time
    assert out.fed[1].case == dali.replace(dali_cpu_share=0.3) and out.fed[2].case == dali.replace(dali_threads=4)
    assert out.fed[4].case == dali.replace(dali_handoff="stream")
    assert [(c.case.dali_prefetch_depth, c.case.hw_decoder_load) for c in out.fed[5:7]] == [(3, -1), (2, 1.0)]
    assert out.fed[7].case == dali.replace(dali_crop="decoder")
    assert out.fed[8].case == dali.replace(cuda_max_connections=0)
    assert all(c.case.step_stream == "default" for c in out.fed)  # measured no faster on its own stream
    assert out.fed_best.case == dali and out.fed[0].note == "where the fed search starts"
    text = recommend_text.render([out], 600, {})
    # each fed figure (one process, +-2%) against the synthetic winner's finals (2 processes, +-1.4%)
    assert "97.0% of synthetic; -3.0%: slower (+-2.4%)" in text
    assert "70.0% of synthetic; -30.0%: slower (+-2.4%)" in text
    assert "| JPEGs: dali mixed (fed winner) " in text and "| JPEGs: torch DataLoader " in text
    assert "| JPEGs: dali mixed, queue 3 " in text and "| JPEGs: dali mixed, hw share 1 " in text
    assert "| JPEGs: dali mixed, to the stream " in text and "| JPEGs: dali mixed, crop decoded " in text
    assert "| JPEGs: dali mixed, 4 threads " in text and "| JPEGs: dali mixed, 30% CPU-decoded " in text
    assert "| JPEGs: dali mixed, default queues " in text
    assert "| loader    | fed by JPEGs: dali mixed, queue 3 " in text  # each against the best fed then
    assert max(len(ln) for ln in text.splitlines()) <= 120


def test_the_fed_search_keeps_a_loader_knob_only_beyond_noise_and_tries_each_loader_from_the_winner():
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("loader", "dali"): -12.0, ("dali_prefetch_depth", 3): 8.0,
                       ("hw_decoder_load", 1.0): -5.0, ("loader", "torch"): -40.0, ("dali_handoff", "stream"): -10.0,
                       ("dali_crop", "resize"): 6.0, ("dali_threads", 4): 5.0, ("dali_cpu_share", 0.3): 7.0,
                       ("cuda_max_connections", 32): 4.0})
    out = search(standin).run(BASE, 1, data_dir="/data", with_compile=False)
    best = out.fed_best.case
    assert (best.loader, best.dali_prefetch_depth, best.hw_decoder_load, best.dali_handoff, best.dali_crop,
            best.dali_threads, best.dali_cpu_share, best.cuda_max_connections) == \
        ("dali", 3, -1, "host", "resize", 4, 0.3, 32)
    assert out.fed[0].case.cuda_max_connections == 32 and out.fed[0].note == "where the fed search starts"
    assert out.fed[1].case.dali_cpu_share == 0.3 and out.fed[1].note.startswith("kept, +7.0%: faster")
    # the later knobs build on the queues, the CPU's share and the 4 threads that were kept
    assert (out.fed[1].case.cuda_max_connections, out.fed[2].case.cuda_max_connections) == (32, 32)
    assert out.fed[2].case.dali_threads == 4 and out.fed[2].case.dali_cpu_share == 0.3
    assert out.fed[2].note.startswith("kept, +5.0%: faster") and out.fed[2].against == out.fed[1].case
    torch_fed = out.fed[3].case
    assert torch_fed.loader == "torch" and torch_fed.num_workers == -1 and torch_fed.dali_prefetch_depth == 2
    assert out.fed[3].against == out.best.case and torch_fed.dali_cpu_share == 0  # from the synthetic winner
    assert torch_fed.cuda_max_connections == 0
    assert out.fed[4].case.dali_handoff == "stream" and out.fed[4].case.dali_threads == 4
    assert out.fed[4].note.startswith("-10.0%: slower")
    assert out.fed[5].note.startswith("kept, +8.0%: faster") and out.fed[5].against == out.fed[2].case
    # the decoder's share, the crop decoded alone and the environment's queues were tried on the deeper queue
    assert out.fed[6].against == out.fed[5].case and out.fed[6].case.dali_prefetch_depth == 3
    assert out.fed[7].case.dali_crop == "decoder" and out.fed[7].note.startswith("-5.7%: slower")
    assert out.fed[8].case.cuda_max_connections == 0 and out.fed[8].note.startswith("-3.8%: slower")


def test_a_fed_change_with_no_interval_is_decided_in_fresh_processes():
    # as stored: one process of a real loader has no interval, so a fed change that looks faster is
    # inconclusive until it and the best fed so far ran in 3 fresh processes each (+-1.2% apiece)
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("loader", "dali"): -12.0, ("dali_cpu_share", 0.3): 7.0,
                       ("dali_threads", 4): 1.0, ("loader", "torch"): -40.0, ("dali_prefetch_depth", 3): -1.0},
                      real_loader_alone=True)
    out = search(standin).run(BASE, 1, data_dir="/data", with_compile=False)
    share, threads = out.fed[1], out.fed[2]
    assert share.case.dali_cpu_share == 0.3 and share.note == "kept, +7.0%: faster (+-1.6%) in 3 fresh processes"
    assert recommend.processes_of(share.record) == 3 and recommend.processes_of(share.screening) == 1
    assert threads.note == "+1.0%: within noise (+-1.6%) in 3 fresh processes" and out.fed_best is share
    torch_fed = out.fed[3]
    # (5000 x 1.2 x 0.6 against the kept share's 5000 x 1.2 x 0.88 x 1.07)
    assert torch_fed.note == "-36.3%: inconclusive (no interval)" and torch_fed.screening is None
    confirmed = [(c.loader, c.dali_cpu_share, c.dali_threads, k) for c, k, sweep in standin.calls
                 if sweep == recommend.CONFIRM_SWEEP and c.loader != "synthetic"]
    assert confirmed == [("dali", 0.0, -1, 3), ("dali", 0.3, -1, 3), ("dali", 0.3, 4, 3)]
    # the fed winner already stands on 3 processes: its figure against the synthetic winner has an interval
    assert "| JPEGs: dali mixed, 30% CPU-decoded (fed winner) " in recommend_text.render([out], 600, {})


def test_the_fed_winner_gets_fresh_processes_of_its_own_and_the_time_for_them_is_kept():
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("loader", "dali"): -3.0, ("loader", "torch"): -40.0,
                       ("dali_cpu_share", 0.3): -8.0, ("dali_threads", 4): -6.0}, real_loader_alone=True)
    out = search(standin).run(BASE, 1, data_dir="/data", with_compile=False)
    start = out.fed[0]
    assert out.fed_best is start and recommend.processes_of(start.screening) == 1
    assert recommend.processes_of(start.record) == 3 and start.record["metrics"]["images_per_s_ci95"]
    text = recommend_text.render([out], 600, {})
    # 5000 x 1.2 x 0.97 (3 processes, +-1.2%) against the synthetic winner (+-1.4%): within noise? no, slower
    assert "| JPEGs: dali mixed (fed winner) " in text and "97.0% of synthetic; -3.0%: slower (+-1.8%)" in text
    # 300 s leave the fed search 120 s after the synthetic one: the fed start (30 s) and its 3 fresh processes
    # fit, and are kept for; spent on the next candidates instead, they would have left it one process (seen)
    short = StandIn({("optimizer_impl", "fused"): 20.0, ("loader", "dali"): -3.0}, real_loader_alone=True)
    cut = search(short, budget_s=300.0).run(BASE, 1, data_dir="/data", with_compile=False)
    assert [c.case.dali_cpu_share for c in cut.fed] == [0.0] and short.now <= 300.0
    assert recommend.processes_of(cut.fed_best.record) == 3
    assert any("dali_cpu_share=0.3 (budget)" in s for s in cut.skipped)
    assert not any("fed winner" in s for s in cut.skipped)


def test_a_winner_captured_as_a_cuda_graph_is_also_fed_with_an_eager_step():
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("cuda_graph", True): 10.0, ("loader", "dali"): -3.0,
                       ("loader", "torch"): -30.0})
    out = search(standin).run(BASE, 1, data_dir="/data", with_compile=False)
    assert out.best.case.cuda_graph is True
    eager = [c for c in out.fed if not c.case.cuda_graph]
    assert [(c.case.loader, c.case.optimizer_impl) for c in eager] == [("dali", "fused")]
    assert eager[0].against == out.fed_best.case and out.fed_best.case.cuda_graph is True
    text = recommend_text.render([out], 600, {})
    assert "| JPEGs: dali mixed, eager step " in text and "| JPEGs: torch DataLoader " in text
    # a winner without a graph has no such candidate
    out = search(StandIn({("optimizer_impl", "fused"): 20.0})).run(BASE, 1, data_dir="/data", with_compile=False)
    assert all(c.case.cuda_graph == out.best.case.cuda_graph for c in out.fed)


def test_a_compiled_gpu_winner_is_tried_with_each_kernel_choosing_setting_alone():
    start = recommend.start_case(BASE, 1)
    kernels = dict(recommend.stages(start))["kernels"]
    # not coordinate_descent_tuning: on one H200 its step was still compiling after 162 s
    # nor conv_1x1_as_mm: there it moved the step by +0.7%, -0.1% and +0.2%, each within noise
    assert kernels == [dict(input_channels=4), dict(cudnn_benchmark_limit=0)]
    compiled = start.replace(compile="default", compile_scope="step", optimizer_impl="fused", batch_size=512)
    for change in kernels:  # each a case that validates on the winner it changes
        assert compiled.replace(**change).case_id != compiled.case_id
    cpu_start = recommend.start_case(recipes.CPU_RECOMMEND_BASE, 1)
    assert "kernels" not in dict(recommend.stages(cpu_start))  # cuDNN's limit cannot act there
    assert "kernels" not in dict(recommend.stages(start, with_compile=False))
    # the stand-in search reaches it after the graph and keeps a setting that pays
    out = search(StandIn({("optimizer_impl", "fused"): 3.0, ("compile", "default"): 15.0,
                          ("input_channels", 4): 5.0})).run(BASE, 1)
    tried = [c for c in out.candidates if c.stage == "kernels"]
    assert [(c.case.input_channels, c.case.cudnn_benchmark_limit) for c in tried] == [(4, 10), (4, 0)]
    assert out.best.case.input_channels == 4 and out.best.case.cudnn_benchmark_limit == 10


def test_a_cpu_search_starts_in_fp32_where_the_cpu_computes_no_bf16_itself(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu avx512_bf16\n")
    assert procfs.cpu_flags(cpuinfo) == {"fpu", "sse2", "avx2", "fma"} and not procfs.native_bf16(cpuinfo)
    for flags in ("flags\t\t: avx2 avx512f avx512_bf16", "flags\t\t: amx_tile amx_bf16", "Features\t: fp asimd bf16"):
        cpuinfo.write_text(f"processor\t: 0\n{flags}\n")
        assert procfs.native_bf16(cpuinfo), flags
    assert procfs.cpu_flags(tmp_path / "missing") == set()
    plain = recommend.start_case(recipes.CPU_RECOMMEND_BASE, 1, native_bf16=False)
    native = recommend.start_case(recipes.CPU_RECOMMEND_BASE, 1, native_bf16=True)
    assert (plain.precision, plain.channels_last) == ("fp32", False)
    assert (native.precision, native.channels_last) == ("bf16", True)
    assert plain.replace(precision="bf16", channels_last=True) == native  # nothing else differs
    assert recommend.start_case(BASE, 1, native_bf16=False) == recommend.start_case(BASE, 1, native_bf16=True)
    # bf16 is still tried, with and without NHWC
    tried = dict(recommend.stages(plain, with_compile=False))["precision"]
    assert dict(precision="bf16", channels_last=True) in tried and dict(precision="bf16", channels_last=False) in tried


def test_a_compiled_winner_is_also_tried_with_its_kernels_launched_from_cpp():
    start = recommend.start_case(BASE, 1)
    names = [name for name, _ in recommend.stages(start)]
    # after likelier gains: the graph, the kernel settings and a batch beyond 2x
    assert names.index("wrapper") == names.index("kernels") + 2 == names.index("graph") + 3
    assert names[names.index("kernels") + 1] == "batch"
    cpu_start = recommend.start_case(recipes.CPU_RECOMMEND_BASE, 1)
    assert "wrapper" not in [name for name, _ in recommend.stages(cpu_start)]  # on a CPU the host is the device
    assert "wrapper" not in [name for name, _ in recommend.stages(start, with_compile=False)]
    compiled = start.replace(compile="default", compile_scope="step", optimizer_impl="fused")
    host_bound = {"diagnosis": {"verdict": "host-bound"}}
    assert recommend.host_bound_changes(compiled, host_bound, []) == [dict(loader="synthetic", compile_wrapper="cpp")]
    # never for a fed step that is not host-bound, an eager or C++-launched one, or on a CPU
    assert recommend.host_bound_changes(compiled, {"diagnosis": {"verdict": "input-bound"}}, []) == []
    for winner in (start, compiled.replace(compile_wrapper="cpp"), compiled.replace(device="cpu", precision="bf16")):
        assert recommend.host_bound_changes(winner, host_bound, []) == []
    assert not any("compile_wrapper" in c for _, c in recommend.loader_changes(compiled, "/data"))
    # in the search: the synthetic stage judged on the compiled winner, the fed one, tried only once the
    # fed step is host-bound, on the best fed so far
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("compile", "default"): 12.0, ("loader", "dali"): -15.0,
                       ("dali_threads", 4): 6.0, ("compile_wrapper", "cpp"): -4.0},
                      host_bound=lambda case: case.loader == "dali" and case.dali_threads == 4)
    out = search(standin).run(BASE, 1, data_dir="/data")
    (wrapper,) = [c for c in out.candidates if c.stage == "wrapper"]
    assert wrapper.case.compile_wrapper == "cpp" and wrapper.note.startswith("-4.0%: slower")
    assert out.best.case.compile == "default" and out.best.case.compile_wrapper == "python"
    # right after the 4 threads made it host-bound: the larger batch the search ran (a tie), then C++ launches
    assert [(c.case.batch_size, c.case.compile_wrapper) for c in out.fed[2:5]] == \
        [(256, "python"), (512, "python"), (256, "cpp")]
    fed_cpp = out.fed[4]
    assert fed_cpp.case.dali_threads == 4 and fed_cpp.against == out.fed[2].case
    assert fed_cpp.note.startswith("-4.0%: slower") and out.fed_best.case.compile_wrapper == "python"
    assert [c.case.compile_wrapper for c in out.fed].count("cpp") == 1  # once, though the best stays host-bound
    text = recommend_text.render([out], 600, {})
    assert "| JPEGs: dali mixed, 4 threads, cpp wrapper " in text


def test_a_cpp_wrapper_not_run_yet_is_expected_to_compile_longer():
    standin = StandIn({}, compile_s=90.0)
    finder = search(standin)
    compiled = BASE.replace(name="recommend-compile", compile="default", compile_scope="step")
    finder.measure(compiled.replace(batch_size=128))
    assert finder.estimate(compiled) == pytest.approx(90)
    assert finder.estimate(compiled.replace(compile_wrapper="cpp")) == pytest.approx(90 * 2.5)


def test_a_fed_step_the_host_queues_late_is_tried_at_once_on_a_larger_batch_the_search_ran():
    # batch 256 wins synthetic (384: -3%, 512: -1%); fed at 256 the host is the bound, fed at 512 it is not
    fed_512 = (lambda case: 9.0 if case.loader == "dali" and case.batch_size == 512 else 0.0)
    standin = StandIn({("optimizer_impl", "fused"): 20.0, ("batch_size", 384): -3.0, ("batch_size", 512): -1.0,
                       ("loader", "dali"): -15.0, ("loader", "torch"): -40.0}, extra=fed_512,
                      host_bound=lambda case: case.loader == "dali" and case.batch_size == 256)
    out = search(standin).run(BASE, 1, data_dir="/data", with_compile=False)
    assert out.best.case.batch_size == 256
    assert [c.case.batch_size for c in out.fed[:3]] == [256, 512, 512]  # right after the first, then built on
    assert out.fed[1].against == out.fed[0].case and out.fed[1].note.startswith("kept, +7.9%: faster")
    assert out.fed[2].case.dali_crop == "resize" and out.fed[2].against == out.fed[1].case
    assert out.fed_best.case.batch_size == 512
    # the later DALI knobs build on batch 512; another loader starts from the synthetic winner
    assert {(c.case.loader, c.case.batch_size) for c in out.fed[1:]} == {("dali", 512), ("torch", 256)}
    assert "| JPEGs: dali mixed, batch 512 (fed winner) " in recommend_text.render([out], 600, {})
    # never where the step is not host-bound or no larger batch ran
    assert recommend.host_bound_changes(out.fed[0].case, {"diagnosis": {"verdict": "input-bound"}}, out.candidates) == []
    assert recommend.host_bound_changes(out.fed[1].case, out.fed[0].record, out.candidates) == []  # none above 512


def test_a_change_the_configuration_cannot_take_is_named_not_fatal(monkeypatch):
    # DDP gets no whole-step CUDA graph stage; a change refused by the case's rules is named and skipped
    out = search(StandIn({})).run(BASE, 2, with_compile=False)
    assert not any(c.case.cuda_graph for c in out.candidates) and "graph" not in {c.stage for c in out.candidates}
    monkeypatch.setattr(recommend, "stages", lambda start, with_compile: [("graph", [dict(cuda_graph=True)]),
                                                                          ("optimizer", [dict(optimizer_impl="fused")])])
    out = search(StandIn({("optimizer_impl", "fused"): 9.0})).run(BASE, 1)
    assert any(s.startswith("graph: cuda_graph=True (cannot run here: cuda_graph=true needs optimizer_impl='fused'")
               for s in out.skipped)
    assert out.best.case.optimizer_impl == "fused"


def test_never_answers_slower_than_its_yardsticks():
    """A budget that ends before the search beats the articles' set-ups (here every eager candidate runs
    at a fifth of DataParallel's speed): the fastest configuration measured is the answer, and it says so."""
    standin = StandIn({("strategy", "single"): -80.0, ("strategy", "ddp"): -80.0})
    out = search(standin, budget_s=200.0).run(BASE, 1)
    win = recommend.winner_record(out)
    refs = {k: recommend.figure(r) for k, r in out.references.items() if r}
    assert refs and recommend.figure(win) == max(refs.values()) == pytest.approx(1000.0 * 1.0)
    assert out.best.stage == "yardstick" and out.best.case.strategy == "dp"
    assert "ran faster" in out.best.note and "fastest configuration measured" in out.best.note
    assert out.runner_up is not None and recommend.figure(out.runner_up.record) < recommend.figure(win)
    text = recommend_text.render([out], 200.0, {})
    assert "fastest configuration measured" in text and "best: " in text
    # where the search wins, nothing changes
    fair = search(StandIn({})).run(BASE, 1)
    assert fair.best.stage != "yardstick"


def _fed_record(share=None):
    ranks = [{"hw_decoder_load_used": share}] if share is not None else []
    return {"machine": "1x-nvidia-h200", "commit_folder": "abc", "run_id": "r1", "ranks": ranks,
            "metrics": {"images_per_s": 6900.0, "images_per_s_ci95": [6850.0, 6950.0], "steps_per_window": 30}}


def test_the_jpeg_recipe_names_its_loader_and_writes_the_share_that_ran(tmp_path):
    case = BASE.replace(precision="fp16", channels_last=True, optimizer_impl="fused", cuda_graph=True,
                        compile="default", loader="dali", data_dir="/jpegs", dali_prefetch_depth=3, repeats=10,
                        dali_handoff="stream", step_stream="own", cuda_max_connections=32,
                        inductor_options="conv_1x1_as_mm", cudnn_benchmark_limit=0)
    path = recipe.write(case, _fed_record(0.99), "single, fp16", tmp_path)
    text = path.read_text()
    # the kernels chosen as measured: the Inductor setting by its name, every cuDNN algorithm timed
    assert "'inductor_options': 'conv_1x1_as_mm'," in text and "setattr(inductor_config, name, True)" in text
    assert "'cudnn_benchmark_limit': 0," in text and "torch.backends.cudnn.benchmark_limit = S[" in text
    # the hardware work queues set before torch can start CUDA, as the measured process had them
    assert text.index("os.environ['CUDA_DEVICE_MAX_CONNECTIONS'] = '32'") < text.index("import torch")
    assert "'cuda_max_connections': 32," in text
    assert "'step_stream': 'own'," in text and "torch.cuda.set_stream(torch.cuda.Stream(device))" in text
    assert path.name == "recipe_1gpu_jpeg.py" and "python recipe_1gpu_jpeg.py --data DIR" in text
    assert "'hw_decoder_load': 0.99," in text and "'dali_prefetch_depth': 3," in text and "'cuda_graph': True," in text
    assert "'dali_handoff': 'stream'," in text and "outs = [p.run(stream) for p in pipes]" in text  # to the stream
    assert "'dali_cpu_share': 0.0," in text
    assert "'dali_crop': 'decoder'," in text and "decode only the random crop's region of each JPEG (on the GPU" in text
    assert "through NVIDIA DALI" in text and "num_workers" not in text and "/jpegs" not in text  # no path of ours
    assert 'default=10, help="timed windows"' in text
    compile(text, str(path), "exec")
    synthetic = recipe.write(case.replace(loader="synthetic", data_dir="", dali_prefetch_depth=2, dali_handoff="host",
                                          step_stream="default", cuda_max_connections=0), _fed_record(),
                             "single, fp16", tmp_path)
    assert "'step_stream': 'default'," in synthetic.read_text()
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in synthetic.read_text()  # the environment's, as measured
    assert synthetic.name == "recipe_1gpu.py" and "--data" not in synthetic.read_text().split("import argparse")[0]
    assert "hw_decoder_load" not in synthetic.read_text()
    compile(synthetic.read_text(), str(synthetic), "exec")
    # a share the case set is written as set; a chosen one with no record of it, as DALI's default
    assert "'hw_decoder_load': 0.65," in recipe.render(case, _fed_record(), "x")


JPEG_RECIPES = {"dali": dict(loader="dali", dali_device="cpu"), "torch": dict(loader="torch", num_workers=1),
                "dali-whole": dict(loader="dali", dali_device="cpu", dali_crop="resize", input_channels=4),
                "torch-4ch": dict(loader="torch", num_workers=1, input_channels=4),
                "dali-split": dict(loader="dali", dali_device="cpu", dali_cpu_share=0.5)}
# each recipe run as __main__ in one fresh interpreter (runpy gives each its own globals, so a recipe
# that forgot an import still fails); the imports of torch and DALI are paid once, not five times
RECIPE_RUNNER = """
import contextlib, io, json, runpy, sys, traceback
out = {}
for name, path, args in json.loads(sys.argv[1]):
    sys.argv = [path, *args]
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            runpy.run_path(path, run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    out[name] = {"code": code, "stdout": so.getvalue(), "stderr": se.getvalue()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def jpeg_recipes(tmp_path_factory):
    """Each loader's recipe written for a JPEG folder, then run on it and without --data: name -> (its
    text, the run, the run with no --data)."""
    from bench.data import generate
    from conftest import TINY
    tmp = tmp_path_factory.mktemp("jpeg-recipes")
    data = tmp / "jpegs"
    generate.make_dataset(data, 48, 4, seed=1, workers=2, echo=lambda m: None)
    texts, jobs = {}, []
    for name, knobs in JPEG_RECIPES.items():
        if knobs["loader"] == "dali" and importlib.util.find_spec("nvidia.dali") is None:
            continue
        path = recipe.write(TINY.replace(data_dir=str(data), **knobs), _fed_record(), "single, fp32", tmp / name)
        texts[name] = path.read_text()
        jobs += [(name, str(path), ["--data", str(data), "--warmup", "1", "--steps", "2", "--windows", "2"]),
                 (f"{name} no data", str(path), [])]
    runner = tmp / "run_recipes.py"
    runner.write_text(RECIPE_RUNNER)
    ran = run_script(runner, json.dumps(jobs), timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    runs = json.loads(ran.stdout.splitlines()[-1])
    return {name: (texts[name], runs[name], runs[f"{name} no data"]) for name in texts}


@pytest.mark.slow
@pytest.mark.parametrize("loader", list(JPEG_RECIPES))
def test_a_jpeg_recipe_runs_on_a_jpeg_folder(jpeg_recipes, loader):
    if loader.startswith("dali"):
        pytest.importorskip("nvidia.dali")
    text, ran, missing = jpeg_recipes[loader]
    if loader == "dali-whole":  # whole images decoded, then cropped and resized by one operator
        assert "'dali_crop': 'resize'," in text and "decode whole images (on the CPU)" in text
    if "input_channels" in JPEG_RECIPES[loader]:  # the stem reads a zero fourth channel the loader adds
        assert "'input_channels': 4," in text
    if loader == "dali-split":  # half of each batch from a second pipeline decoding on the CPU
        assert "'dali_cpu_share': 0.5," in text
    assert ran["code"] == 0, ran["stderr"][-2000:]
    assert float(ran["stdout"].split("images/s: ")[1].split()[0]) > 0 and "window 2:" in ran["stdout"]
    assert missing["code"] == 2 and "--data" in missing["stderr"]


@pytest.mark.slow
def test_recommend_with_a_jpeg_folder_on_the_cpu_writes_a_jpeg_recipe_that_runs(recommended):
    out, results, data = recommended
    (manifest,) = results.rglob("runs/*.json")
    summary = json.loads(manifest.read_text())["recommend"][0]
    assert summary["fed"] and summary["fed_best_images_per_s"] > 0, out.stdout
    assert re.search(r"\| loader +\| fed by JPEGs: dali cpu ", out.stdout), out.stdout
    if summary["best_case"]["strategy"] == "dp":  # a DataParallel answer gets no script
        assert summary["jpeg_recipe"] is None
        return
    script = results / summary["jpeg_recipe"]
    assert script.name == "recipe_1gpu_resnet18_jpeg.py" and "recipe fed by JPEGs (dali cpu): " in out.stdout
    ran = run_script(script, "--data", data, "--warmup", "1", "--steps", "2", "--windows", "2")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert float(ran.stdout.split("images/s: ")[1].split()[0]) > 0


@pytest.mark.parametrize("native", [False, True])
def test_a_precision_this_cpu_emulates_is_expected_to_cost_five_fp32_processes(native):
    """Where the CPU has no native bf16, a bf16 candidate's process is expected to take five fp32 ones (one
    expected to take an fp32 one's 2 s took 8-11 s, and spent the share kept for the JPEG-fed winner)."""
    standin = StandIn({}, eager_s=10.0)  # 10 s a process; 5 processes before the precision stage
    out = search(standin, budget_s=70.0, final_processes=0, native_bf16=native).run(sweeps.CPU_BASE, 1,
                                                                                    with_compile=False)
    tried = [(c.case.precision, c.case.channels_last) for c in out.candidates if c.stage == "precision"]
    if native:  # started in bf16; each precision candidate expected to take 10 s: two of them fit
        assert out.candidates[0].case.precision == "bf16" and tried == [("bf16", False), ("fp32", True)]
    else:  # started in fp32; the bf16 candidates expected to take 50 s each, past the 20 s left
        assert out.candidates[0].case.precision == "fp32" and tried == [("fp32", True)]
        assert "precision: precision=bf16, channels_last=True (budget)" in out.skipped
