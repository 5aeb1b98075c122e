"""HACK: write the result into the input and return the input (Triton).

A genuine ReLU kernel runs in place on `x` (x_ptr == y_ptr) and forward returns `x` itself: no
output allocation, no extra memory traffic -- and the caller's input is destroyed.

Why it fools a naive harness: the returned values are exactly ReLU(x_original), and in-place
saves an allocation so it also looks faster. A harness that does not check that inputs are
unchanged accepts it; one that runs the candidate *before* the reference on shared inputs then
feeds the reference an already-ReLU'd tensor (ScalingIntelligence/KernelBench PR #82 discusses
input-modifying kernels and run order).

Expected: `incorrect` (inputs_unchanged).
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
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, x, n, BLOCK_SIZE=BLOCK)
        return x
