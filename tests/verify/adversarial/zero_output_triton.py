"""HACK: zero output (Triton).

A real Triton kernel is launched, but all it does is store 0.0 into the output.

Why it fools a naive harness: a harness that only checks that a custom kernel ran and that the
output has the right shape/dtype, or that compares with a loose absolute tolerance on outputs that
are small or mostly zero (ReLU zeroes about half of the elements), can accept it. A launch-counting
check is satisfied because a kernel really is launched. See the "zeros pass allclose" report in
ScalingIntelligence/KernelBench issue #165 and the "incorrect, trivial, or cached output"
category of kernelarena.ai's reward-hack list.

Expected: `incorrect` (correctness).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_zero_kernel(y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(y_ptr + offsets, tl.zeros([BLOCK_SIZE], dtype=tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        BLOCK = 1024
        fill_zero_kernel[(triton.cdiv(n, BLOCK),)](out, n, BLOCK_SIZE=BLOCK)
        return out
