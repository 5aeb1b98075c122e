"""BAD INPUT: ModelNew's constructor does not accept the task's init arguments.

The task (tasks/scaled_relu.py) builds the model with `Model(2.0)`; this ModelNew takes no
arguments, so `ModelNew(*get_init_inputs())` raises TypeError. The kernel itself is fine.

Expected: `runtime_error`.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_kernel(x_ptr, y_ptr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scaled_relu_kernel[(triton.cdiv(n, 1024),)](x, out, self.scale, n, BLOCK_SIZE=1024)
        return out
