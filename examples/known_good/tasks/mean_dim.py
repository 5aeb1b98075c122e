import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean reduction over one dimension (dimension removed)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 16
dim1 = 24
dim2 = 40
reduce_dim = 2


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
