"""The model, its strategy, precision and optimizer, and one optimizer step; or, for a loader-only
case, a stand-in that only draws batches."""
from __future__ import annotations

import contextlib
import time

import torch

from ..core import models
from ..core.case import Case
from ..core.kernel_options import INDUCTOR_OPTIONS, inductor_settings
from ..core.labels import CUDA_GRAPH_MODES
from . import precision, strategies
from .context import RankContext
from .stem import widen_stem
from .graphed_step import GraphedStep
from .timing import InputStallProbe


def build_model(case: Case, ctx: RankContext) -> torch.nn.Module:
    torch.manual_seed(case.seed)
    model = models.build(case.model, case.num_classes, case.image_size, case.model_path, case.model_source)
    model = widen_stem(model, case.input_channels)
    fmt = torch.channels_last if case.channels_last else torch.contiguous_format
    return model.to(ctx.device, memory_format=fmt).train()


class Trainer:
    """One optimizer step = K micro-batches (forward, loss, backward), then the update."""

    def __init__(self, case: Case, ctx: RankContext):
        self.case = case
        self.ctx = ctx
        self.math_flags = precision.apply_math_flags(case.precision)
        torch.backends.cudnn.benchmark = case.cudnn_benchmark
        if ctx.device.type == "cuda":
            torch.backends.cudnn.benchmark_limit = case.cudnn_benchmark_limit
        model = build_model(case, ctx)
        criterion = torch.nn.CrossEntropyLoss()
        self.strategy = strategies.get(case.strategy).wrap(model, case, ctx, criterion)
        self.model = model
        if case.compile in CUDA_GRAPH_MODES:
            demand_cuda_graphs()
        if case.compile:
            set_compile_wrapper(case.compile_wrapper)
            set_inductor_options(case.inductor_options)
        self.loss = lambda images, labels: (self.strategy.loss(images, labels), None)
        if case.compile and case.compile_scope == "model":
            self.strategy.model = torch.compile(self.strategy.model, mode=case.compile)
        if case.compile and case.compile_scope == "step":
            # forward, autocast and loss in one graph; AOTAutograd compiles its backward with it
            self.loss = torch.compile(step_loss(self.strategy, case.precision, ctx.device.type), mode=case.compile)
        self.logits_dtype = None  # what the compiled step computed its logits in, for the label check
        self.optimizer = make_optimizer(model.parameters(), case.optimizer_impl)
        # after the strategy has placed the model: DataParallel may move the input device
        self.input_probe = InputStallProbe(ctx.device)
        self.scaler = precision.grad_scaler(case.precision, ctx.device.type)
        self.last_loss = None
        self.force_no_sync = False  # set by the exposed-communication window
        # the seconds counted as waiting for input: the host clock around each fetch, unless a loader
        # counts its own time blocked on its producers (the torch DataLoader's workers), so a
        # blocking device copy is not mistaken for waiting on input
        self.input_wait_clock = time.perf_counter
        self.graphed = GraphedStep(self) if case.cuda_graph else None

    def step(self, batches) -> float:
        """Run one optimizer step; return the seconds spent waiting for input."""
        if self.graphed:
            images, labels, wait = self._fetch(batches)
            self.last_loss = self.graphed.run(images, labels)
            return wait
        k = self.case.accumulation_steps
        wait = 0.0
        for i in range(k):
            images, labels, waited = self._fetch(batches)
            wait += waited
            skip_sync = self.force_no_sync or (self.case.accumulation_mode == "no_sync" and i < k - 1)
            with self.strategy.no_sync() if skip_sync else contextlib.nullcontext():
                loss, self.logits_dtype = self.loss(images, labels)
                loss = loss / k
                self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.last_loss = loss
        return wait

    def _fetch(self, batches):
        """The next batch and the seconds counted as waiting for it."""
        before = self.input_wait_clock()
        images, labels = self.input_probe.fetch(batches)
        return images, labels, self.input_wait_clock() - before


