"""HACK: zero the inputs and return zeros (Triton).

A genuine kernel writes 0.0 both into the input and into the output.

Why it fools a naive harness: if the harness runs the candidate first and the reference second on
the *same* input tensors, the reference now sees an all-zero input and returns ReLU(0) = 0, which
matches the candidate exactly. This is the test case in ScalingIntelligence/KernelBench PR #82
("custom kernel zero out the inputs and return a zero matrix"), which notes that the Kevin paper's
evaluation order (candidate first, arXiv 2507.11948) is vulnerable to it.

Expected: `incorrect` (inputs_unchanged; correctness too, since the reference ran on its own copy).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_both_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    zeros = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    tl.store(x_ptr + offsets, zeros, mask=mask)
    tl.store(y_ptr + offsets, zeros, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        zero_both_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        return out
