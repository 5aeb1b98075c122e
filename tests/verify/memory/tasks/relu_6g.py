import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU over 6 GiB of fp32 (KernelBench level 1's 19_ReLU size): a memory-bound job whose input and
    output alone fill a twentieth of an H200."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
