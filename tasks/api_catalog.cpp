#include "tasks/api_catalog.h"

#include <algorithm>
#include <stdexcept>

#include "common/files.h"

namespace kz {

using json = nlohmann::json;

const std::vector<std::string>& ApiCatalog::categories() {
    static const std::vector<std::string> c = {"activation",
                                               "elementwise",
                                               "reduction",
                                               "normalization",
                                               "linear_algebra",
                                               "convolution",
                                               "transposed_convolution",
                                               "pooling",
                                               "attention",
                                               "scan",
                                               "loss",
                                               "indexing",
                                               "softmax",
                                               "shape"};
    return c;
}

const std::vector<std::string>& ApiCatalog::kinds() {
    static const std::vector<std::string> k = {"same",
                                               "binary_same",
                                               "reduce_dim",
                                               "reduce_keepdim",
                                               "norm_last",
                                               "norm_channel",
                                               "linear",
                                               "matmul",
                                               "matmul_ta",
                                               "matmul_tb",
                                               "bmm",
                                               "matvec",
                                               "diag_matmul",
                                               "square_matmul",
                                               "tensor3_matmul",
                                               "outer",
                                               "bilinear",
                                               "conv",
                                               "conv_depthwise",
                                               "conv_grouped",
                                               "conv_asym",
                                               "conv_transpose",
                                               "conv_transpose_grouped",
                                               "pool",
                                               "adaptive_pool",
                                               "global_pool",
                                               "attention",
                                               "mha",
                                               "loss",
                                               "loss_class",
                                               "loss_triplet",
                                               "flatten",
                                               "transpose",
                                               "topk",
                                               "index_half"};
    return k;
}

std::string ApiCatalog::default_path() {
#ifdef KZ_SOURCE_DIR
    return std::string(KZ_SOURCE_DIR) + "/tasks/api_catalog.json";
#else
    return "tasks/api_catalog.json";
#endif
}

std::string ApiCatalog::path_or_default(const std::string& path) { return path.empty() ? default_path() : path; }

ApiCatalog ApiCatalog::load(const std::string& path) {
    json j;
    try {
        j = json::parse(read_file(path));
    } catch (const json::parse_error& e) {
        throw std::runtime_error(path + ": not valid JSON: " + e.what());
    }
    return from_json(j, path);
}

ApiCatalog ApiCatalog::from_json(const json& j, const std::string& origin) {
    if (!j.is_object() || !j.contains("apis") || !j["apis"].is_array())
        throw std::runtime_error(origin + ": no \"apis\" array");
    ApiCatalog c;
    const auto& cats = categories();
    const auto& ks = kinds();
    for (const auto& a : j["apis"]) {
        std::string name = a.is_object() ? a.value("name", std::string()) : std::string();
        auto fail = [&](const std::string& why) {
            throw std::runtime_error(origin + ": api " + (name.empty() ? "(unnamed)" : name) + ": " + why);
        };
        if (name.empty()) fail("no name");
        if (c.by_name_.count(name)) fail("duplicate name");
        ApiSpec s;
        try {
            s.name = name;
            s.torch_api = a.at("torch").get<std::string>();
            s.category = a.at("category").get<std::string>();
            s.kind = a.at("kind").get<std::string>();
            s.arity = a.at("arity").get<int>();
            auto rank = a.at("rank").get<std::vector<int>>();
            if (rank.size() != 2) fail("rank must be [min, max]");
            s.min_rank = rank[0], s.max_rank = rank[1];
            s.tmpl = a.at("template").get<std::string>();
            s.module = a.value("module", std::string());
            s.domain = a.value("domain", std::string("any"));
            s.output = a.value("output", std::string("float"));
            s.kernelbench = a.value("kernelbench", false);
            s.params = a.value("params", json::object());
            s.typical = a.value("typical", json::object());
        } catch (const json::exception& e) {
            fail(std::string("malformed entry: ") + e.what());
        }
        if (s.torch_api.rfind("torch.", 0) != 0) fail("\"torch\" must name a torch API, got " + s.torch_api);
        if (std::find(cats.begin(), cats.end(), s.category) == cats.end()) fail("unknown category " + s.category);
        if (std::find(ks.begin(), ks.end(), s.kind) == ks.end()) fail("unknown kind " + s.kind);
        if (s.arity < 1 || s.arity > 3) fail("arity must be 1-3");
        if (s.min_rank < 1 || s.min_rank > s.max_rank || s.max_rank > 5) fail("rank must satisfy 1 <= min <= max <= 5");
        if (s.domain != "any" && s.domain != "positive" && s.domain != "bounded") fail("unknown domain " + s.domain);
        if (s.output != "float" && s.output != "index" && s.output != "scalar") fail("unknown output " + s.output);
        if ((s.category == "loss") != (s.output == "scalar")) fail("losses, and only losses, have scalar outputs");
        // The template must use exactly its operands, and the module iff it has one.
        auto has = [&](const char* ph) { return s.tmpl.find(ph) != std::string::npos; };
        const bool qkv = has("{q}");
        const int operands =
            qkv ? (has("{k}") && has("{v}") ? 3 : -1)
                : (has("{x}") ? 1 : 0) + (has("{y}") || has("{target}") || has("{d}") ? 1 : 0) + (has("{z}") ? 1 : 0);
        const int want = s.kind == "loss_class" ? 2 : s.arity;  // logits + generated class targets
        if (operands != want)
            fail("template uses " + std::to_string(operands) + " operands, arity says " + std::to_string(s.arity));
        if (!s.module.empty() != (has("{m}") || has("{p}"))) fail("template and module disagree ({m}/{p} iff module)");
        if (!s.params.is_object()) fail("params must be an object");
        c.add(std::move(s));
    }
    return c;
}

ApiCatalog ApiCatalog::subset(const std::function<bool(const ApiSpec&)>& keep) const {
    ApiCatalog c;
    for (const ApiSpec& s : apis_)
        if (keep(s)) c.add(s);
    return c;
}

void ApiCatalog::add(ApiSpec s) {
    by_name_[s.name] = apis_.size();
    by_torch_api_[s.torch_api].push_back(apis_.size());
    apis_.push_back(std::move(s));
}

const ApiSpec* ApiCatalog::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &apis_[it->second];
}

