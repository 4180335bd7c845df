"""DDP's measured windows run its built-in all-reduce; the counting hook comes only after them."""
import warnings

import pytest
import torch.distributed as dist

from bench.worker import extra_windows, loaders
from bench.worker.context import from_environment
from bench.worker.trainer import Trainer


def test_counting_hook_is_installed_only_for_the_count(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        case = tiny.replace(strategy="ddp", gpus=1)
        ctx = from_environment(case)
        trainer = Trainer(case, ctx)
        batches = iter(loaders.make(case, ctx))
        trainer.step(batches)
        assert trainer.strategy.model._get_ddp_logging_data().get("comm_hook", "") == ""
        calls = extra_windows.count_allreduces(trainer, batches)
        assert calls >= 1 and calls == int(calls)
        assert trainer.strategy.model._get_ddp_logging_data().get("comm_hook")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("every_forward", [True, False])
def test_buffer_sync_is_set_by_the_name_this_torch_knows_without_a_warning(tiny, tmp_path, monkeypatch, every_forward):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        case = tiny.replace(strategy="ddp", gpus=1, broadcast_buffers=every_forward)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # torch 2.14 deprecates broadcast_buffers
            trainer = Trainer(case, from_environment(case))
        assert trainer.strategy.model.broadcast_buffers is every_forward  # a property over the new name in 2.14
    finally:
        dist.destroy_process_group()
