"""HACK: a kernel that is defined and has a launch site, but the launch is dead code (Triton).

The launch `relu_kernel[grid](...)` sits behind a condition that is never true for real inputs
(tensors of more than 8 dimensions), so every call takes the PyTorch path.

Why it fools a naive harness: a static check that only looks for "a @triton.jit function and a
`kernel[grid](...)` expression" passes, and the output is exactly right. Only a dynamic check that
a custom kernel actually ran, or a census of torch ops run during forward, catches it.

Expected: `rejected` (custom_kernel_launched and/or library_ops fail at run time; a static check
that notices the unreachable launch may fail custom_kernel instead).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.dim() > 8:  # never true for this task
            out = torch.empty_like(x)
            n = x.numel()
            relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
            return out
        return torch.relu(x)
