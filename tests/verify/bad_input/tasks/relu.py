"""ReLU over a 2-D tensor (KernelBench level-1 style, small size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that applies ReLU element-wise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 64
dim = 256


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
