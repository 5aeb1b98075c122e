"""Sum reduction over one dimension with keepdim (KernelBench level-1 style, small size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums a (batch, dim) tensor over `dim`, keeping the reduced dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 32
dim1 = 256
reduce_dim = 1


def get_inputs():
    x = torch.randn(batch_size, dim1)
    return [x]


def get_init_inputs():
    return [reduce_dim]
