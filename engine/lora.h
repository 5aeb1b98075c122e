// LoRA adapters on the model's linear layers, in PEFT's format: attach (A ~ kaiming-uniform, B = 0,
// scale alpha / r), save and load adapter directories (adapter_config.json +
// adapter_model.safetensors) that peft loads, and merge into the base weights. With the adapter
// disabled (Model::lora_enabled = false) the model is the base: the RL reference policy.
#pragma once

#include <string>
#include <vector>

#include "engine/model.h"

namespace kz {

struct LoraConfig {
    int64_t rank = 16;
    double alpha = 32;
    // Module names as peft matches them (the last path component): q_proj, k_proj, v_proj, o_proj,
    // gate_proj, up_proj, down_proj; "all-linear" = all seven.
    std::vector<std::string> target_modules = {"all-linear"};
    torch::ScalarType dtype = torch::kFloat32;  // adapter weights (fp32 on a bf16 base, as peft does)
    void validate() const;                      // throws naming the bad value
};

// Attaches fresh adapters (deterministic for `seed`); replaces any attached before.
void attach_lora(Model& model, const LoraConfig& cfg, uint64_t seed);
// The adapters' parameters by peft's names ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").
std::vector<std::pair<std::string, torch::Tensor>> lora_parameters(Model& model);
// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors (atomically).
void save_peft_adapter(Model& model, const LoraConfig& cfg, const std::string& dir, const std::string& base_model = "");
// Reads a peft adapter directory's adapter_config.json. Throws naming a missing or invalid file or an
// unsupported option (DoRA, rsLoRA, biases, modules_to_save).
LoraConfig read_peft_adapter_config(const std::string& dir);
// Reads a peft LoRA adapter directory into the model. Throws naming a missing file, an unsupported
// option (DoRA, rsLoRA, biases, modules_to_save), a tensor of the wrong shape or one for no module.
LoraConfig load_peft_adapter(Model& model, const std::string& dir);
// W += B A * scale for every adapted layer; then removes the adapters.
void merge_lora(Model& model);

}  // namespace kz
