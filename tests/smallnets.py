"""Networks the tests pass as a user's factory (`--model smallnets:NAME`): small enough that torch.compile
builds one in seconds on a CPU, where ResNet-18 took a minute or more on a fresh machine. The compile tests
are about the knob's machinery (the first step, the label checked against the compiled graph, Inductor's
settings), which any network with a convolution, a norm and a linear layer exercises."""
import torch


def conv_bn(num_classes: int) -> torch.nn.Module:
    """A 3x3 and a 1x1 convolution (the 1x1 one is what conv_1x1_as_mm rewrites), each with batch norm."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, num_classes))
