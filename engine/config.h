// The architecture of a Hugging Face checkpoint directory (config.json, generation_config.json):
// what engine/model.h needs to build the network, and what `init-model` writes back. No torch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kz {

enum class Arch { qwen2, qwen3 };

struct ModelConfig {
    Arch arch = Arch::qwen2;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_layers = 0;
    int64_t num_heads = 0;
    int64_t num_kv_heads = 0;
    int64_t head_dim = 0;  // hidden_size / num_heads unless given (Qwen3 gives it)
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    int64_t max_position_embeddings = 32768;
    bool tie_word_embeddings = false;
    bool qkv_bias = true;  // Qwen2: q/k/v biases; Qwen3: attention_bias (q/k/v/o)
    bool o_bias = false;
    bool qk_norm = false;  // Qwen3: RMSNorm over head_dim on q and k
    double initializer_range = 0.02;
    std::string torch_dtype = "bfloat16";
    std::optional<int64_t> bos_token_id;
    std::vector<int64_t> eos_token_ids;

    // Parses config.json. Throws std::runtime_error naming the file and the cause: unsupported
    // architecture (named), missing or invalid field (named), unsupported RoPE scaling, sliding window.
    static ModelConfig from_json(const nlohmann::json& j, const std::string& origin = "config.json");
    static ModelConfig load(const std::string& model_dir);
    // config.json as transformers writes it (top-level rope_theta form).
    nlohmann::json to_json() const;
    std::string architecture_name() const;  // "Qwen2ForCausalLM" / "Qwen3ForCausalLM"

    // Named shapes (preset_names()): "tiny"; "small" (hidden 512, 6 layers); "small-deep" (small's
    // width, 12 layers: with tied embeddings over a 152k vocabulary, the vocabulary projection is most
    // of small's work, so depth costs little); "7b-shape" (Qwen2.5-7B's dimensions).
    static ModelConfig preset(Arch arch, const std::string& name, int64_t vocab_size);
    static const std::vector<std::string>& preset_names();
};

// Sampling defaults of generation_config.json (all optional).
struct GenerationDefaults {
    std::optional<double> temperature, top_p;
    std::optional<int64_t> top_k;
    std::optional<bool> do_sample;
    std::vector<int64_t> eos_token_ids;
    static GenerationDefaults load(const std::string& model_dir);  // empty when the file is absent
};

Arch arch_from_name(const std::string& name);  // "qwen2" | "qwen3"; throws otherwise

}  // namespace kz
