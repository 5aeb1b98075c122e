"""Row-wise softmax (KernelBench level-1 style, small size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies softmax over dim 1 of a (batch, dim) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 32
dim = 256


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
