"""The worker's imports and libraries read once while the harness does other work (making the data
folder), so the first measured process does not pay for a cold disk and an empty bytecode cache.
It always ends before anything is measured: `finish` waits for it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .env import REPO_ROOT
from .launch import cached_env

OFF_VAR = "BENCH_READ_AHEAD"  # "0": do not read ahead


class ReadAhead:
    """`python -m bench.worker.read_ahead` in the background; `finish()` waits for it and says what it did."""

    def __init__(self, modules: tuple[str, ...] = (), root: Path = REPO_ROOT, env: dict | None = None):
        self.started = time.monotonic()
        self.proc = None
        if os.environ.get(OFF_VAR, "1") == "0":
            return
        cmd = [sys.executable, "-m", "bench.worker.read_ahead", *modules]
        self.proc = subprocess.Popen(cmd, cwd=root, env={**cached_env(root), **(env or {})},
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def finish(self, timeout_s: float = 300.0) -> str:
        """Wait for it (stopped after `timeout_s`); one line for the log, empty where it never ran."""
        if self.proc is None:
            return ""
        proc, self.proc = self.proc, None
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return f"reading ahead stopped after {timeout_s:.0f} s; the first process may start cold"
        waited_s = time.monotonic() - self.started
        try:
            facts = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return f"reading ahead failed (exit {proc.returncode}); the first process may start cold"
        return (f"read ahead: {', '.join(facts['imported']) or 'no modules'} imported, {facts['files']} libraries "
                f"({facts['bytes'] / 1e9:.2f} GB) read in {facts['seconds']:.1f} s ({waited_s:.1f} s since it began)")

    def cancel(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.communicate()
            self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
