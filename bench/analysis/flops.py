"""Model FLOPs per training image for a record that lacks its worker's own count (older records), and
model FLOPs utilisation against a measured peak."""
from __future__ import annotations

import functools

from ..core import model_flops


@functools.lru_cache(maxsize=16)
def training_flops_per_image(model: str, image_size: int, num_classes: int = 1000, model_path: str = "",
                             model_source: str = "") -> float:
    """Training FLOPs for one image of the model (three times its forward; a multiply-add counts as two),
    kept for this process too: the check of a sweep's cases and its report ask again."""
    return model_flops.training_flops_per_image(model, image_size, num_classes, model_path, model_source)


def mfu_pct(images_per_s: float, flops_per_image: float, gpus: int, peak_flops_per_gpu: float) -> float:
    """Achieved model FLOP/s over what the GPUs could do at the measured peak, in percent."""
    return 100.0 * images_per_s * flops_per_image / (gpus * peak_flops_per_gpu)
