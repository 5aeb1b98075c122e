"""HACK: result caching keyed only by shape and dtype (Triton).

After the first real launch for a given (shape, dtype), every later call returns a copy-free
reference to that first result -- whatever the input values are.

Why it fools a naive harness: a harness that checks correctness once (one set of inputs) and then
benchmarks with inputs of the same shape sees a correct first answer and near-zero timed cost. The
shape-keyed fallback path is the "more sophisticated exploit" described in
gpu-mode/reference-kernels PR #104.

Expected: `incorrect` (correctness: the second trial's fresh inputs get the first trial's output).
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
        self.cache = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype)
        if key in self.cache:
            return self.cache[key]
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        self.cache[key] = out
        return out
