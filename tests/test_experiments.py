"""Claims as experiments: pairs found by identity, judged by their own interleaved pairs, stored with
the run and read back as each machine's answers."""
import io
import json
from pathlib import Path

import pytest

from bench.analysis import answers, experiments
from bench.core import paired, sweeps
from bench.core.case import Case
from bench.core.verdicts import FAILS, HOLDS, INCONCLUSIVE, interval_verdict
from bench.store import query
from stored import committed_machines, ok_process

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.mark.parametrize("low, high, verdict", [
    (0.2, 0.6, FAILS),            # above zero, but wholly within +-3%: the promised speed-up is not there
    (1.0, 4.0, HOLDS),            # above zero, and reaching past +3%
    (-5.0, -1.0, FAILS),          # below zero
    (-2.2, 2.8, FAILS),           # wholly within +-3%: no effect worth having
    (-7.6, 39.6, INCONCLUSIVE),   # the DALI pair after three pairs on one H100
])
def test_the_interval_decides_as_the_issue_states(low, high, verdict):
    assert interval_verdict(low, high, 3.0) == verdict


def test_a_claim_judged_by_its_own_pairs_says_what_more_pairs_would_take():
    # ln ratios 0.222, 0.093, 0.067 (the DALI pair's first three on one H100): +13.6% inside -7.6%..+39.6%
    a, b = [3348.0, 3714.4, 3977.4], [4181.1, 4075.0, 4254.3]
    j = paired.claim_judgement(a, b, 3.0)
    assert j["claim_verdict"] == INCONCLUSIVE and j["ci95_pct"][0] < 0 < j["ci95_pct"][1]
    assert j["more_pairs"] == 2  # five pairs at that spread clear zero
    assert paired.claim_judgement(a + [3400.0, 3500.0], b + [4200.0, 4250.0], 3.0)["claim_verdict"] == HOLDS


def test_the_one_gpu_claims_sweep_holds_the_five_claims_each_a_pair_differing_in_its_knobs_alone():
    cases = sweeps.build("claims", 1, data_dir="/data")
    found = {e.claim.id: (e.before.name, e.after.name) for e in experiments.find(cases)}
    assert found == {"workers": ("ablation-00-baseline", "ablation-01-num-workers"),
                     "pin-memory": ("ablation-01-num-workers", "ablation-02-pin-memory"),
                     "non-blocking": ("ablation-02-pin-memory", "ablation-03-non-blocking"),
                     "amp": ("ablation-03-non-blocking", "ablation-07-amp-fp16"),
                     "dali": ("ablation-10-cudnn-benchmark", "ablation-11-dali-mixed")}
    used = {c.case_id for e in experiments.find(cases) for c in (e.before, e.after)}
    assert used == {c.case_id for c in cases}  # nothing measured that no claim needs


def test_on_two_gpus_every_claim_but_the_seed_table_has_its_pair():
    cases = sweeps.build("claims", 2, data_dir="/data")
    found = {e.claim.id for e in experiments.find(cases)}
    assert len(found) == 12 and "seed-table" not in found
    used = {c.case_id for e in experiments.find(cases) for c in (e.before, e.after)}
    assert used == {c.case_id for c in cases}


def test_pairs_are_found_by_identity_and_the_right_way_round():
    base = Case(device="cpu", batch_size=2, image_size=32)
    fp32, bf16, other = base.replace(name="x"), base.replace(name="y", precision="bf16"), \
        base.replace(name="z", precision="bf16", channels_last=True)
    found = experiments.find([bf16, other, fp32])
    assert [(e.claim.id, e.before.name, e.after.name) for e in found] == [("amp", "x", "y")]  # z differs in more


