"""Which knobs make two cases the same (core/identity.py): the one definition that case ids, compare,
claims, the recommend search and the pytest front end share."""
import pytest

from pathlib import Path

from bench.analysis import search
from bench.core import identity, labels, recipes, sweeps
from bench.core.case import Case
from bench.store import query

ROOT = Path(__file__).resolve().parent.parent

GOLDEN_IDS = {  # fixed: a change to the id rule or to a recipe that moves one of these breaks history
    "default": "custom-resnet50-single-g1-bs256-fp32-synthetic-224px-cuda-6da0ba3d",
    "amp fp16 cl": "amp-fp16-resnet50-single-g1-bs256-fp16-cl-synthetic-224px-cuda-af5699b0",
    "seed-baseline g2": "seed-baseline-resnet50-dp-g2-bs256-fp32-synthetic-224px-cuda-a827bcf6",
    "seed-optimized g4": "seed-optimized-resnet50-dp-g4-bs256-fp16-synthetic-224px-cuda-1b90ddf1",
    # the hardware decoder's share became chosen per GPU (-1) after 3ea29e9: that id is new; the case at
    # the old 0.65 keeps the old one (test_the_old_dali_default_keeps_its_id)
    "loader-dali-mixed g1": "loader-dali-mixed-resnet50-ddp-g1-bs256-bf16-cl-dali-mixed-224px-cuda-add70b46",
    "loader-torch-only g2": "loader-torch-only-resnet50-ddp-g2-bs256-fp32-cl-torch-loader-only-224px-cuda-49c2fa4f",
    "ddp accumulate no_sync": "ddp-accumulate-no_sync-resnet50-ddp-g2-bs256-bf16-cl-synthetic-acc8-no_sync-224px-cuda-8055bfa5",
    "cpu tiny": "custom-resnet18-single-g1-bs4-fp32-synthetic-32px-cpu-a4994e7b",
}


def _golden_cases() -> dict:
    gpu = recipes.GPU_BASE
    return {"default": Case(),
            "amp fp16 cl": next(c for c in sweeps.amp_sweep(1) if c.precision == "fp16" and c.channels_last),
            "seed-baseline g2": recipes.seed_baseline(gpu, 2), "seed-optimized g4": recipes.seed_optimized(gpu, 4),
            "loader-dali-mixed g1": recipes.loader_case(gpu.replace(data_dir="/d"), 1, "dali", "mixed"),
            "loader-torch-only g2": recipes.loader_case(gpu.replace(data_dir="/d"), 2, "torch", loader_only=True),
            "ddp accumulate no_sync": recipes.accumulation(gpu, 2, "no_sync"),
            "cpu tiny": Case(device="cpu", model="resnet18", num_classes=10, batch_size=4, image_size=32)}


def test_golden_case_ids():
    assert {k: c.case_id for k, c in _golden_cases().items()} == GOLDEN_IDS


def test_the_old_dali_default_keeps_its_id():
    fed = _golden_cases()["loader-dali-mixed g1"]
    assert fed.hw_decoder_load == -1
    assert fed.replace(hw_decoder_load=0.65).case_id.endswith("-2e5bf95f")


def test_dali_hand_over_to_the_stream_is_a_knob_of_its_own():
    fed = _golden_cases()["loader-dali-mixed g1"]
    # a record stored before the knob ran DALI's iterator, the default: its id is unchanged
    stored = {k: v for k, v in fed.to_dict().items() if k != "dali_handoff"}
    assert fed.dali_handoff == "host" and identity.case_id(stored) == fed.case_id
    streamed = fed.replace(dali_handoff="stream")
    assert streamed.case_id != fed.case_id and identity.differing_fields(fed, streamed) == {"dali_handoff"}


def test_where_dali_cuts_the_crop_is_a_knob_of_its_own():
    fed = _golden_cases()["loader-dali-mixed g1"]
    stored = {k: v for k, v in fed.to_dict().items() if k != "dali_crop"}
    assert fed.dali_crop == "decoder" and identity.case_id(stored) == fed.case_id  # stored before the knob
    whole = fed.replace(dali_crop="resize")
    assert whole.case_id != fed.case_id and identity.differing_fields(fed, whole) == {"dali_crop"}
    assert "/whole-decode" in labels.describe(whole.to_dict()) and "whole" not in labels.describe(fed.to_dict())


@pytest.mark.parametrize("field, value, label", [("step_stream", "own", ", own stream,"),
                                                ("dali_cpu_share", 0.3, "/cpu-decodes0.3"),
                                                ("cuda_max_connections", 32, ", 32 CUDA connections,")])
def test_a_knob_added_later_keeps_stored_ids_and_is_named_where_set(field, value, label):
    fed = _golden_cases()["loader-dali-mixed g1"]
    stored = {k: v for k, v in fed.to_dict().items() if k != field}
    assert identity.case_id(stored) == fed.case_id  # a record stored before the knob ran its default
    changed = fed.replace(**{field: value})
    assert changed.case_id != fed.case_id and identity.differing_fields(fed, changed) == {field}
    assert label in labels.describe(changed.to_dict()) and label not in labels.describe(fed.to_dict())


