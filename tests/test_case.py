import json

import pytest

from bench.case import Case, CaseError


@pytest.mark.parametrize("changes, field, accepted", [
    ({"strategy": "fsdp"}, "strategy", "single, dp, ddp"),
    ({"precision": "fp8"}, "precision", "fp32, tf32, bf16, fp16"),
    ({"loader": "ffcv"}, "loader", "synthetic, torch, dali"),
    ({"device": "tpu"}, "device", "cuda, cpu"),
    ({"model": "vit"}, "model", "resnet50"),
    ({"dali_device": "gpu"}, "dali_device", "mixed, cpu"),
    ({"accumulation_mode": "sometimes"}, "accumulation_mode", "article, no_sync"),
    ({"dp_device_selection": "random"}, "dp_device_selection", "default, free_memory"),
])
def test_bad_choice_names_field_and_accepted_values(changes, field, accepted):
    with pytest.raises(CaseError) as e:
        Case(**changes)
    msg = str(e.value)
    assert msg.startswith(f"{field}=") and accepted in msg and "\n" not in msg


@pytest.mark.parametrize("changes, needle", [
    ({"batch_size": 0}, "batch_size=0 must be >= 1"),
    ({"gpus": 0}, "gpus=0 must be >= 1"),
    ({"steps": 2.5}, "steps=2.5 must be a whole number"),
    ({"image_size": 16}, "image_size=16 must be >= 32"),
    ({"channels_last": "yes"}, "channels_last='yes' must be true or false"),
    ({"hw_decoder_load": 1.5}, "hw_decoder_load=1.5 must be between 0 and 1"),
    ({"device": "cpu", "precision": "tf32"}, "precision='tf32' needs device='cuda'"),
    ({"strategy": "single", "gpus": 2}, "gpus=2 with strategy='single'"),
    ({"device": "cpu", "strategy": "dp", "gpus": 2}, "gpus=2 with strategy='dp' on device='cpu'"),
    ({"loader": "torch"}, "loader='torch' needs data_dir"),
    ({"persistent_workers": True}, "persistent_workers=true needs num_workers >= 1"),
    ({"accumulation_steps": 4}, "accumulation_steps=4 is measured with strategy='ddp' only"),
    ({"strategy": "dp", "gpus": 2, "dp_output_device": 2}, "dp_output_device=2 must be -1 or an index below gpus=2"),
    ({"dp_loss_in_forward": True}, "apply to strategy='dp' only"),
    ({"strategy": "ddp", "nccl_env": (("GLOO_X", "1"),)}, "name starts with NCCL_"),
    ({"strategy": "dp", "compile": "default"}, "compile with strategy='dp'"),
    ({"fault": "crash", "fault_rank": 1}, "fault_rank=1 must be below gpus=1"),
])
def test_impossible_combinations_are_rejected(changes, needle):
    with pytest.raises(CaseError, match=None) as e:
        Case(**changes)
    assert needle in str(e.value)


def test_derived_sizes():
    c = Case(strategy="ddp", gpus=4, batch_size=256, accumulation_steps=8)
    assert c.global_batch == 1024
    assert c.images_per_step == 8192
    assert c.launcher == "torchrun"
    assert Case(strategy="dp", gpus=2).launcher == "process"


def test_case_id_is_stable_readable_and_distinct():
    a = Case(strategy="ddp", gpus=2, precision="bf16", channels_last=True)
    assert a.case_id == Case(strategy="ddp", gpus=2, precision="bf16", channels_last=True).case_id
    assert a.case_id.startswith("custom-resnet50-ddp-g2-bs256-bf16-cl-synthetic-224px-cuda-")
    assert a.case_id != a.replace(bucket_cap_mb=50.0).case_id  # a knob outside the label still counts


def test_json_round_trip_and_unknown_fields():
    c = Case(strategy="ddp", gpus=2, nccl_env=(("NCCL_IB_DISABLE", "1"),))
    again = Case.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.case_id == c.case_id
    with pytest.raises(CaseError, match="unknown case field.*colour"):
        Case.from_dict({**c.to_dict(), "colour": "red"})
