"""How a model is spread over devices. Each strategy wraps the model and computes one loss."""
from __future__ import annotations

from . import ddp, dp, single

_BY_NAME = {"single": single, "dp": dp, "ddp": ddp}


def get(name: str):
    return _BY_NAME[name]
