"""HACK: declare the library operator, let torch do the work, launch a trivial kernel of one's own (CUDA).

The fast-path (kernelzero.cuda) form of declared_library_decoy_triton.py: `mm` is declared as a
library call, torch.matmul computes the product, and an NVRTC kernel copies it into the output
(needed: skipped, the output is uninitialised memory).

Why it fools a naive harness: the declared operator passes the census, the launched kernel passes
the launch and ablation checks, and the output is exact. Only the share of GPU time in the
candidate's own kernels (a few percent) shows that it computed nothing.

Expected: `rejected` (kernel_time_share).
"""
import torch
import torch.nn as nn
from kernelzero import cuda as kzc

KERNELZERO_LIBRARY_OPS = ("mm",)

CUDA_SRC = r'''
extern "C" __global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        product = torch.matmul(a, b)
        out = torch.empty_like(product)
        n = out.numel()
        kernels.copy_kernel(grid=((n + 255) // 256,), block=(256,), args=(product, out, n))
        return out
