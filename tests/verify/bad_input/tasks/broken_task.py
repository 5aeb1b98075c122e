"""A broken task: the reference Model raises in forward.

Used to check that the verifier reports `infra_error` (a broken task is never the candidate's
fault) rather than blaming the candidate.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU, except that forward always fails."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("broken reference: this task's Model.forward always raises")


batch_size = 64
dim = 256


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
