#include "engine/lora.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "engine/safetensors.h"
#include "engine/tensor_io.h"
#include "engine/sampling.h"

namespace kz {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kAllLinear = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                             "gate_proj", "up_proj", "down_proj"};
const std::string kPeftPrefix = "base_model.model.";

std::string leaf(const std::string& path) { return path.substr(path.rfind('.') + 1); }

std::set<std::string> targets_of(const LoraConfig& cfg) {
    std::set<std::string> t;
    for (const auto& m : cfg.target_modules) {
        if (m == "all-linear")
            t.insert(kAllLinear.begin(), kAllLinear.end());
        else
            t.insert(m);
    }
    return t;
}

}  // namespace

void LoraConfig::validate() const {
    if (rank < 1) throw std::runtime_error("LoRA rank must be >= 1");
    if (!(alpha > 0)) throw std::runtime_error("LoRA alpha must be > 0");
    if (target_modules.empty()) throw std::runtime_error("LoRA needs at least one target module");
    for (const auto& m : target_modules)
        if (m != "all-linear" && std::find(kAllLinear.begin(), kAllLinear.end(), m) == kAllLinear.end())
            throw std::runtime_error("unknown LoRA target module \"" + m +
                                     "\" (q_proj, k_proj, v_proj, o_proj, "
                                     "gate_proj, up_proj, down_proj, all-linear)");
}

void attach_lora(Model& model, const LoraConfig& cfg, uint64_t seed) {
    cfg.validate();
    auto targets = targets_of(cfg);
    auto gen = make_generator(model.device(), seed);
    auto opts = torch::TensorOptions().dtype(cfg.dtype).device(model.device());
    for (auto& [path, lin] : model.linears()) {
        lin->lora_a = torch::Tensor();
        lin->lora_b = torch::Tensor();
        if (!targets.count(leaf(path))) continue;
        const int64_t in = lin->weight.size(1), out = lin->weight.size(0);
        const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // kaiming_uniform_(a=sqrt(5))
        lin->lora_a = torch::empty({cfg.rank, in}, opts).uniform_(-bound, bound, gen).requires_grad_(true);
        lin->lora_b = torch::zeros({out, cfg.rank}, opts).requires_grad_(true);
        lin->lora_scale = cfg.alpha / static_cast<double>(cfg.rank);
    }
}

std::vector<std::pair<std::string, torch::Tensor>> lora_parameters(Model& model) {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (auto& [path, lin] : model.linears()) {
        if (!lin->lora_a.defined()) continue;
        out.emplace_back(kPeftPrefix + path + ".lora_A.weight", lin->lora_a);
        out.emplace_back(kPeftPrefix + path + ".lora_B.weight", lin->lora_b);
    }
    return out;
}

void save_peft_adapter(Model& model, const LoraConfig& cfg, const std::string& dir, const std::string& base_model) {
    fs::create_directories(dir);
    auto params = lora_parameters(model);
    if (params.empty()) throw std::runtime_error("no LoRA adapter is attached");
    save_tensors((fs::path(dir) / "adapter_model.safetensors").string(), params, torch::kFloat32);
    auto targets = targets_of(cfg);
    json c = {{"peft_type", "LORA"},
              {"task_type", "CAUSAL_LM"},
              {"r", cfg.rank},
              {"lora_alpha", cfg.alpha},
              {"lora_dropout", 0.0},
              {"target_modules", std::vector<std::string>(targets.begin(), targets.end())},
              {"bias", "none"},
              {"fan_in_fan_out", false},
              {"inference_mode", true},
              {"init_lora_weights", true},
              {"use_rslora", false},
              {"use_dora", false},
              {"modules_to_save", nullptr},
              {"base_model_name_or_path", base_model}};
    write_file_atomic((fs::path(dir) / "adapter_config.json").string(), c.dump(2) + "\n");
}

