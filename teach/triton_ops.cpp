#include "teach/triton_ops.h"

#include <stdexcept>

namespace kz::teach {

namespace {

// Each expression reads the variable `t`; torch's formula where it has one (docs of torch.nn.functional).
const std::map<std::string, ElementwiseRule>& elementwise_rules() {
    static const std::map<std::string, ElementwiseRule> rules = {
        // activations
        {"relu", {"tl.maximum(t, 0.0)", {}}},
        {"leaky_relu", {"tl.where(t >= 0, t, 0.01 * t)", {}}},
        {"gelu", {"0.5 * t * (1.0 + tl.erf(t * 0.7071067811865476))", {}}},
        {"gelu_tanh", {"0.5 * t * (1.0 + _tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)))", {"_tanh"}}},
        {"silu", {"t * tl.sigmoid(t)", {}}},
        {"sigmoid", {"tl.sigmoid(t)", {}}},
        {"tanh", {"_tanh(t)", {"_tanh"}}},
        {"elu", {"tl.where(t > 0, t, tl.exp(t) - 1.0)", {}}},
        {"selu", {"1.0507009873554805 * tl.where(t > 0, t, 1.6732632423543772 * (tl.exp(t) - 1.0))", {}}},
        {"celu", {"tl.where(t > 0, t, tl.exp(t) - 1.0)", {}}},
        {"softplus", {"_softplus(t)", {"_softplus"}}},
        {"softsign", {"t / (1.0 + tl.abs(t))", {}}},
        {"mish", {"t * _tanh(_softplus(t))", {"_tanh", "_softplus"}}},
        {"hardtanh", {"tl.minimum(tl.maximum(t, -1.0), 1.0)", {}}},
        {"hardsigmoid", {"tl.minimum(tl.maximum(t / 6.0 + 0.5, 0.0), 1.0)", {}}},
        {"hardswish", {"t * tl.minimum(tl.maximum(t + 3.0, 0.0), 6.0) / 6.0", {}}},
        {"relu6", {"tl.minimum(tl.maximum(t, 0.0), 6.0)", {}}},
        {"logsigmoid", {"tl.minimum(t, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(t)))", {}}},
        {"tanhshrink", {"t - _tanh(t)", {"_tanh"}}},
        {"softshrink", {"tl.where(t > 0.5, t - 0.5, tl.where(t < -0.5, t + 0.5, 0.0))", {}}},
        {"hardshrink", {"tl.where(tl.abs(t) > 0.5, t, 0.0)", {}}},
        {"prelu", {"tl.where(t >= 0, t, {w} * t)", {}}},
        // elementwise
        {"exp", {"tl.exp(t)", {}}},
        {"log", {"tl.log(t)", {}}},
        {"log1p", {"tl.log(1.0 + t)", {}}},
        {"sqrt", {"tl.sqrt(t)", {}}},
        {"rsqrt", {"tl.rsqrt(t)", {}}},
        {"abs", {"tl.abs(t)", {}}},
        {"neg", {"-t", {}}},
        {"square", {"t * t", {}}},
        {"reciprocal", {"1.0 / t", {}}},
        {"sin", {"tl.sin(t)", {}}},
        {"cos", {"tl.cos(t)", {}}},
        {"erf", {"tl.erf(t)", {}}},
        {"clamp", {"tl.minimum(tl.maximum(t, -0.5), 0.5)", {}}},
        {"sign", {"tl.where(t > 0, 1.0, tl.where(t < 0, -1.0, 0.0))", {}}},
        {"floor", {"tl.floor(t * 4.0)", {}}},
        {"round", {"_rint(t * 4.0)", {"_rint"}}},
        {"scale", {"t * {scalar}", {}}},
        {"add_scalar", {"t + {scalar}", {}}},
        {"pow_scalar", {"t * t", {}}},
        {"bias_add", {"t + {b}", {}}},
        {"add", {"t + {y}", {}}},
        {"sub", {"t - {y}", {}}},
        {"mul", {"t * {y}", {}}},
        {"div", {"t / {y}", {}}},
        {"maximum", {"tl.maximum(t, {y})", {}}},
        {"minimum", {"tl.minimum(t, {y})", {}}},
        {"hypot", {"tl.sqrt(t * t + {y} * {y})", {}}},
        {"where_gt", {"tl.where(t > {y}, t, {y})", {}}},
        {"lerp", {"t + 0.3 * ({y} - t)", {}}},
        {"addcmul", {"t + 0.5 * t * {y}", {}}},
        // indexing that is elementwise
        {"masked_fill_neg", {"tl.where(t < 0, 0.0, t)", {}}},
    };
    return rules;
}

const std::set<std::string>& row_apis() {
    static const std::set<std::string> apis = {"sum",
                                               "mean",
                                               "amax",
                                               "amin",
                                               "prod",
                                               "std",
                                               "var",
                                               "norm",
                                               "logsumexp",
                                               "argmax",
                                               "argmin",
                                               "max_values",
                                               "min_values",
                                               "mean_keepdim",
                                               "sum_keepdim",
                                               "softmax",
                                               "log_softmax",
                                               "softmin",
                                               "normalize",
                                               "l1_normalize",
                                               "layer_norm",
                                               "rms_norm",
                                               "cumsum",
                                               "cumprod",
                                               "cummax",
                                               "cummin",
                                               "reverse_cumsum",
                                               "exclusive_cumsum"};
    return apis;
}

const std::set<std::string>& matmul_apis() {
    static const std::set<std::string> apis = {
        "linear", "linear_nobias", "matmul",      "mm_transposed_a", "mm_transposed_b", "bmm",    "batched_matmul_4d",
        "matvec", "tril_matmul",   "triu_matmul", "einsum_bij_jk",   "outer",           "baddbmm"};
    return apis;
}

const std::set<std::string>& conv_apis() {
    static const std::set<std::string> apis = {
        "conv1d", "conv1d_dilated", "conv1d_depthwise", "conv2d",         "conv2d_dilated",    "conv2d_depthwise",
        "conv3d", "conv3d_dilated", "conv3d_depthwise", "conv2d_grouped", "conv2d_asymmetric", "conv_pointwise"};
    return apis;
}

}  // namespace

Family family_of(const ForwardStep& step) {
    if (elementwise_rules().count(step.api)) return Family::elementwise;
    if (row_apis().count(step.api)) return Family::row;
    if (matmul_apis().count(step.api)) return Family::matmul;
    if (conv_apis().count(step.api)) return Family::conv;
    if (step.api == "flatten") return Family::layout;
    return Family::unsupported;
}

const ElementwiseRule* elementwise_rule(const std::string& api) {
    auto it = elementwise_rules().find(api);
    return it == elementwise_rules().end() ? nullptr : &it->second;
}

const std::string& helper_source(const std::string& name) {
    // tanh through exp: Triton's language has no tanh of its own (tl.math lists none).
    static const std::map<std::string, std::string> helpers = {
        {"_tanh", "@triton.jit\ndef _tanh(x):\n    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)\n"},
        {"_softplus", "@triton.jit\ndef _softplus(x):\n    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))\n"},
        {"_mul", "@triton.jit\ndef _mul(a, b):\n    return a * b\n"},
        {"_max", "@triton.jit\ndef _max(a, b):\n    return tl.maximum(a, b)\n"},
        {"_min", "@triton.jit\ndef _min(a, b):\n    return tl.minimum(a, b)\n"},
        // torch.round rounds half to even.
        {"_rint",
         "@triton.jit\ndef _rint(x):\n    r = tl.floor(x + 0.5)\n"
         "    return tl.where((r - x == 0.5) & (r - 2.0 * tl.floor(r * 0.5) != 0.0), r - 1.0, r)\n"},
    };
    auto it = helpers.find(name);
    if (it == helpers.end()) throw std::logic_error("no teacher helper " + name);
    return it->second;
}

std::string domain_expr(const std::string& v, const std::string& domain, std::set<std::string>& helpers) {
    if (domain == "positive") return "(tl.abs(" + v + ") + 0.1)";
    if (domain == "bounded") {
        helpers.insert("_tanh");
        return "_tanh(" + v + ")";
    }
    return v;
}

std::string Code::str() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

std::string substitute(std::string text, const std::map<std::string, std::string>& subs) {
    for (const auto& [key, value] : subs) {
        const std::string pat = "{" + key + "}";
        for (size_t at = text.find(pat); at != std::string::npos; at = text.find(pat, at + value.size()))
            text.replace(at, pat.size(), value);
    }
    return text;
}

}  // namespace kz::teach
