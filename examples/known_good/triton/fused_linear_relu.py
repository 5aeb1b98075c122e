import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fused_linear_relu_kernel(x_ptr, w_ptr, lb_ptr, b2_ptr, y_ptr, M, N, scale, K: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # y[m, n] = relu(sum_k x[m, k] * w[n, k] + lb[n]) * scale + b2[n]
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + rn[None, :] * K + kk[:, None],
                     mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, wt, input_precision="ieee")
    lb = tl.load(lb_ptr + rn, mask=rn < N, other=0.0)
    b2 = tl.load(b2_ptr + rn, mask=rn < N, other=0.0)
    acc = tl.maximum(acc + lb[None, :], 0.0) * scale + b2[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        lb = self.linear.bias.contiguous()
        b2 = self.bias.contiguous()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BM, BN, BK = 32, 32, 16
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        fused_linear_relu_kernel[grid](x, w, lb, b2, y, M, N, float(self.scale), K=K,
                                       BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
        return y
