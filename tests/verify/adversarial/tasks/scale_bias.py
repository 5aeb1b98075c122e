"""y = x * weight + bias with learned per-column parameters (KernelBench style, small size).

Has parameters, so candidates must keep the names `weight` and `bias` for the verifier to copy
Model's state_dict into ModelNew.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Per-column affine transform of a (batch, features) tensor."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.bias


batch_size = 32
features = 256


def get_inputs():
    x = torch.randn(batch_size, features)
    return [x]


def get_init_inputs():
    return [features]
