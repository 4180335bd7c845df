"""Model FLOPs per training image, counted by torch.utils.flop_counter on the meta device (no
memory, no real arithmetic), and model FLOPs utilisation against a measured peak."""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=16)
def training_flops_per_image(model: str, image_size: int, num_classes: int = 1000) -> float:
    """Forward + backward FLOPs for one image (a multiply-add counts as two)."""
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode
    with torch.device("meta"):
        net = torchvision.models.get_model(model, weights=None, num_classes=num_classes)
        x = torch.empty(2, 3, image_size, image_size)
    counter = FlopCounterMode(display=False)
    with counter:
        net(x).sum().backward()
    return counter.get_total_flops() / 2


def mfu_pct(images_per_s: float, flops_per_image: float, gpus: int, peak_flops_per_gpu: float) -> float:
    """Achieved model FLOP/s over what the GPUs could do at the measured peak, in percent."""
    return 100.0 * images_per_s * flops_per_image / (gpus * peak_flops_per_gpu)
