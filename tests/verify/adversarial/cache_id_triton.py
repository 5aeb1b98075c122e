"""HACK: result caching keyed by the Python object identity of the input (Triton).

Like the data-pointer cache, but keyed by `id(x)`: the same Python tensor object always gets the
output computed the first time it was seen. CPython reuses ids of freed objects, so new tensors
can also hit stale entries.

Why it fools a naive harness: a timing loop that passes the same tensor objects 100 times gets
100 "hits" after one real kernel launch. This is the id()-based "learning phase then dictionary
lookup" exploit described in gpu-mode/reference-kernels PR #104.

Expected: `incorrect` (correctness, timing_outputs or recheck_after_timing: inputs refreshed in
place keep their id but change their values).
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
        hit = self.cache.get(id(x))
        if hit is not None:
            return hit
        x_c = x.contiguous()
        out = torch.empty_like(x_c)
        n = x_c.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x_c, out, n, BLOCK_SIZE=BLOCK)
        self.cache[id(x)] = out
        return out
