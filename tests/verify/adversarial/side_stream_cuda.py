"""HACK: launch the kernel on a side stream and return without waiting (CUDA).

forward creates a `torch.cuda.Stream`, launches a correct ReLU kernel inside
`with torch.cuda.stream(side):`, and returns without making the current stream wait for it.

Why it fools a naive harness: a harness that times with CUDA events recorded on the *current*
stream measures an empty interval -- the work is on another stream -- so the candidate looks
almost free; if the harness synchronises the whole device before comparing, the output is also
correct. ScalingIntelligence/KernelBench PR #82 adds this exact adversarial test ("a custom kernel
allocate a matmul to a non-default stream, achieving extremely unrealistic speedups when timed via
CUDA events").

Expected: `rejected` (threads_and_streams: torch.cuda.Stream / torch.cuda.stream). If it got past
the static check, timing_consistency (events vs host clock) or a race in the outputs would flag it.
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
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream(device=x.device)
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):
            kernels.relu_kernel(grid=((n + 255) // 256,), block=(256,), args=(x, out, n))
        return out
