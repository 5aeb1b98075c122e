#include "tasks/symbolic.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace kz {

namespace {

using Shape = std::vector<int64_t>;

const std::vector<std::string> kHeavy = {"convolution", "transposed_convolution", "linear_algebra", "attention"};
const std::vector<std::string> kEpilogue = {"activation", "elementwise", "reduction", "normalization",
                                            "pooling",    "softmax",     "scan"};

template <class T>
const T& pick(const std::vector<T>& v, std::mt19937_64& rng) {
    if (v.empty()) throw std::logic_error("pick from an empty set");
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

std::string shape_args(const Shape& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r;
}

// Where an API goes in the forward: spatial heavy operators first, losses last.
int stage_of(const ApiSpec& a) {
    const std::string& k = a.kind;
    if (k.rfind("conv", 0) == 0 || k == "pool" || k == "attention" || k == "mha") return 0;
    if (k == "norm_channel" || k == "adaptive_pool" || k == "global_pool") return 1;
    if (a.category == "linear_algebra" || k == "flatten") return 2;
    if (k == "reduce_dim") return 4;
    if (a.output == "index") return 5;
    if (a.category == "loss") return 6;
    return 3;
}

struct Builder {
    const ApiSpec* api = nullptr;
    SizeProfile sizes;
    std::mt19937_64& rng;
    std::vector<std::string> init, body, input_exprs, params;
    std::string cur;  // the running value
    Shape shape;      // its shape (empty: 0-dim)
    bool is_index = false;
    int vars = 0, mods = 0;

    Builder(SizeProfile s, std::mt19937_64& r) : sizes(s), rng(r) {}
    bool small() const { return sizes == SizeProfile::small; }

    std::string new_input(const Shape& s, const std::string& expr = "") {
        std::string name = "a" + std::to_string(params.size());
        params.push_back(name);
        input_exprs.push_back(expr.empty() ? "torch.randn(" + shape_args(s) + ")" : expr);
        return name;
    }
    void assign(const std::string& expr, Shape s) {
        std::string v = "v" + std::to_string(++vars);
        body.push_back(v + " = " + expr);
        cur = v;
        shape = std::move(s);
    }
    int64_t dim(size_t i) const { return shape.at(i); }

    // Reshapes the running value to `rank` dims: trailing dims merged, or leading ones added.
    void to_rank(size_t rank) {
        if (shape.size() == rank) return;
        Shape s;
        if (shape.size() > rank) {
            s.assign(shape.begin(), shape.begin() + static_cast<long>(rank) - 1);
            s.push_back(numel(shape) / std::max<int64_t>(1, numel(s)));
        } else {
            s.assign(rank - shape.size(), 1);
            s.insert(s.end(), shape.begin(), shape.end());
        }
        assign(cur + ".reshape(" + shape_args(s) + ")", s);
    }
    void fit_rank(const ApiSpec& a) {
        if (static_cast<int>(shape.size()) > a.max_rank) to_rank(static_cast<size_t>(a.max_rank));
        if (static_cast<int>(shape.size()) < a.min_rank) to_rank(static_cast<size_t>(a.min_rank));
    }
    void as_float() {
        if (is_index) {
            assign(cur + ".float()", shape);
            is_index = false;
        }
    }
};

// A size near `base` (x 1/2 .. x 2 in powers of two, or +-25%): varied tasks from one API set.
int64_t vary(int64_t base, std::mt19937_64& rng) {
    static const double f[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0};
    return std::max<int64_t>(
        1, static_cast<int64_t>(static_cast<double>(base) * f[std::uniform_int_distribution<int>(0, 5)(rng)]));
}

// The first value: shaped for the leading API.
void seed_input(Builder& b, const ApiSpec& a) {
    const bool s = b.small();
    const std::string& k = a.kind;
    Shape shape;
    auto r = std::uniform_int_distribution<int>(a.min_rank, std::max(a.min_rank, std::min(a.max_rank, 4)))(b.rng);
    if (k.rfind("conv", 0) == 0 || k == "pool" || k == "adaptive_pool" || k == "global_pool" || k == "norm_channel") {
        r = std::max(r, 3);
        const int d = r - 2;
        int64_t n = s ? 2 : 16, c = s ? 8 : 32;
        int64_t side = d == 1 ? (s ? 64 : 4096) : d == 2 ? (s ? 16 : 128) : (s ? 8 : 32);
        shape = {n, c};
        for (int i = 0; i < d; ++i) shape.push_back(side);
    } else if (k == "attention") {
        shape = s ? Shape{2, 4, 16, 8} : Shape{8, 16, 512, 64};
    } else if (k == "mha") {
        shape = s ? Shape{2, 16, 32} : Shape{8, 256, 512};
    } else if (k == "outer") {
        shape = {s ? 32 : 4096};
    } else if (k == "diag_matmul") {
        shape = s ? Shape{32, 48} : Shape{4096, 4096};
    } else if (k == "bmm" || k == "tensor3_matmul") {
        shape = s ? Shape{4, 16, 24} : Shape{128, 256, 512};
    } else if (a.category == "linear_algebra") {
        int64_t m = s ? 32 : 2048;
        shape = a.min_rank == 4 ? (s ? Shape{2, 3, 16, 16} : Shape{16, 16, 256, 256}) : Shape{m, m};
    } else if (k == "loss_class") {
        shape = s ? Shape{16, 10} : Shape{4096, 1000};
    } else {
        static const Shape small4 = {4, 8, 16, 16}, big4 = {16, 64, 64, 64};
        const Shape& base = s ? small4 : big4;
        r = std::max(r, k == "reduce_dim" || k == "reduce_keepdim" || k == "flatten" || k == "transpose" ? 2 : 1);
        if (r == 1)
            shape = {s ? 1024 : (1 << 20)};
        else if (r == 2)
            shape = s ? Shape{16, 256} : Shape{4096, 4096};
        else
            shape.assign(base.end() - r, base.end());
    }
    for (auto& d : shape) d = vary(d, b.rng);
    if (k == "attention" || k == "mha") shape.back() = (shape.back() + 7) / 8 * 8;  // heads must divide it
    b.cur = b.new_input(shape);
    b.shape = shape;
}

int64_t conv_out(int64_t in, int64_t k, int64_t st, int64_t pad, int64_t dil = 1) {
    return (in + 2 * pad - dil * (k - 1) - 1) / st + 1;
}

std::map<std::string, std::string> choose_params(const ApiSpec& a, std::mt19937_64& rng) {
    std::map<std::string, std::string> p;
    for (auto it = a.params.begin(); it != a.params.end(); ++it) {
        if (!it->is_array() || it->empty()) continue;
        const auto& v = (*it)[std::uniform_int_distribution<size_t>(0, it->size() - 1)(rng)];
        p[it.key()] = v.is_string() ? v.get<std::string>() : v.dump();
    }
    return p;
}

std::string fill(std::string t, const std::map<std::string, std::string>& subs) {
    std::string out;
    for (size_t i = 0; i < t.size();) {
        if (t[i] == '{') {
            size_t e = t.find('}', i);
            if (e != std::string::npos) {
                auto it = subs.find(t.substr(i + 1, e - i - 1));
                if (it != subs.end()) {
                    out += it->second;
                    i = e + 1;
                    continue;
                }
            }
        }
        out.push_back(t[i++]);
    }
    return out;
}

// The operand as the API's input domain wants it.
std::string in_domain(const std::string& v, const std::string& domain) {
    if (domain == "positive") return "(torch.abs(" + v + ") + 0.1)";
    if (domain == "bounded") return "torch.tanh(" + v + ")";
    return v;
}

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
    for (int64_t d = std::min(n, cap); d > 1; --d)
        if (n % d == 0) return d;
    return 1;
}

// What a kind's shape rule sees and sets: the builder, the API, its kind, the template's
// substitutions and the output shape (the input's unless the rule changes it), the input's rank and
// the chosen reduction dimension.
struct Step {
    Builder& b;
    const ApiSpec& a;
    const std::string& k;
    std::map<std::string, std::string>& subs;
    Shape& out;
    size_t r;
    int64_t dim;
};

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

using ShapeRule = void (*)(Step&);

// The shape rule of each kind of API (api_catalog.json's "kind"); every conv* kind shares one.
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

void apply(Builder& b, const ApiSpec& a) {
    auto subs = choose_params(a, b.rng);
    const std::string& k = a.kind;
    if (a.output != "index" && k != "loss_class") b.as_float();
    b.fit_rank(a);
    const size_t r = b.shape.size();
    std::string m = "m" + std::to_string(b.mods);
    subs["m"] = m, subs["p"] = m;
    Shape out = b.shape;
    auto operand = [&](const std::string& v) { return in_domain(v, a.domain); };
    subs["x"] = operand(b.cur);
    // The reduction / scan dimension: any but the batch dimension when there is a choice.
    // (a dimension of size 1 reduces to nothing: a variance over it is NaN).
    std::vector<int64_t> dims;
    for (size_t i = r > 1 ? 1 : 0; i < r; ++i)
        if (b.shape[i] > 1) dims.push_back(static_cast<int64_t>(i));
    if (dims.empty() && r > 0 && b.shape[0] > 1) dims.push_back(0);  // (N, 1): only the batch dimension varies
    int64_t dim = dims.empty() ? static_cast<int64_t>(r) - 1 : pick(dims, b.rng);
    if (r == 0) dim = 0;
    if (a.params.contains("dim") && a.params["dim"] == "last") dim = static_cast<int64_t>(r) - 1;
    subs["dim"] = std::to_string(dim);
    subs["last"] = std::to_string(b.shape.empty() ? 1 : b.shape.back());
    subs["bias_shape"] = subs["last"];
    subs["scalar"] = subs.count("scalar") ? subs["scalar"] : "0.5";

    Step step{b, a, k, subs, out, r, dim};
    shape_rule(k)(step);
    if (!a.module.empty()) {
        std::string ctor = fill(a.module, subs);
        b.init.push_back("self." + m + " = " + ctor);
        ++b.mods;
    }
    b.assign(fill(a.tmpl, subs), out);
    b.is_index = a.output == "index";
}

}  // namespace

