"""Where the whole step captured as one CUDA graph (`Case.cuda_graph`) can run."""
from __future__ import annotations

from .errors import CaseError


def check_cuda_graph(c) -> None:
    """Where one captured step cannot run, refused before anything starts."""
    if c.loader_only or c.overhead_check:
        raise CaseError("cuda_graph=true needs a model step to capture: not with loader_only or overhead_check")
    if c.device != "cuda":
        raise CaseError("cuda_graph=true captures the step as a CUDA graph and needs device='cuda'")
    if c.strategy != "single" or c.accumulation_steps > 1:
        raise CaseError(f"cuda_graph=true is measured with strategy='single' and one micro-batch per step, not "
                        f"strategy={c.strategy!r}, accumulation_steps={c.accumulation_steps}")
    if c.optimizer_impl != "fused":
        raise CaseError(f"cuda_graph=true needs optimizer_impl='fused', not {c.optimizer_impl!r}: the other "
                        "implementations read the fp16 loss scaler's verdict on the host, which a graph cannot")
    if c.compile in ("reduce-overhead", "max-autotune"):
        raise CaseError(f"cuda_graph=true with compile={c.compile!r}: that mode makes CUDA graphs of its own; "
                        "use compile='default' or 'max-autotune-no-cudagraphs'")
