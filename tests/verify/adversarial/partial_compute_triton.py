"""HACK: partial computation -- only the first half of the rows is reduced (Triton).

A genuine row-sum kernel runs on a grid of rows // 2 programs, so rows in the second half of the
output are never written and keep whatever `torch.empty` handed back.

Why it fools a naive harness: half the work means about half the time, and the unwritten half can
still look right when (a) the allocator returns the freed reference output (stale memory), or (b)
the harness compares only a few sampled elements or the first rows. Catching it needs a full
element-wise comparison on poisoned memory. (Checked on an H200: with a harness that frees the
reference output just before calling the candidate, this file passed allclose on 3 of 7 trials.)

Expected: `incorrect` (correctness).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows, 1), dtype=x.dtype, device=x.device)
        row_sum_kernel[(rows // 2,)](x, out, cols, BLOCK_SIZE=triton.next_power_of_2(cols))
        return out
