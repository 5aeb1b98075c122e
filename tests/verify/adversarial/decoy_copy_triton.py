"""HACK: the kernel only copies a result that PyTorch already computed (Triton).

forward computes `torch.add(a, b)` with PyTorch and then launches a genuine Triton copy kernel that
moves that result into the output buffer.

Why it fools a naive harness: the returned tensor really was written by a custom kernel (so an
"output written by the kernel" check and even a kernel-ablation check pass: skip the copy and the
output is uninitialised), and the values are exactly right. The compute itself is a library call.

Expected: `rejected` (library_ops: torch.add runs during forward).
"""
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        tmp = torch.add(a, b).contiguous()
        out = torch.empty_like(tmp)
        n = out.numel()
        BLOCK = 1024
        copy_kernel[(triton.cdiv(n, BLOCK),)](tmp, out, n, BLOCK_SIZE=BLOCK)
        return out
