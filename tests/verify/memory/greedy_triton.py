"""A correct Triton ReLU that also holds a scratch buffer four times its input: more than the share of
the device a job of its task is admitted with, far less than the device.

In a shared run it runs out of memory at its own cap (never in a neighbour's process); run again
with the device to itself it fits, and its verdict is `correct`: it is not blamed for memory that
the other jobs held.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        scratch = torch.empty(4 * x.numel(), dtype=x.dtype, device=x.device)
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        del scratch
        return out
