"""The machine's measured matrix-multiply peak per precision, the denominator of MFU. Measured
once per machine in a fresh process and stored beside its results as peak.json."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..core.files import write_json_atomic
from .env import REPO_ROOT

DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def precisions(device: str) -> dict:
    """The precisions a case on this device may ask for (tf32 is a CUDA mode), each with its dtype,
    so every case's MFU is taken against the peak of the precision it computed in."""
    return DTYPES if device == "cuda" else {k: v for k, v in DTYPES.items() if k != "tf32"}


def measure(device: str, size: int, repeats: int = 10) -> dict:
    """FLOP/s of a size^3 matrix product per precision, median of `repeats` after warm-up."""
    import torch  # only in the fresh process that measures
    rates = {}
    for label, dtype in precisions(device).items():
        torch.backends.cuda.matmul.allow_tf32 = label == "tf32"
        a = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
        b = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
        for _ in range(3):
            a @ b
        times = []
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            a @ b
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        rates[label] = 2 * size ** 3 / statistics.median(times)
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"device": device, "matrix_size": size, "flops_per_s": rates}


def load_or_measure(folder: Path, device: str, env: dict) -> dict:
    """peak.json in the machine's results folder, measured now if it is not there yet or lacks a
    precision this device accepts (files written before CPU cases were measured in bf16 and fp16)."""
    path = folder / "peak.json"
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
            if set(precisions(device)) <= set(stored.get("flops_per_s") or {}):
                return stored
        except (OSError, json.JSONDecodeError):
            pass
    size = 8192 if device == "cuda" else 1024
    code = f"import json,sys; sys.path.insert(0,{str(REPO_ROOT)!r}); " \
           f"from bench.harness.peak import measure; print(json.dumps(measure({device!r}, {size})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return {}
    peak = json.loads(out.stdout.strip().splitlines()[-1])
    peak["env"] = {k: env.get(k) for k in ("gpu_model", "gpu_count", "driver", "torch", "cuda", "cpu_model")}
    write_json_atomic(path, peak)
    return peak
