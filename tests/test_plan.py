"""--dry-run's expected times: stored time outside the windows, plus the windows a case asks for now."""
import json

import pytest

from bench.analysis import plan
from bench.store import query, record, tree
from bench.core.case import Case


def _record(wall_s, windows_s, steps_per_window, settle_steps=0, name="loader-torch", status="ok"):
    """A stored case measured in len(windows_s) processes, each with one rank's windows."""
    return {"schema": record.SCHEMA, "sweep": "loaders", "case_id": f"{name}-x", "status": status, "run_id": "r1",
            "machine": "m", "commit_folder": "abc", "wall_s": wall_s, "case": {"name": name, "gpus": 1},
            "processes": [{"windows_s": [w]} for w in windows_s],
            "ranks": [{"settle_steps_run": settle_steps}],
            "metrics": {"steps_per_window": steps_per_window, "images_per_s_repeats": [1.0] * len(windows_s[0]),
                        "images_per_s": 1.0, "images_per_s_per_gpu": 1.0, "spread_pct": 0.0, "data_wait_pct": 0.0,
                        "step_time_median_s": 0.1, "global_batch": 8}}


def test_a_stored_time_is_split_into_what_windows_cost_and_what_they_do_not():
    # 2 processes of 20 s each; each ran 3 windows of 10 steps (3 s, so 0.1 s a step) after a
    # 10-step settle (1 s): 16 s of each process lies outside the windows
    outside, step_s = plan._parts(_record(40.0, [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], 10, settle_steps=10))
    assert outside == pytest.approx(16.0) and step_s == pytest.approx(0.1)
    # a failed case kept no windows: its whole time is what it costs again
    assert plan._parts({**_record(9.0, [[1.0]], 10), "status": "timeout"}) == (9.0, None)


def test_a_case_with_longer_windows_is_expected_to_take_longer():
    times = {("loader-torch", 1): {"outside_windows_s": 16.0, "step_s": 0.1},
             ("single", 1): {"outside_windows_s": 6.0, "step_s": None}}
    loader = Case(device="cpu", name="loader-torch", loader="torch", data_dir="/d", steps=5, min_window_s=2.5, repeats=10)
    # ten windows and one unmeasured window first, each 2.5 s (longer than 5 steps of 0.1 s)
    assert plan.expected_s(loader, times) == pytest.approx(16.0 + 11 * 2.5)
    # windows bounded by steps where those take longer than min_window_s
    assert plan.expected_s(loader.replace(steps=40, min_window_s=0.0, repeats=2), times) == pytest.approx(16.0 + 3 * 4.0)
    synthetic = Case(device="cpu", name="loader-torch", steps=5, min_window_s=2.5, repeats=10)
    assert plan.expected_s(synthetic, times) == pytest.approx(16.0 + 10 * 2.5)  # no settle window
    assert plan.expected_s(Case(device="cpu", name="single"), times) == 6.0  # no windows stored: as it took
    assert plan.expected_s(Case(device="cpu", name="best"), times) is None


def test_a_runs_noise_floor_processes_give_the_floor_its_expected_time(tmp_path):
    store = tree.Store(tmp_path)
    store.save(_record(40.0, [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], 10, settle_steps=10))
    manifest = store.root / "m" / "abc" / tree.RUNS_DIR / "r1.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"noise_floor": {"process_wall_s": [7.0, 9.0, 8.0], "case": {"name": "noise-floor", "gpus": 1}},
                                    "noise_floor_end": {"process_wall_s": [8.5, 7.5], "case": {"name": "noise-floor", "gpus": 1}}}))
    records, _ = query.load([tmp_path / "m"])
    times = plan.per_process_times(records)
    assert times[("noise-floor", 1)] == {"outside_windows_s": 8.0, "step_s": None, "windows_pct": None}  # median of five processes
    assert times[("loader-torch", 1)] == {"outside_windows_s": pytest.approx(16.0), "step_s": pytest.approx(0.1),
                                          "windows_pct": None}


def test_a_case_with_no_stored_time_is_guessed_from_the_sweeps_phases():
    """Two single processes (4 s and 6 s outside their windows, 0.1 s a micro-batch) and one ddp process
    (12 s outside, its agent and ranks starting, 0.3 s a micro-batch)."""
    taken = [{"launcher": "process", "outside_s": 4.0, "micro_step_s": 0.1},
             {"launcher": "process", "outside_s": 6.0, "micro_step_s": 0.1},
             {"launcher": "torchrun", "outside_s": 12.0, "micro_step_s": 0.3}]
    single = Case(device="cpu", repeats=3, steps=5)
    ddp = single.replace(strategy="ddp", gpus=2)
    # median outside time of its launcher + repeats x steps x the median pace
    assert plan.guess_s(single, taken) == pytest.approx(5.0 + 3 * 5 * 0.1)
    # two ranks of ddp add the no-sync window after the measured ones
    assert plan.guess_s(ddp, taken) == pytest.approx(12.0 + 4 * 5 * 0.1)
    # accumulation multiplies the micro-batches of a window; a real loader adds its unmeasured window
    # and min_window_s bounds a window from below
    assert plan.guess_s(ddp.replace(accumulation_steps=8), taken) == pytest.approx(12.0 + 4 * 40 * 0.1)
    loader = single.replace(loader="torch", data_dir="/d", min_window_s=2.0)
    assert plan.guess_s(loader, taken) == pytest.approx(5.0 + 4 * 2.0)
    assert plan.guess_s(single, []) is None


def test_a_dry_run_expects_the_claim_rounds_from_at_least_two_to_the_budget():
    """Cases measured by the claims' rounds cost their time once a round, wherever they are listed; the
    rounds take MIN_PAIRS rounds at least and the budget at most (never more rounds than allowed)."""
    from bench.present import plan_table
    recs = [query.wrap(_record(10.0, [[1.0]], 10, name=n)) for n in ("a", "b", "c")]  # 9 s outside, 0.1 s a step
    cases = [Case(device="cpu", name=n, steps=10, repeats=1, warmup_steps=0) for n in ("a", "b", "c")]
    per_case = plan.expected_s(cases[0], plan.per_process_times(recs))
    rounds = plan_table.ClaimRounds(1, frozenset(c.case_id for c in cases[:2]), budget_s=600.0, max_rounds=12)
    text = plan_table.render([("s", cases), ("t", cases[:1])], recs, "m", 1, "cpu", 3, 0, rounds)
    flat = " ".join(text.split())
    assert flat.count("/round") == 3  # a twice and b, each once a round
    low, high = 2 * 2 * per_case, min(12 * 2 * per_case, 600.0)
    assert f"(claim rounds) | - | - | {plan_table.duration(low)} to {plan_table.duration(high)}" in flat
    total_low = low + 3 * per_case  # c in 3 processes
    assert f"expected: {plan_table.duration(total_low)} to {plan_table.duration(total_low + high - low)}" in flat
    assert "claim rounds: 1 experiment(s) over 2 case(s)" in flat
