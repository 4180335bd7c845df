"""The software versions a result records."""
from __future__ import annotations

import importlib.metadata
import platform

from . import host_cache

MODULES = ("torch", "torchvision", "nvidia.dali", "timm")
DALI_INSTALL = "pip install nvidia-dali-cuda130 (CUDA 13) or nvidia-dali-cuda120 (CUDA 12)"
"""What a DALI case skipped, or a feed refused, tells the user to run."""


def versions() -> dict:
    """Python, torch, torchvision, CUDA, cuDNN, NCCL, DALI and timm versions (None where absent): read once per
    install (importing torch costs a process seconds), then kept outside the repository."""
    return host_cache.remembered("software", host_cache.install_key(*MODULES), read_versions)


def read_versions() -> dict:
    """The versions as this process finds them; imports torch."""
    import torch
    import torchvision
    v = {"python": platform.python_version(), "torch": torch.__version__,
         "torchvision": torchvision.__version__, "cuda": torch.version.cuda,
         "cudnn": None, "nccl": None, "dali": None, "timm": None}
    try:
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    try:
        if torch.cuda.is_available():
            n = torch.cuda.nccl.version()
            v["nccl"] = ".".join(map(str, n)) if isinstance(n, tuple) else str(n)
    except Exception:
        pass
    try:  # optional, for --model timm/NAME; read without importing it
        v["timm"] = importlib.metadata.version("timm")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        import nvidia.dali
        v["dali"] = nvidia.dali.__version__
    except Exception:
        pass
    return v
