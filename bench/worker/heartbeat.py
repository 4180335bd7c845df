"""What this rank is doing, in a small file the launcher reads if the case hangs or dies."""
from __future__ import annotations

import resource
import time
from pathlib import Path

from ..core.files import write_json_atomic


class Heartbeat:
    """What this rank is doing, in a small file the launcher reads if the case hangs or dies:
    phase, step, seconds since start and resident memory. Phase changes are written at once,
    steps at most once a second, so a measured window pays almost nothing for it."""

    def __init__(self, path: Path | None = None):
        self.path, self.t0, self.last, self.phase = path, time.monotonic(), 0.0, ""

    def beat(self, phase: str, step: int | None = None) -> None:
        now = time.monotonic()
        if self.path is None or (phase == self.phase and now - self.last < 1.0):
            return
        self.phase, self.last = phase, now
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        write_json_atomic(self.path, {"phase": phase, "step": step, "elapsed_s": round(now - self.t0, 2), "max_rss_bytes": rss,
                           "wall_time": time.time()}, fsync=False, indent=None)


heartbeat = Heartbeat()
