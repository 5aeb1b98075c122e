// The API catalog (tasks/api_catalog.json): the PyTorch APIs the Proposer may use, each with its
// category, the shape rule ("kind") the symbolic generator applies, arity, input ranks, the forward
// expression, an optional module built in __init__, input-domain constraints and typical sizes.
// Loading validates the whole file: a catalog that loads is one every later stage can rely on.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kz {

struct ApiSpec {
    std::string name;       // unique id, e.g. "conv2d"
    std::string torch_api;  // e.g. "torch.nn.Conv2d"
    std::string category;   // one of ApiCatalog::categories()
    std::string kind;       // shape rule, one of ApiCatalog::kinds()
    int arity = 1;          // tensor operands
    int min_rank = 1, max_rank = 5;
    std::string tmpl;    // forward expression with placeholders
    std::string module;  // constructor expression ("" when none)
    std::string domain;  // any | positive | bounded
    std::string output;  // float | index | scalar
    bool kernelbench = false;
    nlohmann::json params;   // placeholder -> choices
    nlohmann::json typical;  // typical sizes
};

class ApiCatalog {
public:
    // Throws std::runtime_error("PATH: api NAME: REASON") for the first problem found.
    static ApiCatalog load(const std::string& path);
    static ApiCatalog from_json(const nlohmann::json& j, const std::string& origin);
    // The catalog shipped with the repository (KZ_SOURCE_DIR/tasks/api_catalog.json).
    static std::string default_path();
    // `path`, or default_path() when it is empty (every option naming a catalog defaults to it).
    static std::string path_or_default(const std::string& path);

    const std::vector<ApiSpec>& apis() const { return apis_; }
    // The entries `keep` accepts, in the same order: a catalog the generator samples from as it
    // would from this one (categories left empty are skipped).
    ApiCatalog subset(const std::function<bool(const ApiSpec&)>& keep) const;
    const ApiSpec* find(const std::string& name) const;  // by catalog name only
    // A catalog name ("conv2d"), or the torch API an entry records ("torch.nn.Conv2d", also written
    // "nn.Conv2d", "F.gelu" or "nn.functional.gelu") where exactly one entry records it. Throws
    // std::invalid_argument naming the cause: unknown, or which entries share that torch API.
    const ApiSpec& resolve(const std::string& name) const;
    // The torch API `name` stands for: a catalog entry's, or a torch name (short forms as above) that
    // some entry records, however many do. Throws std::invalid_argument when it is neither.
    std::string torch_api_of(const std::string& name) const;
    std::vector<const ApiSpec*> in_category(const std::string& category) const;

    static const std::vector<std::string>& categories();  // design section 4's categories
    static const std::vector<std::string>& kinds();       // shape rules the generator implements

private:
    void add(ApiSpec s);  // appended, and indexed by name and torch API

    std::vector<ApiSpec> apis_;
    std::map<std::string, size_t> by_name_;
    std::map<std::string, std::vector<size_t>> by_torch_api_;
    // The entries that record torch name `name` (short forms spelled out into `torch_api`); throws
    // std::invalid_argument when none does.
    const std::vector<size_t>& entries_of_torch_name(const std::string& name, std::string& torch_api) const;
};

}  // namespace kz