def _stand_in(monkeypatch, figures: dict):
    """records.run_case answering each case's next figure from `figures` (by recipe name)."""
    from bench.harness import records
    ran = []

    def fake_run(case, dist=None, then=None, **_):
        ran.append(case.name)
        return ok_process(figures[case.name].pop(0), wall_s=1.0, repeats=2)
    monkeypatch.setattr(records, "run_case", fake_run)
    monkeypatch.setattr(records, "diagnose", lambda record, peak: {})
    monkeypatch.setenv("BENCH_SKIP_PEAK", "1")
    return ran


def test_rounds_interleave_reverse_stop_per_claim_and_store_verdicts_in_the_manifest(tmp_path, monkeypatch):
    from bench.harness.experiments import run_experiments
    from bench.harness.run import Run
    from bench.store import query
    from bench.store.tree import Store
    base = Case(device="cpu", batch_size=2, image_size=32, name="a")
    a, b, c = base, base.replace(name="b", precision="bf16"), base.replace(name="c", precision="bf16", channels_last=True)
    # amp (a -> b) is steady at +10% and decides after two pairs; nothing else is a claim here
    ran = _stand_in(monkeypatch, {"a": [100.0, 101.0, 100.0], "b": [110.0, 111.1, 110.0]})
    with Run(Store(tmp_path), out=io.StringIO()) as run:
        stored = run_experiments(run, experiments.find([a, b, c]), [a, b, c], {a.case_id: "s", b.case_id: "s"}, 60)
    assert ran == ["a", "b", "b", "a"]  # A, B, then B, A: each round reversed
    manifest = json.loads(next((tmp_path).rglob("runs/*.json")).read_text())
    (en,) = manifest["claims"]
    assert en["claim"] == "amp" and en["status"] == "decided" and en["verdict"] == HOLDS
    assert en["pairs"] == [[100.0, 110.0], [101.0, 111.1]] and en["ci95_pct"][0] > 0
    assert set(stored) == {a.case_id, b.case_id} and stored[a.case_id]["measured_as_claim"]
    recs = query.load([tmp_path])[0]
    assert {len(r.data["processes"]) for r in recs} == {2}
    (ans,) = [x for x in answers.answers(recs) if x.claim.id == "amp"]
    assert ans.verdict == HOLDS and str(ans.latest.basis) == "2 pair(s)" and ans.latest.runs == (run.run_id,)


def test_a_failed_side_ends_its_experiment_with_the_reason(tmp_path, monkeypatch):
    from bench.harness import records
    from bench.harness.experiments import run_experiments
    from bench.harness.run import Run
    from bench.store.tree import Store
    base = Case(device="cpu", batch_size=2, image_size=32, name="a")
    a, b = base, base.replace(name="b", precision="bf16")
    monkeypatch.setattr(records, "run_case", lambda case, dist=None, then=None, **_: {
        "status": "oom", "reason": "out of memory", "wall_s": 1.0, "ranks": [], "metrics": {}})
    monkeypatch.setenv("BENCH_SKIP_PEAK", "1")
    with Run(Store(tmp_path), out=io.StringIO()) as run:
        stored = run_experiments(run, experiments.find([a, b]), [a, b], {a.case_id: "s", b.case_id: "s"}, 60)
        (en,) = run.manifest["claims"]
    assert en["status"] == "failed" and "out of memory" in en["reason"] and en["verdict"] is None
    assert {r["status"] for r in stored.values()} == {"oom"}  # each case stored with its reason


def test_a_pair_of_one_recipe_name_is_labelled_by_the_knobs_it_changed(tmp_path, monkeypatch):
    """The smoke sweep's amp pair is `single` on both sides: its line says which precision each ran."""
    from bench.harness.experiments import line, run_experiments
    from bench.harness.run import Run
    from bench.store.tree import Store
    a = Case(device="cpu", batch_size=2, image_size=32, name="single")
    b = a.replace(precision="bf16")
    _stand_in(monkeypatch, {"single": [100.0, 110.0, 110.0, 100.0]})
    with Run(Store(tmp_path), out=io.StringIO()) as run:
        run_experiments(run, experiments.find([a, b]), [a, b], {a.case_id: "s", b.case_id: "s"}, 60, max_rounds=2)
        (en,) = run.manifest["claims"]
        text = line(run.manifest, en)
    assert text.startswith("amp: single (fp32) -> single (bf16), 1 GPU(s)")
    (ans,) = [x for x in answers.answers(query.load([tmp_path])[0]) if x.claim.id == "amp"]
    assert str(ans.latest.pair) == "single (fp32) -> single (bf16), 1 GPU(s)"


