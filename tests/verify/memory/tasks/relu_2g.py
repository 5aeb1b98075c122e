import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU over 2 GiB of fp32: a medium job, many of which fit beside each other."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 131072


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
