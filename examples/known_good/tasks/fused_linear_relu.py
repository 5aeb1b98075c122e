import torch
import torch.nn as nn


class Model(nn.Module):
    """Level-2 style chain: Linear -> ReLU -> multiply by a scalar -> add a learned bias."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = torch.relu(x)
        x = x * self.scale
        return x + self.bias


batch_size = 32
in_features = 64
out_features = 48
scale = 1.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
