"""Samples GPU utilisation, SM clock, memory used, power and whether the power cap held the clocks
down, through NVML in a background thread, only while a measured window is open, so warm-up and
start-up never dilute the figures. The device's limits (enforced power limit, highest SM clock) are
read once beside them, so a record says how close to them the GPU ran. Beside them it notes what is
not the case's: the compute processes on each device, and the memory in use that this process's
allocator does not explain (core/sharing.py judges both)."""
from __future__ import annotations

import threading

METRICS = ("gpu_util_pct", "sm_clock_mhz", "memory_used_bytes", "power_w", "power_capped_pct")
SW_POWER_CAP = 0x4
"""NVML's clock event reason (formerly throttle reason) set while the driver lowers the clocks to
keep the board within its power limit (nvmlClocksEventReasonSwPowerCap)."""


def nvml_handles(devices) -> dict:
    """NVML handles for the process's CUDA devices, matched by PCI bus id (CUDA_VISIBLE_DEVICES safe)."""
    try:
        import pynvml
        import torch
        pynvml.nvmlInit()
    except Exception:  # no NVML library or driver: nothing to sample
        return {}
    handles = {}
    for d in devices:
        if d.type != "cuda":
            continue
        try:
            props = torch.cuda.get_device_properties(d)
            bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
            handles[str(d)] = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception:
            handles[str(d)] = pynvml.nvmlDeviceGetHandleByIndex(d.index)
    return handles


def clock_reasons(nvml, handle) -> int | None:
    """The bit mask of why the clocks are below their highest (None where NVML cannot say)."""
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, name):
            try:
                return int(getattr(nvml, name)(handle))
            except Exception:
                return None
    return None


def read(nvml, handle) -> dict:
    reasons = clock_reasons(nvml, handle)
    return {
        "gpu_util_pct": float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "memory_used_bytes": float(nvml.nvmlDeviceGetMemoryInfo(handle).used),
        "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        # a share once averaged over the samples: 100 where the power cap held the clocks down
        "power_capped_pct": None if reasons is None else 100.0 * bool(reasons & SW_POWER_CAP),
    }


def limits(nvml, handle) -> dict:
    """The device's own ceilings, read once: the power limit the driver enforces and the highest SM clock."""
    out = {}
    for key, call in (("power_limit_w", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0),
                      ("sm_clock_max_mhz", lambda: float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)))):
        try:
            out[key] = call()
        except Exception:  # an NVML without the call: the record simply lacks that ceiling
            pass
    return out


def compute_pids(nvml, handle) -> dict[int, int | None]:
    """The processes holding a compute context on the device, with their memory where NVML says it."""
    return {int(p.pid): (int(p.usedGpuMemory) if p.usedGpuMemory is not None else None)
            for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}


PROCESS_EVERY = 5
"""Samples between two reads of the process list (a heavier call than the rest)."""


class GpuSampler:
    def __init__(self, handles: dict, interval_s: float = 0.1, nvml=None, reserved=None):
        """`reserved(name)`: the bytes this process's allocator holds on that device, so memory it does not
        explain can be told apart (None: not tracked)."""
        self.handles = handles
        self.interval_s = interval_s
        if nvml is None and handles:
            import pynvml as nvml
        self.nvml = nvml
        self.reserved = reserved
        self.samples = {name: [] for name in handles}
        self.pids: dict[str, dict[int, int | None]] = {name: {} for name in handles}
        self.unexplained: dict[str, list[int]] = {name: [] for name in handles}
        self._stop = threading.Event()
        self._thread = None
        self._ticks = 0

    def _run(self):
        while not self._stop.is_set():
            self._run_once()
            self._stop.wait(self.interval_s)

    def _run_once(self):
        for name, h in self.handles.items():
            try:
                row = read(self.nvml, h)
                self.samples[name].append(row)
                if self.reserved is not None:
                    self.unexplained[name].append(int(row["memory_used_bytes"]) - int(self.reserved(name)))
                if self._ticks % PROCESS_EVERY == 0:
                    for pid, mem in compute_pids(self.nvml, h).items():
                        seen = self.pids[name].get(pid)
                        self.pids[name][pid] = max(seen or 0, mem or 0) or None
            except Exception:
                pass
        self._ticks += 1

    def start(self) -> None:
        if not self.handles:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def summary(self) -> dict:
        """Per device: mean, min and max of each metric over every window's samples."""
        out = {}
        for name, rows in self.samples.items():
            if not rows:
                continue
            out[name] = {"samples": len(rows), **self._limits(name)}
            for m in METRICS:
                vals = [r[m] for r in rows if r.get(m) is not None]
                if vals:
                    out[name][m] = {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals)}
            out[name]["compute_pids"] = {str(p): m for p, m in sorted(self.pids[name].items())}
            if self.unexplained[name]:  # from the first sample, so what was there before the windows is not counted
                out[name]["memory_rise_bytes"] = max(self.unexplained[name]) - self.unexplained[name][0]
        return out

    def _limits(self, name: str) -> dict:
        return limits(self.nvml, self.handles[name]) if self.nvml is not None else {}


def sampler_for(devices, interval_s: float = 0.1) -> GpuSampler:
    import torch
    return GpuSampler(nvml_handles(devices), interval_s, reserved=lambda name: torch.cuda.memory_reserved(name))
