"""The machine primed while the harness does other work (making the data folder): the worker's imports,
libraries, font cache and, on a GPU, the reference case's first steps, paid once and unmeasured
(worker/prime.py says what and why). `finish` waits for it, so it never runs beside a measurement."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..core.case import Case
from . import env as envmod
from .launch import cached_env

OFF_VAR = "BENCH_PRIME"  # "0": no priming


class Prime:
    """`python -m bench.worker.prime` (or prime_steps, given a reference case) in the background; `finish()`
    waits for it and says what it did."""

    def __init__(self, reference: Case | None = None, modules: tuple[str, ...] = (), root: Path = envmod.REPO_ROOT,
                 env: dict | None = None):
        self.started = time.monotonic()
        self.reference = reference
        self.proc = None
        if os.environ.get(OFF_VAR, "1") == "0":
            return
        module = ["bench.worker.prime_steps", json.dumps(reference.to_dict())] if reference else ["bench.worker.prime"]
        cmd = [sys.executable, "-m", *module, *modules]
        self.proc = subprocess.Popen(cmd, cwd=root, env={**cached_env(root), **(env or {})},
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def finish(self, timeout_s: float = 300.0) -> str:
        """Wait for it (stopped after `timeout_s`); one line for the log, empty where it never ran. The
        software versions it read are kept for this run's environment, so the harness need not import
        torch itself."""
        if self.proc is None:
            return ""
        proc, self.proc = self.proc, None
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return f"priming stopped after {timeout_s:.0f} s; the first process may start cold"
        waited_s = time.monotonic() - self.started
        try:
            facts = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return f"priming failed (exit {proc.returncode}); the first process may start cold"
        if facts.get("software"):
            envmod.remember_software(facts["software"])
        parts = [f"{', '.join(facts['imported']) or 'no module'} imported",
                 f"{facts.get('files', 0)} libraries ({facts.get('bytes', 0) / 1e9:.2f} GB) read"]
        if facts.get("first_steps_s"):
            parts.append(f"first steps of {self.reference.name}: "
                         + ", ".join(f"{s:.1f} s" for s in facts["first_steps_s"]))
        if facts.get("first_steps_error"):
            parts.append(f"first steps of {self.reference.name} failed ({facts['first_steps_error']})")
        return f"primed (unmeasured): {'; '.join(parts)}; {facts['seconds']:.1f} s ({waited_s:.1f} s since it began)"

    def cancel(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.communicate()
            self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
