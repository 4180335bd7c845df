"""A case's `input_channels` on the model's side and the input's: the stem convolution widened to read
RGB and zero channels, and the zero channels added to a batch that the loader made in RGB."""
from __future__ import annotations

import torch


def widen_stem(model: torch.nn.Module, channels: int) -> torch.nn.Module:
    """The model with its stem convolution (`conv1`, ResNet's) reading `channels` input channels: the RGB
    weights it was built with, zeros for the others, so its outputs are those of the RGB stem."""
    if channels == 3:
        return model  # RGB, as every constructor builds it
    stem = model.conv1
    if stem.in_channels == channels:
        return model
    wide = torch.nn.Conv2d(channels, stem.out_channels, stem.kernel_size, stem.stride, stem.padding,
                           bias=stem.bias is not None).to(stem.weight.device, stem.weight.dtype)
    with torch.no_grad():
        wide.weight.zero_()
        wide.weight[:, :stem.in_channels].copy_(stem.weight)
        if stem.bias is not None:
            wide.bias.copy_(stem.bias)
    model.conv1 = wide
    return model


def with_zero_channels(images: torch.Tensor, channels: int, memory_format: torch.memory_format) -> torch.Tensor:
    """A batch of RGB images (N, 3, H, W) with channels of zeros after the RGB, up to `channels`, in the
    memory format the model reads."""
    if images.shape[1] == channels:
        return images.contiguous(memory_format=memory_format)
    n, c, h, w = images.shape
    out = torch.zeros(n, channels, h, w, dtype=images.dtype, device=images.device).contiguous(memory_format=memory_format)
    out[:, :c].copy_(images)
    return out
