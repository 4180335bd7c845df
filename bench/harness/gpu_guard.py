"""Whether the GPUs a run uses are its own, asked of NVML alone (it opens no CUDA context): before the
first case the compute processes on them, the memory in use and a second of utilisation; before and
after each process the processes and the memory, since none of the run's own is on a GPU then (the
next process, started ahead, touches no device until it is let go). What the case's own sampler saw
during its windows comes back in its ranks (core/sharing.during_windows).

Found before a process: the run is refused (exit 2, one line naming what was seen) unless the user
said `--shared-gpu`; then, and whenever something is seen after or during a process, the process's
result carries the sightings, and the record made of it says the GPU was shared."""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..core import sharing
from ..core.case import Case
from ..core.errors import BenchError
from . import run_registry
from .env import REPO_ROOT, now_iso

SHARED_FLAG = "--shared-gpu"
SETTLE_S = 2.0
"""How long a sighting right after a process may take to clear: a context being torn down is not
another's; something still there after this is."""
IDLE_SAMPLES, IDLE_INTERVAL_S = 10, 0.1  # utilisation before the run: a second of NVML's readings


class GpuBusy(BenchError):
    """A GPU the run would use holds someone else's work; exit 2."""


def command_of(pid: int, proc: Path = Path("/proc")) -> str:
    """What a process is, for a person: its command line (printable characters, at most 100) and its
    folder, or '' where this namespace cannot see it."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    text = text if len(text) <= 100 else text[:97] + "..."
    try:
        text += f", in {os.readlink(proc / str(pid) / 'cwd')}"
    except OSError:
        pass
    return text


def visible_ids(count: int) -> list[str]:
    """NVML names of the first `count` GPUs this process may use: indices, or UUIDs where
    CUDA_VISIBLE_DEVICES gives them (its order: CUDA numbers devices in PCI order under
    CUDA_DEVICE_ORDER=PCI_BUS_ID, which NVML's indices follow)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(i) for i in range(count)]
    ids = [v.strip() for v in visible.split(",") if v.strip() not in ("", "-1")]
    return ids[:count]


def local_gpus(case: Case, nnodes: int = 1) -> int:
    return case.gpus // max(nnodes, 1) if case.device == "cuda" else 0


class GpuGuard:
    """The run's watch over its GPUs; `shared` (the user's --shared-gpu) marks instead of refusing.
    `nvml`: the module to ask (pynvml by default; a test passes its own)."""

    def __init__(self, shared: bool = False, nnodes: int = 1, nvml=None):
        self.shared, self.nnodes = shared, nnodes
        self._nvml, self._handles = nvml, {}
        self.entry = None  # this run's file in the machine's registry of runs (harness/run_registry.py)

    # --- NVML ---------------------------------------------------------------------------------------
    def nvml(self):
        if self._nvml is None:
            try:
                import pynvml
                pynvml.nvmlInit()
            except Exception:  # no library or driver: nothing can be watched, and nothing runs on a GPU
                return None
            self._nvml = pynvml
        return self._nvml

    def handle(self, ident: str):
        if ident not in self._handles:
            nvml = self.nvml()
            self._handles[ident] = (nvml.nvmlDeviceGetHandleByIndex(int(ident)) if ident.isdigit()
                                    else nvml.nvmlDeviceGetHandleByUUID(ident))
        return self._handles[ident]

    def look(self, gpu: int, ident: str, when: str, util_samples: int = 0) -> dict | None:
        """One GPU now: a sighting of what is not the run's, or None."""
        nvml = self.nvml()
        h = self.handle(ident)
        try:
            listed = nvml.nvmlDeviceGetComputeRunningProcesses(h)
        except Exception:  # a GPU that will not list its processes (some virtual ones): memory still tells
            listed = []
        procs = [{"pid": int(p.pid), "memory_bytes": int(p.usedGpuMemory) if p.usedGpuMemory is not None else None,
                  "command": command_of(int(p.pid))} for p in listed]
        used, kind = memory_used(nvml, h)
        util = None
        if util_samples:
            readings = []
            for _ in range(util_samples):
                try:
                    readings.append(float(nvml.nvmlDeviceGetUtilizationRates(h).gpu))
                except Exception:
                    break
                time.sleep(IDLE_INTERVAL_S)
            util = sum(readings) / len(readings) if readings else None
        if not sharing.foreign(procs, used, kind, util):
            return None
        return sharing.sighting(gpu, when, now_iso(), procs, used, util)

    def ids(self, count: int) -> list[str]:
        """NVML ids of the first `count` GPUs this process may use, of those the machine has."""
        return visible_ids(min(count, self.nvml().nvmlDeviceGetCount()))

    def looks(self, count: int, when: str, util_samples: int = 0) -> list[dict]:
        if count <= 0 or self.nvml() is None:
            return []
        found = []
        for gpu, ident in enumerate(self.ids(count)):
            s = self.look(gpu, ident, when, util_samples)
            if s:
                found.append(s)
        return found

    # --- the run's checks ---------------------------------------------------------------------------
    def refuse(self, found: list[dict], done: str = "") -> None:
        if found and not self.shared:
            raise GpuBusy(f"the GPUs are not this run's alone: {sharing.summary(found)}{done}; wait until it has "
                          f"ended, or pass {SHARED_FLAG} to measure beside it (every figure then marked shared)")

    def before_run(self, cases: list[Case], run_id: str = "") -> list[dict]:
        """Before anything runs: another run of the suite on these GPUs (harness/run_registry.py, which sees
        one between its processes too), then processes, memory and a second of utilisation on every GPU the
        cases use. Once accepted, this run registers itself until release()."""
        count = max((local_gpus(c, self.nnodes) for c in cases), default=0)
        if count <= 0 or self.nvml() is None:
            return []
        ids = self.ids(count)
        found = [sharing.sighting(ids.index(next(g for g in r["gpus"] if g in ids)), "before the run", now_iso(),
                                  [{"pid": r["pid"], "command": f"run {r['run_id']} of this suite, in {r['checkout']}"}],
                                  None) for r in run_registry.others(ids)]
        found += self.looks(count, "before the run", IDLE_SAMPLES)
        self.refuse(found)
        self.entry = run_registry.register(run_id, ids, str(REPO_ROOT))
        return found

    def release(self) -> None:
        """The run has ended: its entry in the machine's registry goes."""
        run_registry.release(self.entry)
        self.entry = None

    def settled(self, count: int, when: str, wait_s: float) -> list[dict]:
        """What is still there after up to `wait_s`: the context of a process of the run's that just
        ended (the previous case, the machine's priming) is being torn down, and is not another's."""
        deadline = time.monotonic() + wait_s
        found = self.looks(count, when)
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = self.looks(count, when)
        return found

    def before(self, case: Case) -> list[dict]:
        """Before a case's process is let go; refused unless the user accepted a shared GPU."""
        found = self.settled(local_gpus(case, self.nnodes), "before the case", SETTLE_S)
        self.refuse(found, "; the run stopped before its next process, and every case it finished is stored")
        return found

    def after(self, case: Case, result: dict, before: list[dict] = ()) -> list[dict]:
        """After a case's processes ended: what its samplers saw during the windows, and what is on
        its GPUs now; something new must still be there after SETTLE_S (a context being torn down is
        the case's own), something `before` saw already needs no wait."""
        n = local_gpus(case, self.nnodes)
        if n <= 0 or self.nvml() is None:
            return []
        found = sharing.during_windows(result.get("ranks") or [], now_iso())
        return found + self.settled(n, "after the case", 0 if before else SETTLE_S)


def memory_used(nvml, handle) -> tuple[int | None, str]:
    """(bytes in use, 'v2' or 'v1'): v2 leaves out what the driver reserves; v1 counts it."""
    try:
        m = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
        return int(m.used), "v2"
    except Exception:
        pass
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(handle).used), "v1"
    except Exception:
        return None, "v1"
