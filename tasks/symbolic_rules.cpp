// The shape rule of each kind of API: what output shape a step gives and what inputs it adds.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "tasks/symbolic_builder.h"

namespace kz::symbolic {

namespace {

int64_t conv_out(int64_t in, int64_t k, int64_t st, int64_t pad, int64_t dil = 1) {
    return (in + 2 * pad - dil * (k - 1) - 1) / st + 1;
}

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
    for (int64_t d = std::min(n, cap); d > 1; --d)
        if (n % d == 0) return d;
    return 1;
}

void rule_same_shape(Step&) {}

void rule_transpose(Step& step) {
    auto& out = step.out;
    const auto r = step.r;
    std::swap(out[r - 1], out[r - 2]);
}

void rule_index_half(Step& step) {
    auto& out = step.out;
    const auto r = step.r;
    out[r - 1] = (out[r - 1] + 1) / 2;
}

void rule_topk(Step& step) {
    auto& subs = step.subs;
    auto& out = step.out;
    const auto r = step.r;
    int64_t kk = std::min<int64_t>(std::stoll(subs.count("k") ? subs["k"] : "4"), out[r - 1]);
    subs["k"] = std::to_string(kk);
    out[r - 1] = kk;
}

void rule_binary_same(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto operand = [&](const std::string& v) { return in_domain(v, step.a.domain); };
    subs["y"] = operand(b.new_input(b.shape));
}

void rule_reduce_dim(Step& step) {
    auto& out = step.out;
    const auto dim = step.dim;
    out.erase(out.begin() + dim);
}

void rule_reduce_keepdim(Step& step) {
    auto& out = step.out;
    const auto dim = step.dim;
    out[static_cast<size_t>(dim)] = 1;
}

void rule_norm_channel(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    int64_t c = b.shape[1];
    subs["channels"] = std::to_string(c);
    subs["groups"] = std::to_string(largest_divisor_at_most(c, 4));
}

void rule_linear(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    int64_t n = vary(b.small() ? 48 : 4096, b.rng);
    subs["in_features"] = std::to_string(b.shape.back());
    subs["out_features"] = std::to_string(n);
    out.back() = n;
}

void rule_bilinear(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    b.to_rank(2);
    subs["x"] = b.cur;
    subs["y"] = b.new_input(b.shape);
    int64_t n = b.small() ? 24 : 1024;
    subs["in_features"] = std::to_string(b.shape[1]);
    subs["out_features"] = std::to_string(n);
    out = {b.shape[0], n};
}

void rule_matmul(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    const auto r = step.r;
    int64_t n = vary(b.small() ? 24 : 2048, b.rng);
    Shape y = b.shape;
    y[r - 2] = b.shape[r - 1];
    y[r - 1] = n;
    subs["y"] = b.new_input(y);
    out[r - 1] = n;
}

void rule_matmul_tb(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    int64_t n = b.small() ? 24 : 2048;
    subs["y"] = b.new_input({n, b.shape[1]});
    out = {b.shape[0], n};
}

void rule_matmul_ta(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    int64_t n = b.small() ? 24 : 2048;
    subs["y"] = b.new_input({b.shape[0], n});
    out = {b.shape[1], n};
}

void rule_matvec(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    subs["y"] = b.new_input({b.shape[1], 1});
    out = {b.shape[0], 1};
}

void rule_square_matmul(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    auto operand = [&](const std::string& v) { return in_domain(v, step.a.domain); };
    int64_t s = std::min(b.shape[0], b.shape[1]);
    if (b.shape[0] != b.shape[1]) b.assign(b.cur + "[:" + std::to_string(s) + ", :" + std::to_string(s) + "]", {s, s});
    subs["x"] = operand(b.cur);
    subs["y"] = b.new_input({s, s});
    out = {s, s};
}

void rule_diag_matmul(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    subs["d"] = b.new_input({b.shape[0]});
}

void rule_outer(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    int64_t cap = b.small() ? 64 : 4096;
    if (b.shape[0] > cap) b.assign(b.cur + "[:" + std::to_string(cap) + "]", {cap});
    subs["x"] = b.cur;
    int64_t n = b.small() ? 48 : 4096;
    subs["y"] = b.new_input({n});
    out = {b.shape[0], n};
}

void rule_bmm(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    int64_t n = b.small() ? 8 : 512;
    subs["y"] = b.new_input({b.shape[0], b.shape[2], n});
    out = {b.shape[0], b.shape[1], n};
}

void rule_tensor3_matmul(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    int64_t n = b.small() ? 8 : 512;
    subs["y"] = b.new_input({b.shape[2], n});
    out = {b.shape[0], b.shape[1], n};
}

void rule_attention(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    subs["q"] = b.cur;
    subs["k"] = b.new_input(b.shape);
    subs["v"] = b.new_input(b.shape);
    subs["scale"] = std::to_string(1.0 / std::sqrt(static_cast<double>(b.shape[3])));
}

void rule_mha(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    int64_t e = b.shape[2];
    subs["embed"] = std::to_string(e);
    subs["heads"] = std::to_string(largest_divisor_at_most(e, 8));
}

void rule_conv_or_pool(Step& step) {
    auto& b = step.b;
    auto& a = step.a;
    auto& k = step.k;
    auto& subs = step.subs;
    auto& out = step.out;
    const auto r = step.r;
    const int d = static_cast<int>(r) - 2;
    int64_t cin = b.shape[1];
    int64_t cout = vary(b.small() ? 12 : 64, b.rng);
    int64_t groups = 1;
    if (k == "conv_depthwise") cout = cin;
    if (k == "conv_grouped" || k == "conv_transpose_grouped") {
        groups = largest_divisor_at_most(cin, 4);
        cout = groups * (b.small() ? 3 : 16);
    }
    subs["c_in"] = std::to_string(cin), subs["c_out"] = std::to_string(cout), subs["groups"] = std::to_string(groups);
    int64_t kernel = std::stoll(subs.count("kernel") ? subs["kernel"] : "3");
    int64_t stride = std::stoll(subs.count("stride") ? subs["stride"] : "1");
    int64_t pad = std::stoll(subs.count("padding") ? subs["padding"] : "0");
    int64_t dil = a.module.find("dilation=2") != std::string::npos ? 2 : 1;
    if (a.module.find("padding=1, groups") != std::string::npos || k == "conv_grouped") pad = 1, kernel = 3;
    if (k == "conv_transpose_grouped") kernel = 3, stride = 2, pad = 1;
    if (k == "conv_asym") kernel = 3, pad = 1;  // (3, 5) with (1, 2) keeps every side
    // A kernel larger than the padded input is shrunk (and a pool's padding kept under half of it).
    int64_t smallest = *std::min_element(b.shape.begin() + 2, b.shape.end());
    if (k != "conv_transpose" && k != "conv_transpose_grouped") {
        while (kernel > 1 && dil * (kernel - 1) + 1 > smallest + 2 * pad) --kernel;
        if (k == "pool" && 2 * pad > kernel) pad = kernel / 2;
    } else {
        if (pad >= kernel) pad = kernel - 1;
    }
    subs["kernel"] = std::to_string(kernel), subs["stride"] = std::to_string(stride),
    subs["padding"] = std::to_string(pad);
    subs["output_padding"] = "0";
    out = b.shape;
    out[1] = k == "pool" ? cin : cout;
    for (int i = 0; i < d; ++i) {
        int64_t in = b.shape[2 + i];
        int64_t o;
        if (k == "conv_transpose" || k == "conv_transpose_grouped")
            o = (in - 1) * stride - 2 * pad + kernel;
        else if (k == "conv_asym")
            o = in;
        else
            o = conv_out(in, kernel, stride, pad, dil);
        out[2 + i] = o;
    }
    if (a.name == "lp_pool2d") subs["x"] = in_domain(b.cur, "positive");
}

void rule_adaptive_pool(Step& step) {
    auto& subs = step.subs;
    auto& out = step.out;
    const auto r = step.r;
    int64_t os = std::stoll(subs.count("output_size") ? subs["output_size"] : "1");
    for (size_t i = 2; i < r; ++i) out[i] = os;
}

void rule_global_pool(Step& step) {
    auto& b = step.b;
    auto& out = step.out;
    out = {b.shape[0], b.shape[1]};
}

void rule_flatten(Step& step) {
    auto& b = step.b;
    auto& out = step.out;
    out = {b.shape[0], numel(b.shape) / b.shape[0]};
}

void rule_loss(Step& step) {
    auto& b = step.b;
    auto& a = step.a;
    auto& subs = step.subs;
    auto& out = step.out;
    subs["y"] = b.new_input(b.shape);
    if (a.arity == 3) subs["z"] = b.new_input(b.shape);
    out = {};
}

void rule_loss_triplet(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    b.to_rank(2);
    subs["x"] = b.cur;
    subs["y"] = b.new_input(b.shape);
    subs["z"] = b.new_input(b.shape);
    out = {};
}

void rule_loss_class(Step& step) {
    auto& b = step.b;
    auto& subs = step.subs;
    auto& out = step.out;
    b.as_float();
    b.to_rank(2);
    subs["x"] = b.cur;
    subs["target"] =
        b.new_input({}, "torch.randint(0, " + std::to_string(b.shape[1]) + ", (" + std::to_string(b.shape[0]) + ",))");
    out = {};
}

}  // namespace

