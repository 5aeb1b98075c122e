"""HACK: under-sized grid -- the kernel covers only the first half of the output (CUDA).

A correct ReLU kernel is launched with half the blocks it needs, so the second half of the output
is never written and keeps whatever `torch.empty_like` returned.

Why it fools a naive harness: half the launch means about half the time, and the unwritten half
looks right whenever the caching allocator hands back the freed reference output (or another
buffer with the answer in it), or when the harness only compares a sample / the first elements.
The stale-memory mechanism is the one tested in ScalingIntelligence/KernelBench PR #82.

Expected: `incorrect` (correctness): free memory is NaN-poisoned before candidate calls.
"""
import torch
import torch.nn as nn
from kernelzero import cuda as kzc

CUDA_SRC = r'''
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        blocks = (n + 255) // 256
        kernels.relu_kernel(grid=(blocks // 2,), block=(256,), args=(x, out, n))
        return out
