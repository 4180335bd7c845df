"""ImageNet normalisation done on the device, where it costs least."""
from __future__ import annotations

import torch

from ..stem import with_zero_channels

MEAN_255 = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD_255 = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class DeviceNormalize:
    def __init__(self, device: torch.device, channels_last: bool, channels: int = 3):
        self.channels = channels  # the model's input channels: RGB, then zeros
        self.mean = torch.tensor(MEAN_255, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD_255, device=device).view(1, 3, 1, 1)
        self.fmt = torch.channels_last if channels_last else torch.contiguous_format

    def __call__(self, images_uint8: torch.Tensor) -> torch.Tensor:
        x = images_uint8.contiguous(memory_format=self.fmt).float()
        return with_zero_channels(x.sub_(self.mean).div_(self.std), self.channels, self.fmt)
