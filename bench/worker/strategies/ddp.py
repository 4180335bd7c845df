"""DistributedDataParallel, one process per GPU. Its measured windows run DDP's own built-in
all-reduce; a counting hook (a Python call per bucket, which takes the GIL and cost 8% on one H200)
is installed only for the diagnostic window that counts all-reduces, after the measured ones."""
from __future__ import annotations

import inspect

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from .. import precision


class _AllReduceCount:
    calls = 0


def _counting_allreduce(state: _AllReduceCount, bucket):
    # the same averaging all-reduce DDP runs by default, counted once per bucket
    state.calls += 1
    return default_hooks.allreduce_hook(None, bucket)


def buffer_sync(every_forward: bool) -> dict:
    """DDP's keyword for syncing buffers in every forward. Its default (on) needs none; off is
    `forward_sync_buffers` from torch 2.14 on, where `broadcast_buffers` only warns that it is deprecated."""
    if every_forward:
        return {}
    names = inspect.signature(DistributedDataParallel.__init__).parameters
    return {"forward_sync_buffers" if "forward_sync_buffers" in names else "broadcast_buffers": False}


class DDPStrategy:
    def __init__(self, model, case, ctx, criterion):
        self.case = case
        self.ctx = ctx
        self.criterion = criterion
        self.model = DistributedDataParallel(
            model,
            device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
            bucket_cap_mb=case.bucket_cap_mb,
            gradient_as_bucket_view=case.gradient_as_bucket_view,
            static_graph=case.static_graph,
            **buffer_sync(case.broadcast_buffers),
        )
        self.counter = None

    def loss(self, images, labels):
        with precision.autocast(self.case.precision, self.ctx.device.type):
            return self.criterion(self.model(images), labels)

    def no_sync(self):
        return self.model.no_sync()

    def start_counting(self) -> None:
        """Install the counting hook (DDP takes one, for good): only after the measured windows."""
        if self.counter is None:
            self.counter = _AllReduceCount()
            self.model.register_comm_hook(self.counter, _counting_allreduce)

    def allreduce_calls(self) -> int:
        return self.counter.calls

    def facts(self) -> dict:
        return {"backend": dist.get_backend()}


def wrap(model, case, ctx, criterion):
    return DDPStrategy(model, case, ctx, criterion)
