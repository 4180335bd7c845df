"""The suite's folder outside the repository, for what it makes or reads once per machine and reuses:
generated JPEGs, bytecode and compile caches, and facts that only an install changes (the software
versions, a model's FLOPs), so that a command which reads stored results never imports torch for them."""
from __future__ import annotations

import getpass
import glob
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from .files import write_json_atomic


def cache_root() -> Path:
    return Path(os.environ.get("BENCH_DATA_CACHE", Path.home() / ".cache" / "gpu-bench"))


INDUCTOR_CACHE_VAR = "TORCHINDUCTOR_CACHE_DIR"


def inductor_cache(environ: dict) -> str:
    """Where the suite's processes keep Inductor's compiled kernels: the user's TORCHINDUCTOR_CACHE_DIR, else the
    suite's folder. A process that imported Inductor (torchvision imports it) has the variable set to torch's own
    default in the temporary folder: that is torch's value, not a user's, and a run whose harness had counted a
    model's FLOPs first would have compiled into it, while the next run compiled again into the suite's folder."""
    given = environ.get(INDUCTOR_CACHE_VAR)
    return given if given and given != torch_default_inductor_cache() else str(cache_root() / "inductor")


def torch_default_inductor_cache() -> str:
    """torch._inductor.runtime.cache_dir_utils.default_cache_dir, without importing torch."""
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def install_key(*modules: str) -> dict:
    """What decides the facts an install reports: the interpreter, where each module lies and when its
    files were last written (a reinstall rewrites them), the library search path and the GPUs the
    process may see."""
    # found through links: a checkout whose .venv is a link to another's has that one's install
    key = {"python": os.path.realpath(sys.executable), "prefix": os.path.realpath(sys.prefix),
           "python_version": sys.version}
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = os.path.realpath(spec.origin) if spec and spec.origin and os.path.exists(spec.origin) else None
        key[name] = origin and [origin, os.stat(origin).st_mtime_ns]
    for var in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        key[var] = os.environ.get(var)
    key["gpu_device_files"] = sorted(glob.glob("/dev/nvidia[0-9]*"))
    return key


def remembered(kind: str, key: dict, compute):
    """`compute()` (a JSON value), read back from the cache where it ran before with the same `key`;
    stored for the next caller where the folder can be written, computed afresh where it cannot."""
    text = json.dumps(key, sort_keys=True)
    path = cache_root() / "facts" / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    try:
        kept = json.loads(path.read_text())
        if kept["key"] == json.loads(text):
            return kept["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = compute()
    try:
        write_json_atomic(path, {"key": key, "value": value}, fsync=False)
    except OSError:
        pass  # a read-only home: the next caller computes it again
    return value
