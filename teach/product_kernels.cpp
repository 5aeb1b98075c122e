// Matrix products and convolutions: tiles of a (M, K) x (K, N) product, accumulated in fp32 with
// tl.dot, with the group's epilogue applied before the store.
#include <stdexcept>

#include "teach/kernel_writer.h"

namespace kz::teach {

// ---- a matrix product as a batch of (M, K) x (K, N), operands read through their strides ----

void write_matmul(const Group& g, Kernel& k, Code& fwd) {
    const ForwardStep& a = *g.anchor;
    const std::string& api = a.api;
    const std::string x = operand_name(a, "x");
    std::string bias, epilogue;
    auto y = [&] { return operand_name(a, "y"); };
    // Each case sets A (Bt, M, K) and B (Bt, K, N) as tensors or views, and the output's shape.
    if (api == "linear" || api == "linear_nobias") {
        fwd.add(2, "x = " + x + ".contiguous()");
        fwd.add(2, "A = x.reshape(1, -1, x.shape[-1])");
        fwd.add(2, "B = " + a.module + ".weight.t().unsqueeze(0)");
        fwd.add(2, "out_shape = x.shape[:-1] + (B.shape[2],)");
        if (api == "linear") bias = a.module + ".bias";
    } else if (api == "matmul" || api == "batched_matmul_4d" || api == "matvec") {
        fwd.add(2, "x, y = " + x + ".contiguous(), " + y() + ".contiguous()");
        fwd.add(2, "A = x.reshape(-1, x.shape[-2], x.shape[-1])");
        fwd.add(2, "B = y.reshape(-1, y.shape[-2], y.shape[-1])");
        fwd.add(2, "out_shape = x.shape[:-1] + (y.shape[-1],)");
    } else if (api == "mm_transposed_b") {
        fwd.add(2, "x, y = " + x + ".contiguous(), " + y() + ".contiguous()");
        fwd.add(2, "A, B = x.unsqueeze(0), y.t().unsqueeze(0)");
        fwd.add(2, "out_shape = (x.shape[0], y.shape[0])");
    } else if (api == "mm_transposed_a") {
        fwd.add(2, "x, y = " + x + ".contiguous(), " + y() + ".contiguous()");
        fwd.add(2, "A, B = x.t().unsqueeze(0), y.unsqueeze(0)");
        fwd.add(2, "out_shape = (x.shape[1], y.shape[1])");
    } else if (api == "bmm" || api == "baddbmm") {
        fwd.add(2, "A, B = " + x + ".contiguous(), " + y() + ".contiguous()");
        fwd.add(2, "out_shape = (A.shape[0], A.shape[1], B.shape[2])");
        if (api == "baddbmm") epilogue = "t = t * 0.5";
    } else if (api == "einsum_bij_jk") {
        fwd.add(2, "x, y = " + x + ".contiguous(), " + y() + ".contiguous()");
        fwd.add(2, "A, B = x.reshape(1, -1, x.shape[2]), y.unsqueeze(0)");
        fwd.add(2, "out_shape = (x.shape[0], x.shape[1], y.shape[1])");
    } else if (api == "tril_matmul" || api == "triu_matmul") {
        fwd.add(2, "A, B = " + x + ".contiguous().unsqueeze(0), " + y() + ".contiguous().unsqueeze(0)");
        fwd.add(2, "out_shape = (A.shape[1], B.shape[2])");
        epilogue =
            std::string("t = tl.where(rn[None, :] ") + (api == "tril_matmul" ? "<=" : ">=") + " rm[:, None], t, 0.0)";
    } else if (api == "outer") {
        fwd.add(2, "x, y = " + x + ".contiguous(), " + y() + ".contiguous()");
        fwd.add(2, "A, B = x.reshape(1, -1, 1), y.reshape(1, 1, -1)");
        fwd.add(2, "out_shape = (x.shape[0], y.shape[0])");
    } else {
        throw std::logic_error("no matrix product for " + api);
    }
    fwd.add(2, "Bt, M, K = A.shape");
    fwd.add(2, "N = B.shape[2]");
    fwd.add(2, "out = torch.empty(out_shape, device=A.device, dtype=torch.float32)");
    fwd.add(2, "BLOCK_M = min(64, max(16, triton.next_power_of_2(M)))");
    fwd.add(2, "BLOCK_N = min(64, max(16, triton.next_power_of_2(N)))");
    k.arg("a_ptr", "A");
    k.arg("b_ptr", "B");
    k.arg("out_ptr", "out");
    for (const char* p : {"M", "N", "K"}) k.arg(p, p);
    k.arg("s_ab", "A.stride(0)"), k.arg("s_am", "A.stride(1)"), k.arg("s_ak", "A.stride(2)");
    k.arg("s_bb", "B.stride(0)"), k.arg("s_bk", "B.stride(1)"), k.arg("s_bn", "B.stride(2)");
    if (!bias.empty()) k.arg("bias_ptr", bias);
    k.constexprs = {"BLOCK_M", "BLOCK_N", "BLOCK_K"};
    Code& c = k.body;
    c.add(1, "bat = tl.program_id(2).to(tl.int64)");
    c.add(1, "rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)");
    c.add(1, "rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)");
    c.add(1, "rk = tl.arange(0, BLOCK_K)");
    c.add(1, "a_ptr += bat * s_ab");
    c.add(1, "b_ptr += bat * s_bb");
    c.add(1, "acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)");
    c.add(1, "for k0 in range(0, K, BLOCK_K):");
    c.add(2, "kk = k0 + rk");
    c.add(2, "a = tl.load(a_ptr + rm[:, None] * s_am + kk[None, :] * s_ak,");
    c.add(2, "            mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)");
    c.add(2, "b = tl.load(b_ptr + kk[:, None] * s_bk + rn[None, :] * s_bn,");
    c.add(2, "            mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)");
    // fp32 products as torch computes them: TF32 would miss the verifier's 1e-2 tolerance at large K.
    c.add(2, "acc += tl.dot(a, b, input_precision=\"ieee\")");
    c.add(1, "t = acc");
    if (!bias.empty()) c.add(1, "t = t + tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]");
    if (!epilogue.empty()) c.add(1, epilogue);
    c.add(1, "mask = (rm[:, None] < M) & (rn[None, :] < N)");
    c.add(1, "offs = bat * M * N + rm[:, None] * N + rn[None, :]");
    elementwise_run(g.post, k, 1, "N");
    c.add(1, "tl.store(out_ptr + offs, t, mask=mask)");
    fwd.add(2, k.launch("(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), Bt)", {"BLOCK_M", "BLOCK_N", "32"}));
}

// ---- a convolution as an implicit product: (output positions, C_in/groups x kernel) x (that, C_out) ----

void write_conv(const Group& g, Kernel& k, Code& fwd) {
    const ForwardStep& a = *g.anchor;
    // 1-D and 2-D convolutions as 3-D ones with leading spatial sizes of 1; the module's own stride,
    // padding, dilation and groups, so that one kernel serves every convolution of the catalog.
    fwd.add(2, "m = " + a.module);
    fwd.add(2, "x = " + operand_name(a, "x") + ".contiguous()");
    fwd.add(2, "d = x.dim() - 2");
    fwd.add(2, "lead = (1,) * (3 - d)");
    fwd.add(2, "xs = x.reshape(tuple(x.shape[:2]) + lead + tuple(x.shape[2:]))");
    fwd.add(2, "w = m.weight.contiguous()");
    fwd.add(2, "w = w.reshape(tuple(w.shape[:2]) + lead + tuple(w.shape[2:]))");
    fwd.add(2, "st, pd, dl = lead + tuple(m.stride), (0,) * (3 - d) + tuple(m.padding), lead + tuple(m.dilation)");
    fwd.add(2, "N, C, D, H, W = xs.shape");
    fwd.add(2, "CO, CG, KD, KH, KW = w.shape");
    fwd.add(2, "OD, OH, OW = [(n + 2 * p - q * (kk - 1) - 1) // s + 1");
    fwd.add(2, "              for n, p, q, kk, s in zip((D, H, W), pd, dl, (KD, KH, KW), st)]");
    fwd.add(2, "out = torch.empty((N, CO) + (OD, OH, OW)[3 - d:], device=x.device, dtype=torch.float32)");
    fwd.add(2, "COG = CO // m.groups");
    fwd.add(2, "P = N * OD * OH * OW");
    fwd.add(2, "BLOCK_CO = min(64, max(16, triton.next_power_of_2(COG)))");
    k.arg("x_ptr", "xs");
    k.arg("w_ptr", "w");
    k.arg("out_ptr", "out");
    k.arg("bias_ptr", "m.bias");  // every convolution of the catalog has its bias
    for (const char* p : {"C", "D", "H", "W", "CO", "CG", "KD", "KH", "KW", "OD", "OH", "OW", "P", "COG"}) k.arg(p, p);
    k.arg("SD", "st[0]"), k.arg("SH", "st[1]"), k.arg("SW", "st[2]");
    k.arg("PD", "pd[0]"), k.arg("PH", "pd[1]"), k.arg("PW", "pd[2]");
    k.arg("DD", "dl[0]"), k.arg("DH", "dl[1]"), k.arg("DW", "dl[2]");
    k.constexprs = {"BLOCK_P", "BLOCK_CO", "BLOCK_K"};
    Code& c = k.body;
    c.add(1, "grp = tl.program_id(2)");
    c.add(1, "p = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)");
    c.add(1, "cog = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)");
    c.add(1, "co = grp * COG + cog");
    c.add(1, "p_ok = p < P");
    c.add(1, "co_ok = cog < COG");
    c.add(1, "ow = p % OW");
    c.add(1, "oh = (p // OW) % OH");
    c.add(1, "od = (p // (OW * OH)) % OD");
    c.add(1, "n = p // (OW * OH * OD)");
    c.add(1, "R = CG * KD * KH * KW");
    c.add(1, "acc = tl.zeros([BLOCK_P, BLOCK_CO], dtype=tl.float32)");
    c.add(1, "for r0 in range(0, R, BLOCK_K):");
    c.add(2, "r = r0 + tl.arange(0, BLOCK_K)");
    c.add(2, "r_ok = r < R");
    c.add(2, "kw = r % KW");
    c.add(2, "kh = (r // KW) % KH");
    c.add(2, "kd = (r // (KW * KH)) % KD");
    c.add(2, "ci = grp * CG + r // (KW * KH * KD)");
    c.add(2, "i_d = od[:, None] * SD - PD + kd[None, :] * DD");
    c.add(2, "i_h = oh[:, None] * SH - PH + kh[None, :] * DH");
    c.add(2, "i_w = ow[:, None] * SW - PW + kw[None, :] * DW");
    c.add(2, "ok = p_ok[:, None] & r_ok[None, :] & (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H)");
    c.add(2, "ok = ok & (i_w >= 0) & (i_w < W)");
    c.add(2,
          "a = tl.load(x_ptr + (((n[:, None] * C + ci[None, :]) * D + i_d) * H + i_h) * W + i_w, mask=ok, other=0.0)");
    c.add(2, "b = tl.load(w_ptr + co[None, :] * R + r[:, None], mask=r_ok[:, None] & co_ok[None, :], other=0.0)");
    c.add(2, "acc += tl.dot(a, b, input_precision=\"ieee\")");
    c.add(1, "t = acc");
    c.add(1, "t = t + tl.load(bias_ptr + co, mask=co_ok, other=0.0)[None, :]");
    c.add(1, "S = OD * OH * OW");
    c.add(1, "offs = (n * CO * S + p % S)[:, None] + co[None, :] * S");
    c.add(1, "mask = p_ok[:, None] & co_ok[None, :]");
    elementwise_run(g.post, k, 1, "out.shape[-1]");
    c.add(1, "tl.store(out_ptr + offs, t, mask=mask)");
    fwd.add(2, k.launch("(triton.cdiv(P, 64), triton.cdiv(COG, BLOCK_CO), m.groups)", {"64", "BLOCK_CO", "32"}));
}

}  // namespace kz::teach
