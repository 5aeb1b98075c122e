"""Element-wise addition of two tensors (KernelBench style, small size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns a + b."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


batch_size = 32
dim = 512


def get_inputs():
    a = torch.randn(batch_size, dim)
    b = torch.randn(batch_size, dim)
    return [a, b]


def get_init_inputs():
    return []
