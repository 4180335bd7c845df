"""Numerics exactly as labelled: fp32 is strict, tf32/bf16/fp16 say what they turn on."""
from __future__ import annotations

import contextlib

import torch

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def apply_math_flags(precision: str) -> dict:
    """Set TF32 in cuBLAS and cuDNN for this process; return what was set, for the record.

    PyTorch leaves cuDNN's TF32 on by default, so `fp32` must turn it off explicitly. The mixed
    precisions keep their fp32 remainder strict, so a bf16 figure is not silently helped by TF32.
    """
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    return {"cublas_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32}


def autocast(precision: str, device_type: str):
    """The autocast context for one forward pass (a no-op for fp32 and tf32)."""
    dtype = AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return contextlib.nullcontext()
    if device_type == "cuda" and not torch.compiler.is_compiling() and torch.cuda.is_current_stream_capturing():
        # a captured step must cast the weights afresh on every replay: no cast cache across steps
        return torch.autocast(device_type=device_type, dtype=dtype, cache_enabled=False)
    return torch.autocast(device_type=device_type, dtype=dtype)


def grad_scaler(precision: str, device_type: str):
    """fp16 needs loss scaling; the other precisions do not (enabled=False is a pass-through)."""
    return torch.amp.GradScaler(device_type, enabled=precision == "fp16")


class AutocastInside(torch.nn.Module):
    """Enters autocast inside forward, so each nn.DataParallel replica runs in the case's dtype.

    DataParallel's worker threads re-enter autocast with the device's default dtype (fp16), not
    the caller's: a bf16 autocast around a DataParallel call silently runs fp16 in the replicas.
    """

    def __init__(self, module: torch.nn.Module, precision: str, device_type: str):
        super().__init__()
        self.module = module
        self.precision = precision
        self.device_type = device_type

    def forward(self, *args, **kwargs):
        with autocast(self.precision, self.device_type):
            return self.module(*args, **kwargs)