def test_a_feed_rank_of_the_torch_loader_leaves_normalizing_to_the_gpu_under_an_id_of_its_own():
    from bench.core.feed_cases import feed_case
    from bench.core.errors import CaseError
    base = recipes.GPU_BASE.replace(device="cpu", data_dir="/d")
    torch_rank, dali_rank = feed_case(base, "torch", 2, False), feed_case(base, "dali-cpu", 2, False)
    assert torch_rank.host_side_only and not dali_rank.host_side_only  # DALI's CPU pipeline normalizes on the host
    stored = {k: v for k, v in torch_rank.to_dict().items() if k != "host_side_only"}  # the first feed records
    assert "-loader-only-host-side-224px-cpu-" in torch_rank.case_id and "host-side" not in identity.case_id(stored)
    assert identity.differing_fields(stored, torch_rank) == {"host_side_only"}
    assert "uint8 batches (normalizing left to the GPU)" in labels.describe(torch_rank.to_dict())
    for wrong in (dali_rank, torch_rank.replace(host_side_only=False, loader_only=False), torch_rank.replace(
            host_side_only=False, device="cuda")):
        with pytest.raises(CaseError, match="host_side_only=True does nothing here .host_side_only needs "):
            wrong.replace(host_side_only=True)


def test_the_compiled_kernels_launched_from_cpp_is_a_knob_of_its_own():
    compiled = Case(precision="fp16", channels_last=True, compile="default", compile_scope="step")
    stored = {k: v for k, v in compiled.to_dict().items() if k != "compile_wrapper"}
    assert compiled.compile_wrapper == "python" and identity.case_id(stored) == compiled.case_id  # stored before it
    cpp = compiled.replace(compile_wrapper="cpp")
    assert "-compile-default-step-cpp-" in cpp.case_id and "-cpp-" not in compiled.case_id
    assert identity.differing_fields(compiled, cpp) == {"compile_wrapper"}
    assert "compile:default/step/cpp-wrapper" in labels.describe(cpp.to_dict())
    assert "cpp" not in labels.describe(compiled.to_dict())


def test_every_case_field_has_its_id_default():
    assert set(identity.ID_DEFAULTS) == set(Case().to_dict())


def test_a_knob_added_with_its_default_changes_no_id():
    stored = Case().to_dict()
    newer = {**stored, "a_knob_added_later": 7}
    identity.ID_DEFAULTS["a_knob_added_later"] = 7
    try:
        assert identity.case_id(newer) == identity.case_id(stored) == GOLDEN_IDS["default"]
        assert identity.case_id({**newer, "a_knob_added_later": 8}) != GOLDEN_IDS["default"]
    finally:
        del identity.ID_DEFAULTS["a_knob_added_later"]


def test_how_long_it_was_measured_where_its_data_lies_and_idle_knobs_stay_out_of_the_id():
    amp = _golden_cases()["amp fp16 cl"]
    assert amp.replace(min_window_s=5.0, repeats=10, warmup_steps=2).case_id == amp.case_id
    assert identity.case_id({**amp.to_dict(), "data_dir": "/jpegs"}) == amp.case_id
    assert identity.case_id({**amp.to_dict(), "dali_threads": 4}) == amp.case_id  # an old default, idle here
    fed = _golden_cases()["loader-dali-mixed g1"]
    assert fed.replace(data_dir="/elsewhere").case_id == fed.case_id and fed.replace(dali_threads=4).case_id != fed.case_id


def test_every_id_the_committed_results_were_stored_under_maps_to_its_case():
    """The amp fp16 + channels_last case was stored under three ids on 1x H200 (schema 1, a data folder
    in the id, the optional knobs); read today, all are one case."""
    records = query.load([ROOT / "results" / "1x-nvidia-h200"])[0]
    stored = {r.stored_id.rsplit("-", 1)[1] for r in records if r.case_id == GOLDEN_IDS["amp fp16 cl"]}
    assert stored >= {"b673df1f", "2018bddf", "5793c3eb"}
    assert {r.commit for r in records if r.case_id == GOLDEN_IDS["amp fp16 cl"]} >= {
        "e7f7ea4721d5", "10cf292d725e", "4c0ef90f62f5", "788257995c58"}


def test_knobs_leave_out_how_long_a_case_was_measured_and_its_recipe():
    a = Case(device="cpu", name="single")
    b = a.replace(name="noise-floor", steps=9, repeats=7, min_window_s=2.5, warmup_steps=1, timeout_s=60.0)
    assert identity.differing_fields(a, b) == set() and identity.knobs_key(a) == identity.knobs_key(b)
    assert a.case_id != b.case_id  # another recipe is another case across commits
    assert a.case_id == b.replace(name="single").case_id
    assert identity.differing_fields(a, a.replace(precision="bf16", channels_last=True)) == {"precision", "channels_last"}


def test_a_stored_case_from_before_a_knob_existed_reads_it_at_its_default():
    stored = {k: v for k, v in Case(device="cpu").to_dict().items() if k not in ("optimizer_impl", "compile_scope")}
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


def test_every_committed_record_with_the_same_recipe_and_knobs_has_one_id():
    """What makes history comparable across commits: compare pairs by id, and the id follows the knobs."""
    ids: dict = {}
    for r in query.load([ROOT / "results"])[0]:
        ids.setdefault((r.machine, r.case["name"], identity.knobs_key(r.case)), set()).add(r.case_id)
    assert len(ids) > 50 and all(len(v) == 1 for v in ids.values())
