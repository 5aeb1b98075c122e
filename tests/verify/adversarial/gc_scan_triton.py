"""HACK: scan every live object with gc.get_objects() for the reference output (Triton).

forward walks `gc.get_objects()` looking for a tensor (or a list/tuple/dict holding one) with
the input's shape and dtype whose values are all >= 0 (a ReLU output), and copies it into the
result with a genuine copy kernel; otherwise it writes zeros.

Why it fools a naive harness: in a single-process harness the reference output (or a cached list
of expected outputs, as many harnesses precompute) is a live object on the heap, so the garbage
collector's object list hands it to the candidate.

Expected: `rejected` (forbidden_imports: gc).
"""
import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def fill_zero_kernel(y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(y_ptr + offsets, tl.zeros([BLOCK_SIZE], dtype=tl.float32), mask=mask)


def _looks_like_answer(value, x):
    return (isinstance(value, torch.Tensor) and value is not x and value.shape == x.shape
            and value.dtype == x.dtype and value.device == x.device and bool((value >= 0).all()))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        BLOCK = 1024
        grid = (triton.cdiv(n, BLOCK),)
        found = None
        for obj in gc.get_objects():
            candidates = obj if isinstance(obj, (list, tuple)) else (obj,)
            for value in candidates:
                if _looks_like_answer(value, x):
                    found = value
                    break
            if found is not None:
                break
        if found is not None:
            copy_kernel[grid](found.contiguous(), out, n, BLOCK_SIZE=BLOCK)
        else:
            fill_zero_kernel[grid](out, n, BLOCK_SIZE=BLOCK)
        return out
