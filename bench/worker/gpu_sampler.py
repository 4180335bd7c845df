"""Samples GPU utilisation, SM clock, memory used and power through NVML in a background thread,
only while a measured window is open, so warm-up and start-up never dilute the figures."""
from __future__ import annotations

import threading

METRICS = ("gpu_util_pct", "sm_clock_mhz", "memory_used_bytes", "power_w")


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


def read(nvml, handle) -> dict:
    return {
        "gpu_util_pct": float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "memory_used_bytes": float(nvml.nvmlDeviceGetMemoryInfo(handle).used),
        "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
    }


class GpuSampler:
    def __init__(self, handles: dict, interval_s: float = 0.1, nvml=None):
        self.handles = handles
        self.interval_s = interval_s
        if nvml is None and handles:
            import pynvml as nvml
        self.nvml = nvml
        self.samples = {name: [] for name in handles}
        self._stop = threading.Event()
        self._thread = None

    def _run(self):
        while not self._stop.is_set():
            for name, h in self.handles.items():
                try:
                    self.samples[name].append(read(self.nvml, h))
                except Exception:
                    pass
            self._stop.wait(self.interval_s)

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
            out[name] = {"samples": len(rows)}
            for m in METRICS:
                vals = [r[m] for r in rows]
                out[name][m] = {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals)}
        return out


def sampler_for(devices, interval_s: float = 0.1) -> GpuSampler:
    return GpuSampler(nvml_handles(devices), interval_s)
