"""`python -m bench.worker.prime_steps CASE_JSON [MODULES...]`: worker/prime.py's priming, and beside its
library reads the reference case's first steps (on one H200 machine straight after start, the first measured
process paid about 11 s more in its first step than the processes after it). A module of its own: a primer
with no case imports no torch."""
from __future__ import annotations

import json
import sys
import time

from ..core.case import Case
from . import loaders, prime
from .context import from_environment, synchronize
from .trainer import Trainer


def first_steps(case: Case, steps: int = 2) -> list[float]:
    """The case's first optimizer steps on synthetic input, each timed (device-synchronised)."""
    case = case.replace(loader="synthetic", data_dir="")
    ctx = from_environment(case)
    trainer = Trainer(case, ctx)
    batches = iter(loaders.make(case, ctx))
    took = []
    for _ in range(steps):
        t = time.perf_counter()
        trainer.step(batches)
        synchronize(ctx)
        took.append(time.perf_counter() - t)
    return took


def main(case_json: str, modules=prime.MODULES) -> dict:
    def steps(out: dict) -> None:
        try:
            out["first_steps_s"] = first_steps(Case.from_dict(json.loads(case_json)))
        except Exception as e:  # noqa: BLE001 - priming is a courtesy: the case itself will say what fails
            out["first_steps_error"] = f"{e.__class__.__name__}: {e}"[:300]
    return prime.main(modules, then=steps)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], tuple(sys.argv[2:]) or prime.MODULES)), flush=True)
