"""What a CPU can check of the JPEG-fed and whole-step knobs: the hardware decoder's share per GPU, the
dtype DALI and the synthetic batch are delivered in, the loss scaler's facts and the refusal of a span that never updated, fused SGD's
momentum buffers, the synthetic batch a captured step reads, and the autocast cache outside a capture."""
import math

import pytest
import torch

from bench.core.case import Case
from bench.worker import precision
from bench.worker.context import RankContext
from bench.worker.loaders.dali import hw_decoder_share, output_dtype
from bench.worker.loaders import synthetic
from bench.worker.loaders.common import half_input
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


def test_the_synthetic_batch_comes_in_the_dtype_dali_delivers(monkeypatch):
    # the same rule for both, so a fed step and its synthetic ceiling run one compiled program
    assert [half_input(p, on_gpu=True) for p in ("fp16", "bf16", "tf32", "fp32")] == [True, False, False, False]
    assert not half_input("fp16", on_gpu=False)
    case = Case(device="cpu", model="resnet18", num_classes=10, batch_size=4, image_size=32, precision="bf16")
    loader = SyntheticLoader(case, RankContext())
    assert next(iter(loader))[0].dtype == torch.float32 and loader.facts()["loader_dtype"] == "float"
    monkeypatch.setattr(synthetic, "half_input", lambda precision, on_gpu: True)  # as fp16 on a GPU rules
    loader = SyntheticLoader(case, RankContext())
    images = next(iter(loader))[0]
    assert images.dtype == torch.float16 and loader.facts()["loader_dtype"] == "float16"
    assert images.shape == (4, 3, 32, 32) and images.float().std().item() > 0.5  # the same random batch


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


def test_the_synthetic_batch_is_the_same_tensors_every_step():
    case = Case(device="cpu", model="resnet18", num_classes=10, batch_size=8, image_size=32)
    loader = SyntheticLoader(case, RankContext())
    it = iter(loader)
    images, labels = next(it)
    first = labels.clone()
    images2, labels2 = next(it)
    # a captured step reads them where they lie, with no copy
    assert images2 is images and labels2 is labels and loader.stable_batches and torch.equal(first, labels2)


def test_autocast_keeps_its_cache_outside_a_capture():
    with precision.autocast("bf16", "cpu") as ctx:
        assert ctx._cache_enabled in (True, None)


def test_a_span_whose_every_update_was_skipped_is_refused():
    from bench.worker.loop import NotTraining, check_training
    check_training(None, None, 100)  # no loss scaler: bf16, fp32
    check_training(16384.0, 16384.0, 100)
    check_training(16384.0, 8192.0, 100)  # one overflow in the span is fp16 training as usual
    with pytest.raises(NotTraining, match="skipped every update of the 100 measured steps .*fell from 512 to 0"):
        check_training(512.0, 0.0, 100)
    with pytest.raises(NotTraining):
        check_training(2048.0, 2048.0 / 2 ** 147, 147)


def test_fused_sgd_starts_from_zeroed_momentum_so_an_overflowed_first_step_harms_nothing():
    from bench.worker.trainer import make_optimizer
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    before = [p.detach().clone() for p in model.parameters()]
    opt = make_optimizer(model.parameters(), "fused")
    bufs = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    assert all(torch.equal(b, torch.zeros_like(b)) for b in bufs)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    loss = model(torch.full((2, 8), float("inf"))).sum()  # the first step overflows and is skipped
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(torch.equal(b, torch.zeros_like(b)) for b in bufs) and scaler.get_scale() == 2.0 ** 15
    # the next, finite step is plain momentum SGD's first: the update is lr x grad
    opt.zero_grad(set_to_none=True)
    model(torch.ones(2, 8)).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    assert all(torch.allclose(p, b - 0.01 * g) for p, b, g in zip(model.parameters(), before, grads))
    assert "momentum_buffer" not in make_optimizer(torch.nn.Linear(2, 2).parameters(), "default").state.get(0, {})


def test_the_steps_run_on_a_stream_of_their_own_only_where_asked(monkeypatch):
    from bench.worker import context
    made, current = [], []
    monkeypatch.setattr(torch.cuda, "Stream", lambda device: made.append(device) or f"stream on {device}")
    monkeypatch.setattr(torch.cuda, "set_stream", current.append)
    gpu = RankContext(device=torch.device("cuda", 1), devices=[torch.device("cuda", 1)])
    context.use_step_stream(Case(precision="fp16"), gpu)
    assert made == [] and current == []  # PyTorch's default stream, as before the knob
    context.use_step_stream(Case(precision="fp16", step_stream="own"), gpu)
    assert made == [torch.device("cuda", 1)] and current == ["stream on cuda:1"]  # the rank's own device
    context.use_step_stream(Case(precision="fp16", step_stream="own"), RankContext())
    assert len(made) == 1  # never on a CPU rank


def test_the_hardware_work_queues_reach_the_case_processes_and_are_checked_there(monkeypatch, tmp_path):
    from bench.harness import launch
    from bench.worker.dtype_check import LabelMismatch
    from bench.worker.loop import cuda_queue_facts
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4")  # a user's own setting
    asked = Case(precision="fp16", cuda_max_connections=32)
    assert launch.worker_env(asked, tmp_path, {}, "t")["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
    assert launch.worker_env(Case(precision="fp16"), tmp_path, {}, "t")["CUDA_DEVICE_MAX_CONNECTIONS"] == "4"
    gpu = RankContext(device=torch.device("cuda", 0), devices=[torch.device("cuda", 0)])
    # what the process ran with is stored; one that did not get what its case asked for measures nothing
    assert cuda_queue_facts(Case(precision="fp16"), gpu) == {"cuda_max_connections_env": "4"}
    with pytest.raises(LabelMismatch, match="cuda_max_connections=32 but the process ran with "
                                            "CUDA_DEVICE_MAX_CONNECTIONS=4"):
        cuda_queue_facts(asked, gpu)
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    assert cuda_queue_facts(asked, gpu) == {"cuda_max_connections_env": "32"}
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS")
    assert cuda_queue_facts(Case(precision="fp16"), gpu) == {"cuda_max_connections_env": None}
    assert cuda_queue_facts(Case(device="cpu"), RankContext()) == {}  # nothing of CUDA on a CPU rank