LoraConfig read_peft_adapter_config(const std::string& dir) {
    std::string cfg_path = (fs::path(dir) / "adapter_config.json").string();
    std::error_code ec;
    if (!fs::exists(cfg_path, ec)) throw std::runtime_error(dir + ": no adapter_config.json");
    json c;
    try {
        c = json::parse(read_file(cfg_path));
    } catch (const json::parse_error& e) {
        throw std::runtime_error(cfg_path + ": not valid JSON: " + e.what());
    }
    auto fail = [&](const std::string& why) { throw std::runtime_error(cfg_path + ": " + why); };
    if (c.value("peft_type", std::string()) != "LORA") fail("peft_type is not LORA");
    if (c.value("use_dora", false)) fail("DoRA adapters are not supported");
    if (c.value("use_rslora", false)) fail("rsLoRA scaling is not supported");
    if (c.value("bias", std::string("none")) != "none") fail("adapters with trained biases are not supported");
    if (c.contains("modules_to_save") && !c["modules_to_save"].is_null() && !c["modules_to_save"].empty())
        fail("modules_to_save is not supported");
    LoraConfig cfg;
    cfg.rank = c.value("r", int64_t{8});
    cfg.alpha = c.value("lora_alpha", 8.0);
    cfg.target_modules.clear();
    if (c.contains("target_modules") && c["target_modules"].is_array())
        for (const auto& t : c["target_modules"]) cfg.target_modules.push_back(t.get<std::string>());
    else if (c.contains("target_modules") && c["target_modules"].is_string())
        cfg.target_modules.push_back(c["target_modules"].get<std::string>());
    cfg.validate();
    return cfg;
}

LoraConfig load_peft_adapter(Model& model, const std::string& dir) {
    const LoraConfig cfg = read_peft_adapter_config(dir);
    std::error_code ec;
    std::string weights = (fs::path(dir) / "adapter_model.safetensors").string();
    if (!fs::exists(weights, ec)) throw std::runtime_error(dir + ": no adapter_model.safetensors");
    SafetensorsFile f(weights);
    auto linears = model.linears();
    std::map<std::string, Linear*> by_path(linears.begin(), linears.end());
    for (auto& [path, lin] : linears) lin->lora_a = lin->lora_b = torch::Tensor();
    for (const auto& [name, view] : f.tensors()) {
        // peft writes "base_model.model.<module>.lora_A.weight" (no adapter name).
        std::string n = name;
        if (n.rfind(kPeftPrefix, 0) == 0) n = n.substr(kPeftPrefix.size());
        bool is_a = n.size() > 14 && n.compare(n.size() - 14, 14, ".lora_A.weight") == 0;
        bool is_b = n.size() > 14 && n.compare(n.size() - 14, 14, ".lora_B.weight") == 0;
        if (!is_a && !is_b) throw std::runtime_error(weights + ": tensor " + name + " is not a LoRA A or B weight");
        std::string path = n.substr(0, n.size() - 14);
        auto it = by_path.find(path);
        if (it == by_path.end())
            throw std::runtime_error(weights + ": tensor " + name + " targets no module of the model");
        Linear* lin = it->second;
        std::vector<int64_t> want = is_a ? std::vector<int64_t>{cfg.rank, lin->weight.size(1)}
                                         : std::vector<int64_t>{lin->weight.size(0), cfg.rank};
        if (view.shape != want)
            throw std::runtime_error(weights + ": tensor " + name + " has the wrong shape for rank " +
                                     std::to_string(cfg.rank));
        if (view.dtype != Dtype::f32 && view.dtype != Dtype::bf16 && view.dtype != Dtype::f16)
            throw std::runtime_error(weights + ": tensor " + name + " is not a float tensor");
        auto t = to_tensor(view, model.device(), cfg.dtype).requires_grad_(true);
        (is_a ? lin->lora_a : lin->lora_b) = t;
        lin->lora_scale = cfg.alpha / static_cast<double>(cfg.rank);
    }
    for (auto& [path, lin] : linears)
        if (lin->lora_a.defined() != lin->lora_b.defined())
            throw std::runtime_error(weights + ": module " + path + " has only one of lora_A and lora_B");
    return cfg;
}

void merge_lora(Model& model) {
    torch::NoGradGuard no_grad;
    for (auto& [path, lin] : model.linears()) {
        if (!lin->lora_a.defined()) continue;
        auto delta = torch::matmul(lin->lora_b.to(torch::kFloat32), lin->lora_a.to(torch::kFloat32)) * lin->lora_scale;
        lin->weight.copy_(
            (lin->weight.to(torch::kFloat32) + delta.to(lin->weight.device())).to(lin->weight.scalar_type()));
        lin->lora_a = lin->lora_b = torch::Tensor();
    }
}

}  // namespace kz
