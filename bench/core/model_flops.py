"""Model FLOPs per training image, counted by torch.utils.flop_counter on the meta device (no memory,
no real arithmetic), once per model, size and software, and kept outside the repository."""
from __future__ import annotations

import importlib.metadata

from . import host_cache, models

METHOD = "3x forward"
"""How a training image's FLOPs are counted (three times the counted forward); a record's count made
another way (forward and backward counted, before) is counted again when it is read."""


def training_flops_per_image(model: str, image_size: int, num_classes: int, model_path: str = "",
                             model_source: str = "") -> float:
    """Training FLOPs for one image of the model as core/models.py builds it (a factory's identified by
    its `model_source` hash); read back where this install counted it before."""
    key = {"method": METHOD, "model": model, "model_source": model_source, "image_size": image_size,
           "num_classes": num_classes,
           "torch": importlib.metadata.version("torch"), "torchvision": importlib.metadata.version("torchvision")}
    return host_cache.remembered("flops", key, lambda: count_training_flops(
        lambda: models.build(model, num_classes, image_size, model_path, model_source), image_size))


def count_training_flops(build, image_size: int) -> float:
    """Training FLOPs for one RGB image of `image_size` pixels square, three times its forward (a
    multiply-add counts as two): the model's work, whatever padding of the input a case adds."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    net = on_meta(build)
    x = torch.empty(2, 3, image_size, image_size, device="meta")
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        net(x)
    # backward as twice the forward, the usual convention: torch's counter overstates the backward of
    # grouped convolutions (EfficientNet-B0: 31.4 GFLOPs per image against a forward of 0.77)
    return 3 * counter.get_total_flops() / 2


def on_meta(build):
    """The network `build` returns, on the meta device: shapes only, no memory, no arithmetic."""
    import torch
    try:
        with torch.device("meta"):
            return build()
    except NotImplementedError:  # a constructor that computes its widths with tensors (RegNet's): on the CPU
        return build().to("meta")


def takes_size(net, image_size: int) -> bool:
    """Whether a meta network's forward runs on an RGB image of `image_size` pixels square."""
    import torch
    try:
        with torch.no_grad():
            net(torch.empty(2, 3, image_size, image_size, device="meta"))
        return True
    except Exception:
        return False
