"""How a case's kernels are chosen beyond the compile mode: the Inductor settings `inductor_options`
may turn on, and PyTorch's default for cuDNN's `cudnn_benchmark_limit`. Names here are the settings'
own (torch._inductor.config), so a reader can look each one up."""
from __future__ import annotations

from .errors import CaseError

INDUCTOR_OPTIONS = {
    "conv_1x1_as_mm": "1x1 convolutions (36 of ResNet-50's 53) compiled as matrix multiplies (cuBLAS, or "
                      "Inductor's own kernels under max-autotune) instead of cuDNN convolutions",
    "coordinate_descent_tuning": "each generated kernel's block sizes tuned by coordinate descent while it "
                                 "compiles (the batch-norm reductions and element-wise kernels), at more compile time",
    "max_autotune_pointwise": "more launch configurations timed for each generated element-wise and reduction "
                              "kernel, at more compile time",
    "aggressive_fusion": "kernels fused even where they share no input, so fewer kernels read memory",
}
"""The Inductor settings a case may turn on (each off by default in PyTorch), in the order a case lists
them, with what each changes."""
TORCH_CUDNN_BENCHMARK_LIMIT = 10
"""PyTorch's default `torch.backends.cudnn.benchmark_limit`: cuDNN's benchmark times the 10 algorithms its
heuristics rank first for each convolution."""


def inductor_names(options: str) -> list[str]:
    """The names in a case's `inductor_options` (comma-separated; empty: none)."""
    return [n for n in options.split(",") if n] if options else []


def check_inductor_options(options) -> None:
    """Raise CaseError unless `options` names known settings, each once, in the table's order (one
    spelling per configuration, so one case id)."""
    if not isinstance(options, str):
        raise CaseError(f"inductor_options={options!r} must be a string of comma-separated names")
    names = inductor_names(options)
    known = ", ".join(INDUCTOR_OPTIONS)
    for name in names:
        if name not in INDUCTOR_OPTIONS:
            raise CaseError(f"inductor_options: {name!r} is not accepted; use comma-separated names of: {known}")
    ordered = [n for n in INDUCTOR_OPTIONS if n in names]
    if options and options.split(",") != ordered:
        raise CaseError(f"inductor_options={options!r} must list each name once, in this order: {','.join(ordered)}")


def inductor_settings(options: str) -> dict[str, bool]:
    """Every table setting as a case runs it: on where named, off otherwise, so a TORCHINDUCTOR_*
    variable in the environment cannot make the label untrue."""
    chosen = set(inductor_names(options))
    return {name: name in chosen for name in INDUCTOR_OPTIONS}
