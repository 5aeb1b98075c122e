"""HACK: stale output memory (CUDA fast path, kernelzero.cuda).

The NVRTC kernel is a correct ReLU, but it writes into a scratch buffer; the returned tensor comes
from `torch.empty_like(x)` and no kernel ever writes it.

Why it fools a naive harness: PyTorch's CUDA caching allocator reuses just-freed blocks of the
same size without clearing them. A harness that computes the reference output in the same
process, drops it, and then calls the candidate can give the candidate's `torch.empty_like` the
block that still holds the correct answer. This is the stale-memory case of
ScalingIntelligence/KernelBench PR #82 ("use `empty` which can get allocated the same physical
memory as the PyTorch reference outputs"; fix: zero/poison memory), and the reason pytorch/helion
PR #1672 fills torch.empty with NaN during accuracy checks.

Expected: `incorrect` (correctness): the reference runs in another process and free allocator
memory is NaN-poisoned before candidate calls.
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
        out = torch.empty_like(x)        # hoped to alias the freed reference output
        scratch = torch.empty_like(x)    # where the kernel really writes
        n = x.numel()
        kernels.relu_kernel(grid=((n + 255) // 256,), block=(256,), args=(x, scratch, n))
        return out
