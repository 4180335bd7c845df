"""Profiled steps after the windows (`profile_steps`): the per-lane summary by hand, the profiler on
the CPU, and the lines a user reads."""
import pytest

from bench.core import identity
from bench.core.case import Case, CaseError
from bench.core.labels import profile_text
from bench.worker import profile_steps
from bench.worker.context import RankContext
from bench.worker.loaders.synthetic import SyntheticLoader
from bench.worker.trainer import Trainer

MS = 1_000_000


def test_union_counts_overlap_once():
    assert profile_steps.union_ns([]) == 0
    assert profile_steps.union_ns([(0, 10), (5, 15), (20, 30), (22, 25)]) == 25
    assert profile_steps.union_ns([(20, 30), (0, 10)]) == 20


def test_lanes_by_hand():
    # two steps; stream 7 trains (two kernels of 30 ms each step, back to back), stream 21 resizes for 10 ms a
    # step while stream 7 runs, then holds the device alone for 5 ms before each step
    events = []
    for step in range(2):
        t = step * 70 * MS
        events += [("conv", 7, t + 5 * MS, 30 * MS), ("bn", 7, t + 35 * MS, 30 * MS),
                   ("Resize", 21, t, 5 * MS), ("Resize", 21, t + 10 * MS, 5 * MS)]
    s = profile_steps.summarize(events, 2, "cuda stream")
    assert s["span_s"] == pytest.approx(0.135) and s["lane_kind"] == "cuda stream"
    assert s["busy_pct"] == pytest.approx(100 * 130 / 135)  # idle only between 65 and 70 ms
    train, dali = s["lanes"]
    assert train["lane"] == 7 and train["busy_s_per_step"] == pytest.approx(0.060)
    assert train["top"] == [["conv", pytest.approx(0.030)], ["bn", pytest.approx(0.030)]]
    assert dali["lane"] == 21 and dali["busy_s_per_step"] == pytest.approx(0.010) and dali["events_per_step"] == 2
    assert dali["busy_pct"] == pytest.approx(100 * 20 / 135)
    assert profile_steps.summarize([], 3, "cuda stream")["lanes"] == []


def test_profiled_steps_on_the_cpu_and_their_lines():
    case = Case(device="cpu", model="resnet18", num_classes=4, image_size=32, batch_size=2, profile_steps=2)
    ctx = RankContext()
    trainer = Trainer(case, ctx)
    batches = iter(SyntheticLoader(case, ctx))
    trainer.step(batches)
    p = profile_steps.run(trainer, batches, ctx, 2)
    assert "error" not in p and p["steps"] == 2 and p["lane_kind"] == "host thread"
    assert p["lanes"] and 0 < p["lanes"][0]["busy_s_per_step"] <= p["span_s"] <= p["wall_s"]
    assert any(name.startswith("aten::") for name, _ in p["lanes"][0]["top"])
    text = profile_text({"ranks": [{"profile": p}]})
    assert text.startswith("\n  profile, 2 steps after the windows") and "host thread" in text
    assert profile_text({"ranks": [{}]}) == ""
    assert "not taken (RuntimeError: no CUPTI)" in profile_text({"ranks": [{"profile": {"steps": 2, "error": "RuntimeError: no CUPTI"}}]})


def test_stream_lines_read_as_a_user_needs_them():
    p = profile_steps.summarize([("conv", 7, 0, 60 * MS), ("dali::Resize", 21, 0, 9 * MS)], 1, "cuda stream")
    text = profile_text({"ranks": [{"profile": {**p, "wall_s": 0.07}}]})
    assert "device busy 100% of 60 ms" in text
    assert "cuda stream 7: 60.0 ms a step (100%)\n        60.0 ms  conv\n" in text
    assert "cuda stream 21: 9.0 ms a step (15%)\n         9.0 ms  dali::Resize" in text
    # on a GPU the host threads' time in torch's ops and CUDA calls follows the streams
    host = profile_steps.summarize([("cudaLaunchKernel", 4242, 0, 50 * MS), ("aten::add", 4242, 40 * MS, 20 * MS)], 1,
                                   "host thread")
    lines = profile_text({"ranks": [{"profile": {**p, "wall_s": 0.07, "host": host}}]}).splitlines()
    assert lines[-3:] == ["    host thread 4242: 60.0 ms a step (100%)", "        50.0 ms  cudaLaunchKernel",
                          "        20.0 ms  aten::add"]
    assert lines[-5].startswith("    cuda stream 21:")
    long = profile_steps.summarize([("k" * profile_steps.NAME_CHARS, 7, 0, 60 * MS)], 1, "cuda stream")
    assert max(len(ln) for ln in profile_text({"ranks": [{"profile": long}]}).splitlines()) <= 120


def test_profiling_changes_no_id_and_is_refused_below_zero():
    assert Case(profile_steps=5).case_id == Case().case_id
    assert identity.knobs_key(Case(profile_steps=5)) == identity.knobs_key(Case())
    with pytest.raises(CaseError, match="profile_steps=-1 must be >= 0"):
        Case(profile_steps=-1)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_report_shows_each_profiled_case(lang):
    from bench.present import report
    from bench.store import query
    from stored import fixture_dicts
    recs = fixture_dicts()
    p = profile_steps.summarize([("conv", 7, 0, 60 * MS), ("dali::Resize", 21, 0, 9 * MS)], 1, "cuda stream")
    recs[0]["ranks"] = [{**(recs[0].get("ranks") or [{}])[0], "profile": p}]
    records = [query.wrap(r) for r in recs]
    text = report.render(records, lang)
    head = "## Where the device's time went" if lang == "en" else "## 剖析步中设备时间的去向"
    assert head in text and f"- {records[0].case_id}\n  profile, 1 steps after the windows" in text
    assert "cuda stream 21: 9.0 ms a step (15%)\n         9.0 ms  dali::Resize" in text
    assert head not in report.render([query.wrap(r) for r in fixture_dicts()], lang)  # none profiled: no section
