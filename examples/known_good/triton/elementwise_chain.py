import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mul_add_kernel(a_ptr, b_ptr, c_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    c = tl.load(c_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, a * b + alpha * c, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        c = c.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        BLOCK = 1024
        mul_add_kernel[(triton.cdiv(n, BLOCK),)](a, b, c, y, float(self.alpha), n, BLOCK=BLOCK)
        return y