ShapeRule shape_rule(const std::string& kind) {
    static const std::map<std::string, ShapeRule> rules = {
        {"same", rule_same_shape},
        {"norm_last", rule_same_shape},
        {"transpose", rule_transpose},
        {"index_half", rule_index_half},
        {"topk", rule_topk},
        {"binary_same", rule_binary_same},
        {"reduce_dim", rule_reduce_dim},
        {"reduce_keepdim", rule_reduce_keepdim},
        {"norm_channel", rule_norm_channel},
        {"linear", rule_linear},
        {"bilinear", rule_bilinear},
        {"matmul", rule_matmul},
        {"matmul_tb", rule_matmul_tb},
        {"matmul_ta", rule_matmul_ta},
        {"matvec", rule_matvec},
        {"square_matmul", rule_square_matmul},
        {"diag_matmul", rule_diag_matmul},
        {"outer", rule_outer},
        {"bmm", rule_bmm},
        {"tensor3_matmul", rule_tensor3_matmul},
        {"attention", rule_attention},
        {"mha", rule_mha},
        {"pool", rule_conv_or_pool},
        {"adaptive_pool", rule_adaptive_pool},
        {"global_pool", rule_global_pool},
        {"flatten", rule_flatten},
        {"loss", rule_loss},
        {"loss_triplet", rule_loss_triplet},
        {"loss_class", rule_loss_class},
    };
    if (auto it = rules.find(kind); it != rules.end()) return it->second;
    if (kind.rfind("conv", 0) == 0) return rule_conv_or_pool;
    throw std::logic_error("no shape rule for kind " + kind);
}

}  // namespace kz::symbolic
