"""Scaled ReLU with a constructor argument (KernelBench style, small size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns relu(x) * scale."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


batch_size = 64
dim = 256


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [2.0]
