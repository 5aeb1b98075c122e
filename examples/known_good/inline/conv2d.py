import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Direct convolution, NCHW, one thread per output element (n, co, oh, ow); zero padding by bounds checks.
CUDA_SRC = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ b, float* __restrict__ y,
                              int N, int C, int H, int W, int C_out, int KH, int KW,
                              int OH, int OW, int stride, int pad) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)N * C_out * OH * OW;
    if (idx >= total) return;
    int ow = (int)(idx % OW);
    long long t = idx / OW;
    int oh = (int)(t % OH);
    t /= OH;
    int co = (int)(t % C_out);
    int n = (int)(t / C_out);
    float acc = b[co];
    for (int ci = 0; ci < C; ++ci) {
        const float* xp = x + ((long long)n * C + ci) * H * W;
        const float* wp = w + ((long long)co * C + ci) * KH * KW;
        for (int kh = 0; kh < KH; ++kh) {
            int ih = oh * stride - pad + kh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int iw = ow * stride - pad + kw;
                if (iw < 0 || iw >= W) continue;
                acc += xp[(long long)ih * W + iw] * wp[kh * KW + kw];
            }
        }
    }
    y[idx] = acc;
}

torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t stride, int64_t pad) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1) && b.numel() == w.size(0),
                "shape mismatch");
    const at::cuda::OptionalCUDAGuard device_guard(x.device());
    x = x.contiguous();
    w = w.contiguous();
    b = b.contiguous();
    const int N = (int)x.size(0), C = (int)x.size(1), H = (int)x.size(2), W = (int)x.size(3);
    const int C_out = (int)w.size(0), KH = (int)w.size(2), KW = (int)w.size(3);
    const int OH = (H + 2 * (int)pad - KH) / (int)stride + 1;
    const int OW = (W + 2 * (int)pad - KW) / (int)stride + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "empty output");
    auto y = torch::empty({N, C_out, OH, OW}, x.options());
    const long long total = (long long)N * C_out * OH * OW;
    if (total == 0) return y;
    const int threads = 256;
    const unsigned blocks = (unsigned)((total + threads - 1) / threads);
    conv2d_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
        N, C, H, W, C_out, KH, KW, OH, OW, (int)stride, (int)pad);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
'''

CPP_SRC = ("torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, "
           "int64_t stride, int64_t pad);")

conv2d_ext = load_inline(
    name="kz_conv2d_inline",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["conv2d_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=padding, bias=True)
        self.ext = conv2d_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.conv2d_forward(x, self.conv.weight, self.conv.bias,
                                       int(self.conv.stride[0]), int(self.conv.padding[0]))
