"""HACK: exit the process with status 0 from forward (Triton).

forward launches a genuine zero-fill kernel and then calls `sys.exit(0)`.

Why it fools a naive harness: a harness that runs the candidate in a subprocess and treats exit
status 0 (with no traceback) as "ran fine" -- or that only records failures it sees raised -- is
told the run succeeded before any comparison happens.

Expected: `rejected` (process_control: sys.exit).
"""
import sys

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
        sys.exit(0)
        return out
