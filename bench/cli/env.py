"""`bench env`: the machine and software facts every result records."""
from __future__ import annotations

import json

from ..harness import env as envmod


def add(sub) -> None:
    e = sub.add_parser("env", help="print the machine and software facts a result records",
                       description="The machine and software facts every stored result records: GPUs, CPU, "
                                   "torch, CUDA, cuDNN, NCCL, DALI and the commit. Exit 0.")
    e.add_argument("--json", action="store_true", help="as JSON, for machines")
    e.set_defaults(func=command)


def command(a) -> int:
    env = envmod.collect()
    print(json.dumps(env, indent=1, default=str) if a.json else envmod.describe(env))
    return 0
