"""HACK: detect the timing loop by call spacing and skip the work there (Triton).

forward reads a wall clock (reading is allowed; nothing is patched). If it is called again less
than 5 ms after its previous call returned -- the signature of a tight benchmark loop -- it
returns the previous output without launching anything. Correctness trials, separated by input
generation, transfers and comparisons, are slower than that and get a real kernel launch.

Why it fools a naive harness: no call counter to spot, correct on every isolated call, and the
timed loop measures a Python early-return. A harness must verify the outputs of timed iterations
(or re-check after timing) to catch it.

Expected: `incorrect` (timing_outputs / recheck_after_timing; correctness only if trials happen to
be back-to-back).
"""
import time

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
        self.last_out = None
        self.last_return = -1.0

    def forward(self, x):
        now = time.perf_counter()
        if self.last_out is not None and now - self.last_return < 0.005:
            self.last_return = time.perf_counter()
            return self.last_out
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        self.last_out = out
        self.last_return = time.perf_counter()
        return out