def demand_cuda_graphs() -> None:
    """A compile mode labelled with CUDA graphs must run them: where Inductor would skip them (and
    only log it), it raises instead, so the case fails with Inductor's reason."""
    import torch._inductor.config as inductor_config
    if hasattr(inductor_config.triton, "cudagraph_or_error"):
        inductor_config.triton.cudagraph_or_error = True


def set_compile_wrapper(wrapper: str) -> None:
    """The code Inductor writes to launch this process's compiled kernels, read as each graph compiles: set
    either way, so a TORCHINDUCTOR_CPP_WRAPPER in the environment cannot make the label untrue."""
    import torch._inductor.config as inductor_config
    inductor_config.cpp_wrapper = wrapper == "cpp"


def set_inductor_options(options: str) -> None:
    """Every setting `inductor_options` may name, on where it names it and off otherwise, before anything
    compiles (Inductor reads them as each graph compiles)."""
    import torch._inductor.config as inductor_config
    for name, on in inductor_settings(options).items():
        setattr(inductor_config, name, on)


def kernel_choice_facts(case: Case, device_type: str) -> dict:
    """The kernel-choosing settings as this process held them after its step had compiled and run: the
    Inductor settings the case may name (compiled cases) and cuDNN's benchmark limit (on a GPU)."""
    out = {}
    if case.compile:
        import torch._inductor.config as inductor_config
        out["inductor_settings"] = {name: bool(getattr(inductor_config, name)) for name in INDUCTOR_OPTIONS}
    if device_type == "cuda":
        out["cudnn_benchmark_limit"] = torch.backends.cudnn.benchmark_limit
    return out


def cpp_wrapper_graphs() -> int | None:
    """Compiled graphs whose launching code Inductor built in C++ in this process (None: this torch
    does not say)."""
    from torch._inductor.codecache import CppWrapperCodeCache
    cache = getattr(CppWrapperCodeCache, "cache", None)
    return len(cache) if isinstance(cache, dict) else None


def cuda_graph_skips() -> int:
    """How many compiled graphs Inductor ran without CUDA graphs in this process."""
    from torch._dynamo.utils import counters
    return int(counters["inductor"].get("cudagraph_skips", 0))


def step_loss(strategy, precision_label: str, device_type: str):
    """Forward and loss as one function to compile whole; it also returns the logits' dtype (a
    constant of the traced graph), so the precision label is checked against what the graph computed."""
    def loss_and_logits_dtype(images, labels):
        with precision.autocast(precision_label, device_type):
            logits = strategy.model(images)
            return strategy.criterion(logits, labels), logits.dtype
    return loss_and_logits_dtype


def make_optimizer(params, impl: str) -> torch.optim.Optimizer:
    """The articles' SGD with momentum, in the implementation the case names."""
    flags = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9, **flags)
    if impl == "fused":
        zero_momentum_buffers(optimizer)
    return optimizer


def zero_momentum_buffers(optimizer: torch.optim.SGD) -> None:
    """Give every parameter a zeroed momentum buffer before the first step, which then computes the
    same update (0.9 x 0 + grad = grad). Fused SGD otherwise makes the buffers with `empty_like` on its
    first step and fills them in its kernel, which a step skipped for an fp16 overflow never runs: on
    one H200 the uninitialised buffers made the weights non-finite, and the loss scaler then skipped
    every later update (torch 2.11)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)


class LoaderOnly:
    """Stands in for the trainer when only the input pipeline is measured."""

    input_probe = None  # no model runs, so the device never waits for input

    def __init__(self, case: Case, ctx: RankContext):
        self.case = case
        self.strategy = self
        self.math_flags = {}
        self.last_loss = torch.zeros(())

    def step(self, batches) -> float:
        t = time.perf_counter()
        for _ in range(self.case.accumulation_steps):
            next(batches)
        return time.perf_counter() - t

    def facts(self) -> dict:
        return {}
