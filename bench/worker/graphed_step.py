"""The whole optimizer step captured once as one CUDA graph and replayed (`Case.cuda_graph`).

Forward, loss, backward, the fp16 loss scaling and the fused update become one launch per step, so
the host no longer issues hundreds of kernels. A few eager steps on a side stream come first (cuDNN's
autotuning, compilation, the optimizer's state and the scaler's tensors must exist before capture);
then the step is captured with the gradients unset, so they live in the graph's memory pool and every
replay overwrites them. Each new batch is copied into the graph's input tensors, unless the loader
hands over those very tensors (the synthetic batch, whose labels it redraws in place).
"""
from __future__ import annotations

import torch

EAGER_STEPS_BEFORE_CAPTURE = 3


class GraphedStep:
    def __init__(self, trainer):
        self.trainer = trainer
        self.stable_inputs = False
        """Set when the loader yields the same tensors every step (refilled in place)."""
        self.graph = None
        self.images = self.labels = self.loss = None

    def run(self, images, labels):
        """One optimizer step on this batch; the first call warms up, captures and replays."""
        if self.graph is None:
            self._capture(images, labels)
        if images is not self.images:
            self.images.copy_(images, non_blocking=True)
        if labels is not self.labels:
            self.labels.copy_(labels, non_blocking=True)
        self.graph.replay()
        return self.loss

    def _body(self):
        t = self.trainer
        loss, t.logits_dtype = t.loss(self.images, self.labels)
        t.scaler.scale(loss).backward()
        t.scaler.step(t.optimizer)
        t.scaler.update()
        return loss

    def _capture(self, images, labels):
        t = self.trainer
        # the graph reads its input from fixed addresses: the loader's own tensors where they stay,
        # else copies that each new batch is written into
        stable = self.stable_inputs
        self.images, self.labels = (images, labels) if stable else (images.clone(), labels.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(EAGER_STEPS_BEFORE_CAPTURE):
                t.optimizer.zero_grad(set_to_none=True)
                self._body()
        torch.cuda.current_stream().wait_stream(side)
        t.optimizer.zero_grad(set_to_none=True)  # gradients are made inside the graph's pool
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = self._body()
