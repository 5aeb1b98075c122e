"""Parity pair (load_inline): the same half-grid ReLU as relu_partial_nvrtc.py. Expected: incorrect."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_half(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_half_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long half = x.numel() / 2;
    int blocks = (int)((half + 255) / 256);
    relu_half<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), half);
    return y;
}
'''
CPP_SRC = "torch::Tensor relu_half_cuda(torch::Tensor x);"

ext = load_inline(name="kz_parity_relu_half", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["relu_half_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_half_cuda(x.contiguous())
