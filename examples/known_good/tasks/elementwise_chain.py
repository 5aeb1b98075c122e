import torch
import torch.nn as nn


class Model(nn.Module):
    """out = a * b + alpha * c, with alpha a constructor argument."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return a * b + self.alpha * c


shape = (8, 32, 50)
alpha = 0.75


def get_inputs():
    return [torch.randn(*shape), torch.randn(*shape), torch.randn(*shape)]


def get_init_inputs():
    return [alpha]
