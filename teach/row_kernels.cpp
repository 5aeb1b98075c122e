// Row operators: a reduction, softmax, normalisation or scan along one dimension.
#include <set>
#include <stdexcept>

#include "teach/kernel_writer.h"

namespace kz::teach {

namespace {

// ---- a row operator along one dimension, the value viewed as (outer, R, inner) ----

enum class RowShape { reduce, keepdim, same };

RowShape row_shape(const std::string& api) {
    if (api == "mean_keepdim" || api == "sum_keepdim") return RowShape::keepdim;
    static const std::set<std::string> reduce = {"sum",    "mean",       "amax",      "amin",      "prod",
                                                 "std",    "var",        "norm",      "logsumexp", "argmax",
                                                 "argmin", "max_values", "min_values"};
    return reduce.count(api) ? RowShape::reduce : RowShape::same;
}

// The loop over a row's tiles, loading `t` with the prologue applied and masked lanes set to `fill`.
void row_tile_loop(const Group& g, Kernel& k, const std::string& fill, bool reverse = false) {
    if (reverse) {
        k.body.add(1, "n_tiles = tl.cdiv(R, BLOCK_R)");
        k.body.add(1, "for j in range(0, n_tiles):");
        k.body.add(2, "r0 = (n_tiles - 1 - j) * BLOCK_R");
    } else {
        k.body.add(1, "for r0 in range(0, R, BLOCK_R):");
    }
    k.body.add(2, "rows = r0 + tl.arange(0, BLOCK_R)");
    k.body.add(2, "offs = base[None, :] + rows[:, None] * inner");
    k.body.add(2, "mask = (rows[:, None] < R) & col_ok[None, :]");
    k.body.add(2, "t = tl.load(x_ptr + offs, mask=mask, other=0.0)");
    elementwise_run(g.pre, k, 2, "x.shape[-1]");
    const ForwardStep& a = *g.anchor;
    const std::string domain = operand_domain(a, "x");
    if (domain != "any") k.body.add(2, "t = " + domain_expr("t", domain, k.helpers));
    if (a.api == "prod" || a.api == "cumprod") k.body.add(2, "t = t * 0.1 + 1.0");
    if (a.api == "softmin") k.body.add(2, "t = -t");
    if (!fill.empty()) k.body.add(2, "t = tl.where(mask, t, " + fill + ")");
}

// Stores `t` (the anchor's result at `offs` under `mask`) after the epilogue.
void row_store(const Group& g, Kernel& k, int level) {
    elementwise_run(g.post, k, level, "out.shape[-1]");
    k.body.add(level, "tl.store(out_ptr + offs, t, mask=mask)");
}

void one_pass_reduce(const Group& g, Kernel& k, const std::string& init, const std::string& fill,
                     const std::string& update) {
    k.body.add(1, "acc = tl.full([BLOCK_C], " + init + ", tl.float32)");
    row_tile_loop(g, k, fill);
    k.body.add(2, "acc = " + update);
}

void write_row_reduce(const Group& g, Kernel& k) {
    const std::string& api = g.anchor->api;
    std::string result = "acc";
    if (api == "sum" || api == "sum_keepdim" || api == "mean" || api == "mean_keepdim") {
        one_pass_reduce(g, k, "0.0", "0.0", "acc + tl.sum(t, axis=0)");
        if (api.rfind("mean", 0) == 0) result = "acc / R";
    } else if (api == "amax" || api == "max_values") {
        one_pass_reduce(g, k, "float('-inf')", "float('-inf')", "tl.maximum(acc, tl.max(t, axis=0))");
    } else if (api == "amin" || api == "min_values") {
        one_pass_reduce(g, k, "float('inf')", "float('inf')", "tl.minimum(acc, tl.min(t, axis=0))");
    } else if (api == "prod") {
        k.helpers.insert("_mul");
        one_pass_reduce(g, k, "1.0", "1.0", "acc * tl.reduce(t, 0, _mul)");
    } else if (api == "norm") {
        one_pass_reduce(g, k, "0.0", "0.0", "acc + tl.sum(t * t, axis=0)");
        result = "tl.sqrt(acc)";
    } else if (api == "std" || api == "var") {
        one_pass_reduce(g, k, "0.0", "0.0", "acc + tl.sum(t, axis=0)");
        k.body.add(1, "mean = acc / R");
        k.body.add(1, "acc = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "");
        k.body.add(2, "d = tl.where(mask, t - mean[None, :], 0.0)");
        k.body.add(2, "acc = acc + tl.sum(d * d, axis=0)");
        result = api == "var" ? "acc / (R - 1)" : "tl.sqrt(acc / (R - 1))";
    } else if (api == "logsumexp") {
        one_pass_reduce(g, k, "float('-inf')", "float('-inf')", "tl.maximum(acc, tl.max(t, axis=0))");
        k.body.add(1, "m = acc");
        k.body.add(1, "acc = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "float('-inf')");
        k.body.add(2, "acc = acc + tl.sum(tl.exp(t - m[None, :]), axis=0)");
        result = "m + tl.log(acc)";
    } else if (api == "argmax" || api == "argmin") {
        const bool max = api == "argmax";
        const std::string inf = max ? "float('-inf')" : "float('inf')";
        k.body.add(1, "best = tl.full([BLOCK_C], " + inf + ", tl.float32)");
        k.body.add(1, "idx = tl.zeros([BLOCK_C], dtype=tl.int64)");
        row_tile_loop(g, k, inf);
        // Strictly better only: the first index of equal values wins, as in torch.
        k.body.add(2, std::string("tile_best = tl.") + (max ? "max" : "min") + "(t, axis=0)");
        k.body.add(2, std::string("tile_idx = tl.") + (max ? "argmax" : "argmin") + "(t, axis=0)");
        k.body.add(2, std::string("better = tile_best ") + (max ? ">" : "<") + " best");
        k.body.add(2, "best = tl.where(better, tile_best, best)");
        k.body.add(2, "idx = tl.where(better, r0 + tile_idx.to(tl.int64), idx)");
        result = "idx";
    } else {
        throw std::logic_error("no reduction for " + api);
    }
    k.body.add(1, "t = " + result);
    k.body.add(1, "offs = cols");
    k.body.add(1, "mask = col_ok");
    row_store(g, k, 1);
}

// Row statistics first (softmax, normalisations), then the normalised row written tile by tile.
void write_row_normalize(const Group& g, Kernel& k) {
    const std::string& api = g.anchor->api;
    std::string y;
    if (api == "softmax" || api == "log_softmax" || api == "softmin") {
        k.body.add(1, "m = tl.full([BLOCK_C], float('-inf'), tl.float32)");
        row_tile_loop(g, k, "float('-inf')");
        k.body.add(2, "m = tl.maximum(m, tl.max(t, axis=0))");
        k.body.add(1, "z = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "float('-inf')");
        k.body.add(2, "z = z + tl.sum(tl.exp(t - m[None, :]), axis=0)");
        y = api == "log_softmax" ? "t - m[None, :] - tl.log(z)[None, :]" : "tl.exp(t - m[None, :]) / z[None, :]";
    } else if (api == "normalize" || api == "rms_norm") {
        k.body.add(1, "ss = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "0.0");
        k.body.add(2, "ss = ss + tl.sum(t * t, axis=0)");
        if (api == "normalize") {
            y = "t / tl.maximum(tl.sqrt(ss), 1e-12)[None, :]";
        } else {
            // nn.RMSNorm without eps uses the dtype's machine epsilon.
            k.body.add(1, "scale = tl.rsqrt(ss / R + 1.1920928955078125e-07)");
            y = "t * scale[None, :] * tl.load(w_ptr + rows, mask=rows < R, other=0.0)[:, None]";
        }
    } else if (api == "l1_normalize") {
        k.body.add(1, "s = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "0.0");
        k.body.add(2, "s = s + tl.sum(tl.abs(t), axis=0)");
        y = "t / s[None, :]";
    } else if (api == "layer_norm") {
        k.body.add(1, "s = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "0.0");
        k.body.add(2, "s = s + tl.sum(t, axis=0)");
        k.body.add(1, "mean = s / R");
        k.body.add(1, "v = tl.zeros([BLOCK_C], dtype=tl.float32)");
        row_tile_loop(g, k, "");
        k.body.add(2, "d = tl.where(mask, t - mean[None, :], 0.0)");
        k.body.add(2, "v = v + tl.sum(d * d, axis=0)");
        k.body.add(1, "rstd = tl.rsqrt(v / R + 1e-05)");
        y = "(t - mean[None, :]) * rstd[None, :] * tl.load(w_ptr + rows, mask=rows < R, other=0.0)[:, None]"
            " + tl.load(b_ptr + rows, mask=rows < R, other=0.0)[:, None]";
    } else {
        throw std::logic_error("no normalisation for " + api);
    }
    row_tile_loop(g, k, "");
    k.body.add(2, "t = " + y);
    row_store(g, k, 2);
}

void write_row_scan(const Group& g, Kernel& k) {
    const std::string& api = g.anchor->api;
    std::string init = "0.0", fill = "0.0", scan, carry;
    if (api == "cumsum" || api == "exclusive_cumsum" || api == "reverse_cumsum") {
        scan = std::string("tl.cumsum(t, axis=0") + (api == "reverse_cumsum" ? ", reverse=True" : "") +
               ") + carry[None, :]";
        carry = "carry + tl.sum(t, axis=0)";
    } else if (api == "cumprod") {
        k.helpers.insert("_mul");
        init = fill = "1.0";
        scan = "tl.cumprod(t, axis=0) * carry[None, :]";
        carry = "carry * tl.reduce(t, 0, _mul)";
    } else if (api == "cummax" || api == "cummin") {
        const bool max = api == "cummax";
        const std::string f = max ? "tl.maximum" : "tl.minimum";
        k.helpers.insert(max ? "_max" : "_min");
        init = fill = max ? "float('-inf')" : "float('inf')";
        scan = f + "(tl.associative_scan(t, 0, " + (max ? "_max" : "_min") + "), carry[None, :])";
        carry = f + "(carry, tl." + (max ? "max" : "min") + "(t, axis=0))";
    } else {
        throw std::logic_error("no scan for " + api);
    }
    k.body.add(1, "carry = tl.full([BLOCK_C], " + init + ", tl.float32)");
    row_tile_loop(g, k, fill, api == "reverse_cumsum");
    k.body.add(2, "y = " + scan);
    k.body.add(2, "carry = " + carry);
    k.body.add(2, api == "exclusive_cumsum" ? "t = y - t" : "t = y");
    row_store(g, k, 2);
}

}  // namespace

void write_row(const Group& g, Kernel& k, Code& fwd, const std::string& x) {
    const ForwardStep& a = *g.anchor;
    const int64_t rank = static_cast<int64_t>(a.in_shape.size());
    const int64_t d = a.kind == "norm_last" ? rank - 1 : std::stoll(a.params.at("dim"));
    // The module's attribute where it has one, so that the launcher names what the prompt names.
    const std::string D = a.dim_attr.empty() ? std::to_string(d) : a.dim_attr;
    const std::string D1 = a.dim_attr.empty() ? std::to_string(d + 1) : a.dim_attr + " + 1";
    const RowShape shape = row_shape(a.api);
    load_input(g, fwd, x);
    fwd.add(2, "outer, R, inner = x.shape[:" + D + "].numel(), x.shape[" + D + "], x.shape[" + D1 + ":].numel()");
    if (shape == RowShape::same) {
        fwd.add(2, "out = torch.empty_like(x)");
    } else {
        const std::string dims = shape == RowShape::keepdim ? "x.shape[:" + D + "] + (1,) + x.shape[" + D1 + ":]"
                                                            : "x.shape[:" + D + "] + x.shape[" + D1 + ":]";
        const bool index = a.api == "argmax" || a.api == "argmin";
        fwd.add(2, "out = torch.empty(" + dims +
                       ", device=x.device, dtype=" + (index ? "torch.int64" : "torch.float32") + ")");
    }
    fwd.add(2, "BLOCK_R = min(triton.next_power_of_2(R), 2048)");
    fwd.add(2, "BLOCK_C = min(triton.next_power_of_2(outer * inner), max(1, 4096 // BLOCK_R))");
    k.arg("x_ptr", "x");
    k.arg("out_ptr", "out");
    k.arg("R", "R");
    k.arg("inner", "inner");
    k.arg("n_cols", "outer * inner");
    if (a.api == "layer_norm" || a.api == "rms_norm") k.arg("w_ptr", a.module + ".weight");
    if (a.api == "layer_norm") k.arg("b_ptr", a.module + ".bias");
    k.constexprs = {"BLOCK_R", "BLOCK_C"};
    // A column is one (outer, inner) position: BLOCK_C of them at once, each a row of R values.
    k.body.add(1, "cols = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)");
    k.body.add(1, "col_ok = cols < n_cols");
    k.body.add(1, "base = (cols // inner) * R * inner + cols % inner");
    if (shape != RowShape::same)
        write_row_reduce(g, k);
    else if (a.api.rfind("cum", 0) == 0 || a.api.find("_cumsum") != std::string::npos)
        write_row_scan(g, k);
    else
        write_row_normalize(g, k);
    fwd.add(2, k.launch("(triton.cdiv(outer * inner, BLOCK_C),)", {"BLOCK_R", "BLOCK_C"}));
}

}  // namespace kz::teach
