import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension, with elementwise affine weight and bias."""

    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 4
seq_len = 16
features = 200


def get_inputs():
    return [torch.randn(batch_size, seq_len, features) * 2.0 + 0.5]


def get_init_inputs():
    return [features]
