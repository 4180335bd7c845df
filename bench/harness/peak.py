"""The machine's measured matrix-multiply peak per precision, the denominator of MFU. Measured
once per machine in a fresh process and stored beside its results as peak.json, and in the host's
cache for the next results tree on the same machine and software."""
from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..core.files import write_json_atomic
from ..core.host_cache import cache_root
from .env import REPO_ROOT

DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def precisions(device: str) -> dict:
    """The precisions a case on this device may ask for (tf32 is a CUDA mode), each with its dtype,
    so every case's MFU is taken against the peak of the precision it computed in."""
    return DTYPES if device == "cuda" else {k: v for k, v in DTYPES.items() if k != "tf32"}


SLOW_PRODUCT_S = 0.2
"""The size grows from MIN_SIZE by doubling up to the one asked for while a product is expected to take
under this: a precision this CPU has no fast kernels for (bf16 and fp16 on a 2-core x86 host: about
1 GFLOP/s, 2.2 s a product at 1024) is then measured at 512 in about a second, not a minute, at about
the same rate (1.3 GFLOP/s at 512)."""
MIN_SIZE = 256
TIME_BOX_S = 1.0
"""Repeats stop once they took this long, after at least MIN_REPEATS."""
MIN_REPEATS = 3


def measure(device: str, size: int, repeats: int = 10) -> dict:
    """FLOP/s of a matrix product per precision, the median of up to `repeats` after warm-up, at `size`
    or, where a product there would be slow, the largest size halved from it that is not."""
    import torch  # only in the fresh process that measures

    def timed(a, b) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t

    rates, sizes = {}, {}
    for label, dtype in precisions(device).items():
        torch.backends.cuda.matmul.allow_tf32 = label == "tf32"
        n = min(MIN_SIZE, size)
        while True:
            a, b = (torch.randn(n, n, device=device, dtype=getattr(torch, dtype)) for _ in range(2))
            timed(a, b)  # the first product at a size also pays for its set-up
            took = timed(a, b)
            if n * 2 > size or took * 8 > SLOW_PRODUCT_S:  # twice the size: eight times the work
                break
            n *= 2
        timed(a, b)
        times: list[float] = []
        while len(times) < repeats and (len(times) < MIN_REPEATS or sum(times) < TIME_BOX_S):
            times.append(timed(a, b))
        rates[label], sizes[label] = 2 * n ** 3 / statistics.median(times), n
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"device": device, "matrix_size": size, "matrix_size_measured": sizes, "flops_per_s": rates}


MACHINE_KEYS = ("gpu_model", "gpu_count", "driver", "torch", "cuda", "cpu_model")
"""What a peak was measured under: a peak is reused only where all of these are the same."""


def _usable(path: Path, device: str, env: dict | None = None) -> dict | None:
    """A stored peak holding every precision this device accepts (files written before CPU cases were
    measured in bf16 and fp16 lack some) and, where `env` is given, measured under the same MACHINE_KEYS."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not set(precisions(device)) <= set(stored.get("flops_per_s") or {}):
        return None
    if env is not None and stored.get("env") != {k: env.get(k) for k in MACHINE_KEYS}:
        return None
    return stored


def cache_file(env: dict) -> Path:
    """This host's peak outside any results tree: a new results root, a worktree of `make ab` or a test's
    folder takes it from there instead of measuring it again (seconds, a minute on some CPUs)."""
    host = re.sub(r"[^A-Za-z0-9.-]+", "-", str(env.get("hostname") or "host"))
    return cache_root() / "peak" / f"{host}.json"


def load_or_measure(folder: Path, device: str, env: dict) -> dict:
    """peak.json in the machine's results folder; else this host's cached one where it was measured under
    the same MACHINE_KEYS (copied into the folder); else measured now in a fresh process, and kept in both."""
    path = folder / "peak.json"
    if (stored := _usable(path, device)) is not None:
        return stored
    if (cached := _usable(cache_file(env), device, env)) is not None:
        write_json_atomic(path, cached)
        return cached
    peak = measured_in_a_fresh_process(device)
    if not peak:
        return {}
    peak["env"] = {k: env.get(k) for k in MACHINE_KEYS}
    write_json_atomic(path, peak)
    try:
        write_json_atomic(cache_file(env), peak)
    except OSError:  # a cache that cannot be written costs a later measurement, nothing else
        pass
    return peak


def measured_in_a_fresh_process(device: str) -> dict:
    """`measure` where nothing else has touched the device; {} where it failed."""
    size = 8192 if device == "cuda" else 1024
    code = f"import json,sys; sys.path.insert(0,{str(REPO_ROOT)!r}); " \
           f"from bench.harness.peak import measure; print(json.dumps(measure({device!r}, {size})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
