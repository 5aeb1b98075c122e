"""HACK: declare the library operator, let torch do the work, launch a trivial kernel of one's own (Triton).

The candidate declares `mm` as a library call it makes (KERNELZERO_LIBRARY_OPS, which the strict
policy allows for cuBLAS/cuDNN calls a kernel genuinely needs), computes the whole product with
torch.matmul, and then copies the result into the output with a Triton kernel. The copy is real
and needed: without it the output is uninitialised memory, so skipping the candidate's launches
(kernel ablation) breaks the output, the census sees only the declared operator, and the output is
exactly right.

Why it fools a naive harness: every per-operator rule passes (the library call is declared, a
custom kernel is launched and matters), and the speedup is ~1.0x. Only the share of GPU time spent
in the candidate's own kernels shows that the candidate wrote none of the computation: here a few
percent (a 16 MiB copy next to a 2048^3 GEMM).

Expected on CUDA: `rejected` (kernel_time_share). On the CPU the share is not measured (the
interpreter's timings say nothing about a GPU), so the case has no CPU expectation.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

KERNELZERO_LIBRARY_OPS = ("mm",)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        product = torch.matmul(a, b)
        out = torch.empty_like(product)
        n = out.numel()
        BLOCK = 1024
        copy_kernel[(triton.cdiv(n, BLOCK),)](product, out, n, BLOCK_SIZE=BLOCK)
        return out
