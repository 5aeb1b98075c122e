"""HACK: never return from forward (Triton).

forward launches a genuine kernel and then spins forever in a loop whose exit condition can never
hold (written so it does not look like a literal `while True`).

Why it fools a naive harness: a harness without a per-candidate timeout stalls for good (a denial
of service on the evaluation queue), and one that scores "no result" as "not incorrect" never
records a failure.

Expected: `timeout` (the case runs with a 10 s limit).
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
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        spins = n
        while spins >= n:
            spins = spins + 1
        return out
