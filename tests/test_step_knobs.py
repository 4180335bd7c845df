"""The knobs of issue 23 that a CPU can check: the hardware decoder's share per GPU, the dtype DALI
delivers, the loss scaler's facts, fresh synthetic labels, and the autocast cache under capture."""
import math

import pytest
import torch

from bench.core.case import Case
from bench.worker import precision
from bench.worker.context import RankContext
from bench.worker.loaders.dali import hw_decoder_share, output_dtype
from bench.worker.loaders.synthetic import SyntheticLoader
from bench.worker.loop import scaler_facts


@pytest.mark.parametrize("name, share", [
    ("NVIDIA H200", 0.99), ("NVIDIA H100 80GB HBM3", 0.99), ("NVIDIA A100-SXM4-80GB", 0.99),
    ("NVIDIA GH200 480GB", 0.99), ("NVIDIA B200", 0.99),
    ("NVIDIA GeForce RTX 3090", 0.65), ("Tesla V100-SXM2-32GB", 0.65), ("NVIDIA A10", 0.65), ("", 0.65),
])
def test_the_hardware_decoder_share_is_chosen_for_the_gpu(name, share):
    got, why = hw_decoder_share(-1, name)
    assert got == share
    assert ("has hardware JPEG decoders" in why) == (share == 0.99)
    assert hw_decoder_share(0.5, name) == (0.5, "set by the case")  # what the case asks, as asked


def test_dali_delivers_what_the_model_reads_first():
    assert output_dtype("fp16", on_gpu=True) == "FLOAT16"
    assert {output_dtype(p, True) for p in ("fp32", "tf32", "bf16")} == {"FLOAT"}
    assert output_dtype("fp16", on_gpu=False) == "FLOAT"  # the CPU path keeps float32


def test_the_default_share_is_chosen_per_gpu_and_the_old_one_is_a_case_of_its_own():
    fed = Case(loader="dali", data_dir="/d")
    assert fed.hw_decoder_load == -1
    assert fed.replace(hw_decoder_load=0.65).case_id != fed.case_id


def test_scaler_facts_count_the_skipped_updates():
    assert scaler_facts(None, None) == {}
    assert scaler_facts(65536.0, 65536.0)["updates_skipped_in_span"] == 0
    assert scaler_facts(65536.0, 8192.0)["updates_skipped_in_span"] == 3  # halved three times
    assert scaler_facts(32768.0, 65536.0)["updates_skipped_in_span"] == 0  # grown after 2,000 clean steps
    assert scaler_facts(1024.0, 0.0)["updates_skipped_in_span"].startswith("all")
    assert math.isclose(scaler_facts(2.0, 1.0)["loss_scale_span"][1], 1.0)


def test_synthetic_labels_are_fresh_every_step_and_the_images_stay():
    case = Case(device="cpu", model="resnet18", num_classes=10, batch_size=64, image_size=32)
    loader = SyntheticLoader(case, RankContext())
    it = iter(loader)
    images, labels = next(it)
    first = labels.clone()
    images2, labels2 = next(it)
    assert images2 is images and labels2 is labels and loader.stable_batches  # the same tensors, refilled
    assert not torch.equal(first, labels2) and int(labels2.max()) < 10 and int(labels2.min()) >= 0


def test_autocast_keeps_its_cache_outside_a_capture():
    with precision.autocast("bf16", "cpu") as ctx:
        assert ctx._cache_enabled in (True, None)
