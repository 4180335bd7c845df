"""torchrun's rendezvous settings, passed through so one case can span several machines."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.case import Case


@dataclass(frozen=True)
class DistArgs:
    """torchrun's own rendezvous, passed through so one case can span several machines."""
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str = ""
    master_addr: str = ""
    master_port: int = 0

    def nproc_per_node(self, case: Case) -> int:
        if case.gpus % self.nnodes:
            raise ValueError(f"gpus={case.gpus} does not divide over nnodes={self.nnodes}")
        return case.gpus // self.nnodes