namespace {

// The short forms people write for torch APIs, spelled out.
std::string full_torch_name(const std::string& name) {
    if (name.rfind("F.", 0) == 0) return "torch.nn.functional." + name.substr(2);
    if (name.rfind("nn.", 0) == 0) return "torch." + name;
    return name;
}

}  // namespace

const std::vector<size_t>& ApiCatalog::entries_of_torch_name(const std::string& name, std::string& torch_api) const {
    torch_api = full_torch_name(name);
    auto it = by_torch_api_.find(torch_api);
    if (it == by_torch_api_.end()) throw std::invalid_argument("API \"" + name + "\" is not in the catalog");
    return it->second;
}

const ApiSpec& ApiCatalog::resolve(const std::string& name) const {
    if (const ApiSpec* a = find(name)) return *a;
    std::string torch_api;
    const std::vector<size_t>& entries = entries_of_torch_name(name, torch_api);
    if (entries.size() > 1) {
        std::string names;
        for (size_t i : entries) names += (names.empty() ? "" : ", ") + apis_[i].name;
        throw std::invalid_argument("API \"" + name + "\" is " + torch_api + ", which " +
                                    std::to_string(entries.size()) + " catalog entries use (" + names +
                                    "): name one of them");
    }
    return apis_[entries.front()];
}

std::string ApiCatalog::torch_api_of(const std::string& name) const {
    if (const ApiSpec* a = find(name)) return a->torch_api;
    std::string torch_api;
    entries_of_torch_name(name, torch_api);
    return torch_api;
}

std::vector<const ApiSpec*> ApiCatalog::in_category(const std::string& category) const {
    std::vector<const ApiSpec*> out;
    for (const auto& a : apis_)
        if (a.category == category) out.push_back(&a);
    return out;
}

}  // namespace kz
