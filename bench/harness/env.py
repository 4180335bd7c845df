"""Facts about the machine and the software, gathered without creating a CUDA context."""
from __future__ import annotations

import datetime
import os
import platform
import re
import socket
import subprocess
from pathlib import Path

from ..core import software

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path = REPO_ROOT, timeout: float = 10) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git(args: list[str], cwd: Path = REPO_ROOT, timeout: float = 60) -> str | None:
    """git's output in `cwd`, or None where git is missing or refused."""
    return _run(["git", *args], cwd, timeout)


def tree_state(root: Path = REPO_ROOT) -> tuple[str | None, bool]:
    """(commit, dirty) of the checkout at `root`; (None, True) where it is no git checkout. Results the
    suite writes are untracked files, so they never make a tree dirty."""
    commit = git(["rev-parse", "HEAD"], root, 10)
    return commit, bool(git(["status", "--porcelain", "--untracked-files=no"], root, 10)) if commit else True


def git_info() -> dict:
    """Commit and dirty flag. BENCH_COMMIT/BENCH_DIRTY, when set, win over git: a tree copied to
    another machine may carry no .git, or a stale one that names an older commit."""
    env_commit = os.environ.get("BENCH_COMMIT")
    if env_commit:
        return {"commit": env_commit, "dirty": os.environ.get("BENCH_DIRTY", "0") == "1",
                "commit_source": "BENCH_COMMIT"}
    commit, dirty = tree_state()
    if commit:
        return {"commit": commit, "dirty": dirty, "commit_source": "git"}
    return {"commit": "unknown", "dirty": True, "commit_source": "none"}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_info() -> dict:
    """GPU model, count, driver and memory through NVML; empty count where there is no GPU."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # no library, no driver or no GPU: all mean "no GPU facts"
        return {"gpu_count": 0, "gpu_model": None, "driver": None}
    try:
        n = pynvml.nvmlDeviceGetCount()
        names, mems = [], []
        for i in range(n):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            names.append(name.decode() if isinstance(name, bytes) else name)
            mems.append(pynvml.nvmlDeviceGetMemoryInfo(h).total)
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        return {"gpu_count": n, "gpu_model": names[0] if names else None, "gpu_models": names,
                "gpu_memory_bytes": mems, "driver": driver}
    finally:
        pynvml.nvmlShutdown()


def visible_gpu_count() -> int:
    """GPUs this process may use (CUDA_VISIBLE_DEVICES respected), without a CUDA context."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    n = gpu_info()["gpu_count"]
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() not in ("", "-1")]
        return min(n, len(ids))
    return n


_KNOWN_SOFTWARE: dict = {}


def remember_software(versions: dict) -> None:
    """Versions another process of this interpreter and environment already read (the machine's
    priming process, which imports torch anyway), so collect() need not import torch here."""
    _KNOWN_SOFTWARE.update(versions)


def software_versions() -> dict:
    return dict(_KNOWN_SOFTWARE) or software.versions()


def nccl_env() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}


def now_iso() -> str:
    """Now, UTC, to the second: the time every run, record and sighting is stamped with."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def collect(software: bool = True) -> dict:
    """Everything a result needs to say where it came from; `software` False leaves out the versions
    (they import torch), for a caller that adds them later."""
    env = {"hostname": socket.gethostname(), "cpu_model": cpu_model(), "cpu_cores": os.cpu_count(),
           "platform": platform.platform(),
           "collected_at": now_iso()}
    env.update(gpu_info())
    if software:
        env.update(software_versions())
    env.update(git_info())
    env["nccl_env"] = nccl_env()
    return env


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_slug(env: dict) -> str:
    """Folder name for a machine: what it is, e.g. `2x-nvidia-h200` or `cpu-2-cores`."""
    if env.get("gpu_count"):
        return f"{env['gpu_count']}x-{_slug(env['gpu_model'])}"
    return f"cpu-{env.get('cpu_cores')}-cores"


def describe(env: dict) -> str:
    """The facts a result records, one per line, for a person (`bench env --json` for machines)."""
    cudnn = env.get("cudnn")
    cudnn_text = f"{cudnn // 10000}.{cudnn // 100 % 100}.{cudnn % 100}" if isinstance(cudnn, int) else "-"
    gpus = (f"{env['gpu_count']} x {env['gpu_model']}, driver {env.get('driver')}" if env.get("gpu_count")
            else "none visible (the suite runs its CPU path)")
    rows = [("machine folder", machine_slug(env)), ("GPUs", gpus),
            ("CPU", f"{env.get('cpu_model')}, {env.get('cpu_cores')} cores"), ("host", env.get("hostname")),
            ("python", env.get("python")), ("torch", f"{env.get('torch')} (CUDA {env.get('cuda') or '-'}, cuDNN {cudnn_text}, "
                                                      f"NCCL {env.get('nccl') or '-'})"),
            ("torchvision", env.get("torchvision")), ("DALI", env.get("dali") or "not installed"),
            ("timm", env.get("timm") or "not installed"),
            ("commit", f"{env.get('commit')}{' (dirty)' if env.get('dirty') else ''}, from {env.get('commit_source')}"),
            ("NCCL variables", ", ".join(f"{k}={v}" for k, v in (env.get("nccl_env") or {}).items()) or "none")]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
