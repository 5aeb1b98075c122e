"""Row-wise softmax over a wide row of uniform [0, 1) inputs: every output is below 4e-4.

Scaled-down version of KernelBench level-1 23_Softmax, whose outputs are so small that an
all-zeros tensor passes `torch.allclose(atol=1e-2, rtol=1e-2)` (KernelBench issue #165).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies softmax over dim 1 of a (batch, dim) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4
dim = 4096


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
