#include "tasks/symbolic.h"
#include "tasks/symbolic_builder.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace kz {

namespace symbolic {

int64_t vary(int64_t base, std::mt19937_64& rng) {
    static const double f[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0};
    return std::max<int64_t>(
        1, static_cast<int64_t>(static_cast<double>(base) * f[std::uniform_int_distribution<int>(0, 5)(rng)]));
}

std::string in_domain(const std::string& v, const std::string& domain) {
    if (domain == "positive") return "(torch.abs(" + v + ") + 0.1)";
    if (domain == "bounded") return "torch.tanh(" + v + ")";
    return v;
}

}  // namespace symbolic

namespace {

using namespace symbolic;

const std::vector<std::string> kHeavy = {"convolution", "transposed_convolution", "linear_algebra", "attention"};
const std::vector<std::string> kEpilogue = {"activation", "elementwise", "reduction", "normalization",
                                            "pooling",    "softmax",     "scan"};

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

// The template's operands as variables and domains: each of x, y, z, d and target that the shape
// rule set is a forward variable, bare or mapped into a domain by in_domain().
std::map<std::string, Operand> operands_of(const Builder& b, const ApiSpec& a,
                                           const std::map<std::string, std::string>& subs) {
    std::vector<std::string> vars = b.params;
    vars.push_back(b.cur);
    std::map<std::string, Operand> out;
    for (const char* key : {"x", "y", "z", "d", "target", "q", "k", "v"}) {
        auto it = subs.find(key);
        if (it == subs.end()) continue;
        for (const auto& v : vars) {
            for (const std::string& domain : {std::string("any"), a.domain, std::string("positive")}) {
                if (it->second == in_domain(v, domain)) {
                    out[key] = Operand{v, domain};
                    break;
                }
            }
            if (out.count(key)) break;
        }
    }
    return out;
}

void apply(Builder& b, const ApiSpec& a) {
    auto subs = choose_params(a, b.rng);
    const std::string& k = a.kind;
    if (a.output != "index" && k != "loss_class") b.as_float();
    b.fit_rank(a);
    const size_t r = b.shape.size();
    std::string m = numbered("m", static_cast<size_t>(b.mods));
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
    const bool stateful = !a.module.empty();
    if (stateful) {
        // As KernelBench writes modules: the constructor takes the module's sizes as arguments
        // (get_init_inputs gives their values), so a module's line is the same text in every draw of
        // its API and a kernel writer copies names from the prompt, not numbers.
        std::map<std::string, std::string> args = subs;
        for (size_t i = a.module.find('{'); i != std::string::npos; i = a.module.find('{', i + 1)) {
            const std::string key = a.module.substr(i + 1, a.module.find('}', i) - i - 1);
            if (auto it = subs.find(key); it != subs.end()) args[key] = b.init_arg(key, it->second);
        }
        b.init.push_back("self." + m + " = " + fill(a.module, args));
        ++b.mods;
    }
    const Shape in_shape = b.shape;
    std::map<std::string, Operand> operands = operands_of(b, a, subs);
    // A reduction's or scan's dimension too (KernelBench's `self.dim = dim`): one argument per value.
    std::map<std::string, std::string> written = subs;
    std::string dim_attr;
    if (a.tmpl.find("{dim}") != std::string::npos) {
        const size_t known = b.init_args.size();
        const std::string name = b.init_arg("dim", subs["dim"]);
        if (b.init_args.size() > known) b.init.push_back("self." + name + " = " + name);
        dim_attr = written["dim"] = "self." + name;
    }
    b.assign(fill(a.tmpl, written), out);
    ForwardStep& line = b.steps.back();
    line.is_op = true;
    line.in_shape = in_shape;
    line.api = a.name, line.kind = k;
    line.operands = std::move(operands);
    for (const auto& [key, value] : subs)
        if (!line.operands.count(key) && key != "m" && key != "p") line.params[key] = value;
    if (stateful) line.module = "self." + m;
    line.dim_attr = dim_attr;
    b.is_index = a.output == "index";
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& constructor_argument_names() {
    // No two keys share a name (two keys would merge into one argument), and none is a name the
    // module or a kernel file holds at module level (torch, nn, F, triton, tl) or a forward variable.
    static const std::map<std::string, std::vector<std::string>> names = {
        {"bias_shape", {"bias_shape", "bias_size", "bias_len"}},
        {"c_in", {"c_in", "in_channels", "cin", "channels_in", "n_in"}},
        {"c_out", {"c_out", "out_channels", "cout", "channels_out", "n_out"}},
        {"channels", {"channels", "num_features", "n_channels", "features"}},
        {"dim", {"dim", "axis", "reduce_dim", "along"}},
        {"embed", {"embed", "embed_dim", "d_model", "hidden"}},
        {"groups", {"groups", "num_groups", "n_groups"}},
        {"heads", {"heads", "num_heads", "n_heads"}},
        {"in_features", {"in_features", "d_in", "fan_in", "input_dim"}},
        {"kernel", {"kernel", "kernel_size", "ks", "k_size"}},
        {"last", {"last", "normalized_shape", "width", "last_dim"}},
        {"out_features", {"out_features", "d_out", "fan_out", "output_dim"}},
        {"output_padding", {"output_padding", "out_pad", "extra_pad"}},
        {"output_size", {"output_size", "out_size", "pooled_size"}},
        {"padding", {"padding", "pad", "pad_size"}},
        {"stride", {"stride", "step", "hop"}},
    };
    return names;
}

std::string init_signature(const std::vector<std::string>& args) {
    std::string out = "self";
    for (const auto& a : args) out += ", " + a;
    return out;
}

std::string api_set_key(std::vector<std::string> apis) {
    std::sort(apis.begin(), apis.end());
    apis.erase(std::unique(apis.begin(), apis.end()), apis.end());
    std::string key;
    for (const auto& a : apis) key += (key.empty() ? "" : ",") + a;
    return key;
}

std::set<std::string> read_api_sets(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read the API sets file " + path);
    std::set<std::string> sets;
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> apis;
        std::stringstream ss(line);
        for (std::string a; std::getline(ss, a, ',');) {
            a.erase(0, a.find_first_not_of(" \t\r"));
            a.erase(a.find_last_not_of(" \t\r") + 1);
            if (!a.empty()) apis.push_back(a);
        }
        if (!apis.empty()) sets.insert(api_set_key(apis));
    }
    return sets;
}

ApiSet sample_api_set(const ApiCatalog& catalog, int level, std::mt19937_64& rng) {
    auto from = [&](const std::vector<std::string>& cats) {
        std::vector<std::string> nonempty;
        for (const auto& c : cats)
            if (!catalog.in_category(c).empty()) nonempty.push_back(c);
        if (nonempty.empty()) {
            std::string names;
            for (const auto& c : cats) names += (names.empty() ? "" : ", ") + c;
            throw std::runtime_error("the catalog has no API in the categories " + names);
        }
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
    if (s.apis.size() < 5 && std::uniform_real_distribution<double>(0, 1)(rng) < 0.1 &&
        !catalog.in_category("loss").empty())
        s.apis.push_back(from({"loss"}));
    return s;
}

GeneratedTask generate_task(const ApiCatalog& catalog, const ApiSet& set, SizeProfile sizes, std::mt19937_64& rng) {
    if (set.apis.empty() || set.apis.size() > 5) throw std::runtime_error("an API set holds 1 to 5 APIs");
    std::vector<const ApiSpec*> order;
    for (const auto& n : set.apis) order.push_back(&catalog.resolve(n));
    std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) { return stage_of(*x) < stage_of(*y); });
    Builder b(sizes, rng);
    {
        // From a stream of their own: the sizes, operators and values a seed draws stay the same.
        std::mt19937_64 ahead = rng;
        std::mt19937_64 naming(ahead() ^ 0x6e616d6573ULL);
        for (const auto& [key, names] : constructor_argument_names()) b.arg_names[key] = pick(names, naming);
    }
    seed_input(b, *order.front());
    GeneratedTask t;
    for (const ApiSpec* a : order) {
        apply(b, *a);
        t.apis.push_back(a->name);
    }
    t.output_shape = b.shape;
    t.init = b.init;
    for (const auto& [name, value] : b.init_args) t.init_args.push_back(name);
    t.inputs = b.params;
    t.steps = b.steps;
    t.result = b.cur;
    std::ostringstream src;
    std::string chain;
    for (size_t i = 0; i < t.apis.size(); ++i) chain += (i ? " -> " : "") + t.apis[i];
    src << "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        << "class Model(nn.Module):\n    \"\"\"Symbolic task (level " << set.level << "): " << chain << ".\"\"\"\n\n"
        << "    def __init__(" << init_signature(t.init_args) << "):\n        super().__init__()\n";
    for (const auto& l : b.init) src << "        " << l << "\n";
    src << "\n    def forward(self";
    for (const auto& p : b.params) src << ", " << p;
    src << "):\n";
    for (const auto& l : b.steps) src << "        " << l.line() << "\n";
    src << "        return " << b.cur << "\n\n\ndef get_inputs():\n    return [";
    for (size_t i = 0; i < b.input_exprs.size(); ++i) src << (i ? ", " : "") << b.input_exprs[i];
    src << "]\n\n\ndef get_init_inputs():\n    return [";
    for (size_t i = 0; i < b.init_args.size(); ++i) src << (i ? ", " : "") << b.init_args[i].second;
    src << "]\n";
    t.source = src.str();
    return t;
}

}  // namespace kz