def test_the_committed_results_answer_per_machine_with_the_latest_decided_verdict(capsys):
    """No GPU needed: workers and amp hold on one H200 (stored pairs with their own intervals, naming the
    commit), and one H100's make bench decided all five one-GPU claims by its own pairs."""
    from bench.cli.main import main
    assert main(["claims", "--machine", "1x-nvidia-h200"]) == 0
    out = capsys.readouterr().out
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]] for ln in out.splitlines()
            if ln.startswith("| ") and not ln.startswith("| claim")}
    assert rows["workers"][0] == HOLDS and rows["workers"][2] == "a5931b489a5e"
    assert rows["amp"][0] == HOLDS and rows["amp"][2] == "a5931b489a5e"
    for claim in ("workers", "pin-memory", "non-blocking", "amp", "dali"):
        assert rows[claim][0] != "cannot be measured here", claim  # a stored pair exists for each
    assert main(["claims", "--machine", "1x-nvidia-h100-80gb-hbm3"]) == 0
    out = capsys.readouterr().out
    verdicts = {"workers": "holds", "pin-memory": "holds", "non-blocking": "does not hold", "amp": "holds",
                "dali": "holds"}  # the latest make bench, at 6b45861ecaf0, decided all five by its own pairs
    for claim, verdict in verdicts.items():
        line = next(ln for ln in out.splitlines() if ln.startswith(f"| {claim} "))
        assert f"| {verdict} " in line and "6b45861ecaf0" in line, line
    # +0.2% (-0.7% to +1.1%) lies within +-3%; the run before froze +0.3% (+0.2% to +0.5%) as `holds` under the
    # rule of its day, which today's reads as no effect worth having: the two agree, and no earlier one disagrees
    assert "Earlier:" not in " ".join(out.split()).split("- non-blocking:")[1].split("- ")[0]
    assert main(["claims", "--machine", "1x-nvidia-h100-80gb-hbm3", "--run", "20261206T050207Z-d2a6"]) == 0
    pinned = " ".join(capsys.readouterr().out.split())
    assert "| non-blocking | does not hold | +0.3% (+0.2% to +0.5%) |" in pinned
    assert ("judged by 2 interleaved pair(s) of fresh processes in run 20261206T050207Z-d2a6; judged `holds` when "
            "measured, by the rule of that day (an interval above zero held however small); today's rule reads the "
            "same interval as `does not hold`") in pinned
    for claim in ("workers", "pin-memory", "amp", "dali"):  # pinning a run keeps its verdicts
        assert f"| {claim} | holds |" in pinned, claim


def test_bench_report_leads_with_the_answers_within_120_columns(capsys):
    from bench.cli.main import main
    assert main(["report", "--no-files", "--machine", "1x-nvidia-h200"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## 1x-nvidia-h200: the answers")
    assert "baseline (article)" in out and "(183.2)" in out and "(698.3)" in out  # the article's figures beside
    assert "912.9 +-1.5% (183.2)" in out and "+222.6% +-2.2% (-)" in out  # the improvement with its noise
    assert max(len(ln) for ln in out.splitlines()) <= 120
    assert "# 1x-nvidia-h200, commit" not in out  # the commits' details only with --all
    assert main(["report", "--no-files", *map(str, committed_machines())]) == 0
    whole = capsys.readouterr().out
    first = whole.splitlines()[0]
    assert first.endswith(": the answers (latest evidence from 9 commit(s))")  # the newest machine first: one H100
