"""Labels checked against what ran: the precision, by the dtype the classifier's logits came out in, and
the compile wrapper, by the graphs Inductor built with its C++ wrapper, the kernel-choosing settings, as
the process held them, and the input channels, by the model's stem and a batch the loader delivered."""
from __future__ import annotations

import torch

from ..core.case import Case
from ..core.kernel_options import inductor_settings
from . import precision
from .trainer import Trainer


EXPECTED_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class LabelMismatch(RuntimeError):
    """What ran is not what the label says (the numbers' dtype, the compiled graphs' wrapper)."""


def check_label(case: Case, dtypes: dict) -> None:
    expected = EXPECTED_DTYPE[case.precision]
    wrong = {d: t for d, t in dtypes.items() if t != expected}
    if not dtypes or wrong:
        raise LabelMismatch(f"precision={case.precision} means {expected} logits, but "
                            f"{wrong or 'no device'} computed {'them' if wrong else 'any'}")


def compiled_dtypes(trainer: Trainer, batches) -> dict:
    """The dtype a compiled or graph-captured model's logits come out in, from one forward outside the
    windows with the grad and autocast state of training (so the compiled graph is reused, not
    recompiled); a compiled step reports the dtype its traced graph computed."""
    if trainer.case.compile_scope == "step":
        return {str(trainer.ctx.device): str(trainer.logits_dtype).replace("torch.", "")}
    images, _ = next(batches)
    with precision.autocast(trainer.case.precision, trainer.ctx.device.type):
        out = trainer.strategy.model(images)
    return {str(out.device): str(out.dtype).replace("torch.", "")}


def compute_dtypes(trainer: Trainer, batches) -> dict:
    """Run one unmeasured step and record the dtype of the logits the model produced on each device."""
    seen = {}

    def hook(_module, _inputs, output):
        seen[str(output.device)] = str(output.dtype).replace("torch.", "")

    handle = trainer.model.register_forward_hook(hook)  # the model's output: its logits, whatever the model
    try:
        trainer.step(batches)
    finally:
        handle.remove()
    return seen


def check_compile_wrapper(wrapper: str, cpp_graphs: int | None) -> int | None:
    """The compile_wrapper label against what Inductor built: `cpp` means graphs launched from C++ code,
    `python` none; returns the count, stored with the record (None where this torch does not say)."""
    if cpp_graphs is not None and (wrapper == "cpp") != (cpp_graphs > 0):
        raise LabelMismatch(f"compile_wrapper={wrapper} but Inductor built {cpp_graphs} compiled graph(s) with its "
                            "C++ wrapper")
    return cpp_graphs


def check_kernel_choice(case: Case, facts: dict) -> dict:
    """The Inductor settings and cuDNN benchmark limit a process held (`kernel_choice_facts`) against the
    case's labels; returns the facts, stored with the record."""
    held = facts.get("inductor_settings")
    if held is not None and held != inductor_settings(case.inductor_options):
        on = ",".join(n for n, v in held.items() if v) or "none"
        raise LabelMismatch(f"inductor_options={case.inductor_options or 'none'} but the process compiled with {on} on")
    limit = facts.get("cudnn_benchmark_limit")
    if limit is not None and limit != case.cudnn_benchmark_limit:
        raise LabelMismatch(f"cudnn_benchmark_limit={case.cudnn_benchmark_limit} but cuDNN ran with {limit}")
    return facts


def check_input_channels(case: Case, model, images) -> dict:
    """The `input_channels` label against the model's stem (its first convolution, ResNet's `conv1`) and
    one delivered batch, whose channels past the RGB must hold zeros; returns the facts, stored with the
    record."""
    stem, seen = first_conv_channels(model), images.shape[1]
    if stem != case.input_channels or seen != case.input_channels:
        raise LabelMismatch(f"input_channels={case.input_channels} but the stem convolution read {stem} channel(s) "
                            f"and the loader delivered {seen}")
    if seen > 3 and bool(images[:, 3:].any()):
        raise LabelMismatch(f"input_channels={case.input_channels} means RGB and zeros, but the loader's channels "
                            "past the RGB were not all zero")
    return {"stem_input_channels": stem}


def first_conv_channels(model) -> int:
    """The input channels of the model's first convolution (a widened ResNet `conv1` keeps its place);
    3 where it has none: a user's model may not."""
    return next((m.in_channels for m in model.modules() if isinstance(m, torch.nn.Conv2d)), 3)
