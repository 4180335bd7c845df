"""One model on one device: the reference every scaling figure is divided by."""
from __future__ import annotations

import contextlib

from .. import precision


class Single:
    def __init__(self, model, case, ctx, criterion):
        self.model = model
        self.case = case
        self.ctx = ctx
        self.criterion = criterion

    def loss(self, images, labels):
        with precision.autocast(self.case.precision, self.ctx.device.type):
            return self.criterion(self.model(images), labels)

    def no_sync(self):
        return contextlib.nullcontext()

    def facts(self) -> dict:
        return {}


def wrap(model, case, ctx, criterion):
    return Single(model, case, ctx, criterion)
