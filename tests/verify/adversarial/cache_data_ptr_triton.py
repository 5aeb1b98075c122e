"""HACK: result caching keyed by the input's data pointer (Triton).

The first call for a given `x.data_ptr()` runs a genuine ReLU kernel; every later call whose input
lives at the same address returns the cached output tensor without launching anything.

Why it fools a naive harness: benchmark loops usually call forward 100 times on the *same* input
tensor, so after one real launch every timed call is a dictionary lookup -- an enormous "speedup"
with outputs that are still right. Correctness trials that reuse the input buffer (or whose fresh
inputs land at a recycled address, as the caching allocator makes likely) get the stale result but
a harness that only checks the first call never sees it. gpu-mode/reference-kernels PR #104
("Fix batch-and-skip benchmark exploit via per-call timing") documents submissions that cache by
object identity / shape and skip the work on timed calls.

Expected: `incorrect` (correctness if a fresh-input trial reuses the address; otherwise
timing_outputs / recheck_after_timing, because the verifier rotates and refreshes the timing
buffers in place, so a pointer-keyed cache returns results for old values).
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
        key = (x.data_ptr(), tuple(x.shape), x.dtype)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        self.cache[key] = out
        return out