ApiSet sample_api_set(const ApiCatalog& catalog, int level, std::mt19937_64& rng) {
    auto from = [&](const std::vector<std::string>& cats) {
        std::vector<std::string> nonempty;
        for (const auto& c : cats)
            if (!catalog.in_category(c).empty()) nonempty.push_back(c);
        return pick(catalog.in_category(pick(nonempty, rng)), rng)->name;
    };
    ApiSet s;
    s.level = level;
    if (level == 1) {
        s.apis.push_back(from(ApiCatalog::categories()));
        return s;
    }
    s.apis.push_back(from(kHeavy));
    int n = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int i = 0; i < n; ++i) {
        std::string api = from(kEpilogue);
        if (std::find(s.apis.begin(), s.apis.end(), api) == s.apis.end()) s.apis.push_back(api);
    }
    if (s.apis.size() < 5 && std::uniform_real_distribution<double>(0, 1)(rng) < 0.1) s.apis.push_back(from({"loss"}));
    return s;
}

GeneratedTask generate_task(const ApiCatalog& catalog, const ApiSet& set, SizeProfile sizes, std::mt19937_64& rng) {
    if (set.apis.empty() || set.apis.size() > 5) throw std::runtime_error("an API set holds 1 to 5 APIs");
    std::vector<const ApiSpec*> order;
    for (const auto& n : set.apis) order.push_back(&catalog.resolve(n));
    std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) { return stage_of(*x) < stage_of(*y); });
    Builder b(sizes, rng);
    seed_input(b, *order.front());
    GeneratedTask t;
    for (const ApiSpec* a : order) {
        apply(b, *a);
        t.apis.push_back(a->name);
    }
    t.output_shape = b.shape;
    std::ostringstream src;
    std::string chain;
    for (size_t i = 0; i < t.apis.size(); ++i) chain += (i ? " -> " : "") + t.apis[i];
    src << "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        << "class Model(nn.Module):\n    \"\"\"Symbolic task (level " << set.level << "): " << chain << ".\"\"\"\n\n"
        << "    def __init__(self):\n        super().__init__()\n";
    for (const auto& l : b.init) src << "        " << l << "\n";
    src << "\n    def forward(self";
    for (const auto& p : b.params) src << ", " << p;
    src << "):\n";
    for (const auto& l : b.body) src << "        " << l << "\n";
    src << "        return " << b.cur << "\n\n\ndef get_inputs():\n    return [";
    for (size_t i = 0; i < b.input_exprs.size(); ++i) src << (i ? ", " : "") << b.input_exprs[i];
    src << "]\n\n\ndef get_init_inputs():\n    return []\n";
    t.source = src.str();
    return t;
}

}  // namespace kz
