"""Wall-clock marks of one process's life (epoch seconds, so the launcher's own marks on the same host
line up with them): what a case costs besides its measured windows."""
from __future__ import annotations

import time

marks: dict[str, float] = {}
"""entered (the worker module began, before its imports), imported, go (allowed to touch the device),
first_step_start, first_step_end, span_start, span_end, returned (its record is about to be written)."""


def mark(name: str) -> None:
    marks[name] = time.time()
