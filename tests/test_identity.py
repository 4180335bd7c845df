"""Which knobs make two cases the same (core/identity.py): the one definition that case ids, compare,
claims, the recommend search and the pytest front end share."""
import pytest

from bench.analysis import search
from bench.core import identity, sweeps
from bench.core.case import Case
from bench.store import query

AMP_IDS = {  # as stored for 1x H200 at 788257995c58: the move into layers changed no case id
    ("fp32", False): "amp-fp32-resnet50-single-g1-bs256-fp32-synthetic-224px-cuda-94d47d24",
    ("fp16", True): "amp-fp16-resnet50-single-g1-bs256-fp16-cl-synthetic-224px-cuda-2018bddf",
}


def test_case_ids_of_committed_results_are_unchanged():
    built = {(c.precision, c.channels_last): c.case_id for c in sweeps.build("amp", 1)}
    assert {k: built[k] for k in AMP_IDS} == AMP_IDS


def test_knobs_leave_out_how_long_a_case_was_measured_and_its_recipe():
    a = Case(device="cpu", name="single")
    b = a.replace(name="noise-floor", steps=9, repeats=7, min_window_s=2.5, warmup_steps=1, timeout_s=60.0)
    assert identity.differing_fields(a, b) == set() and identity.knobs_key(a) == identity.knobs_key(b)
    assert identity.match_key(a) != identity.match_key(b)  # another recipe is another case across commits
    assert identity.match_key(a) == identity.match_key(b.replace(name="single"))
    assert identity.differing_fields(a, a.replace(precision="bf16", channels_last=True)) == {"precision", "channels_last"}


def test_a_stored_case_from_before_a_knob_existed_reads_it_at_its_default():
    stored = {k: v for k, v in Case(device="cpu").to_dict().items() if k not in identity.ID_OPTIONAL}
    assert identity.differing_fields(stored, Case(device="cpu")) == set()
    assert identity.differing_fields(stored, Case(device="cpu", optimizer_impl="fused")) == {"optimizer_impl"}


def test_recommend_and_the_pytest_front_end_use_the_same_knobs():
    a = Case(device="cpu", name="recommend-start")
    assert search.knobs_key(a) == search.knobs_key(a.replace(name="recommend-batch"))
    assert search.difference(a, a.replace(name="x", batch_size=8, min_window_s=1.0)) == "batch_size=8"
    # the front end's one-GPU partner of a two-rank case: the same knobs but the GPU count
    two = Case(device="cpu", strategy="ddp", gpus=2, name="ddp")
    assert identity.knobs_key(two, ignore={"gpus"}) == identity.knobs_key(two.replace(gpus=1, steps=3), ignore={"gpus"})


@pytest.mark.parametrize("field, value", [("images_per_s", 1234.5), ("ci95", [1200.0, 1269.0])])
def test_a_record_is_typed(field, value):
    d = {"schema": 2, "run_id": "r", "sweep": "s", "case_id": "c", "machine": "m", "commit_folder": "abc-dirty",
         "status": "ok", "case": {"name": "x"}, "started_at": "2026-01-01",
         "metrics": {"images_per_s": 1234.5, "images_per_s_ci95": [1200.0, 1269.0], "images_per_s_per_gpu": 1.0,
                     "spread_pct": 0.0, "data_wait_pct": 0.0, "step_time_median_s": 0.1, "global_batch": 8}}
    r = query.wrap(d)
    assert getattr(r, field) == value and r.dirty and r.commit == "abc-dirty" and r.case["optimizer_impl"] == "default"
    assert query.wrap({**d, "status": "oom", "metrics": {}}).images_per_s is None
