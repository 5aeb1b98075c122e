#include "engine/config.h"

#include <filesystem>
#include <stdexcept>

#include "common/files.h"

namespace kz {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json parse_file(const std::string& path) {
    std::string text = read_file(path);
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        throw std::runtime_error(path + ": not valid JSON: " + e.what());
    }
}

std::vector<int64_t> id_list(const json& v) {
    if (v.is_number_integer()) return {v.get<int64_t>()};
    if (v.is_array()) return v.get<std::vector<int64_t>>();
    return {};
}

}  // namespace

Arch arch_from_name(const std::string& name) {
    if (name == "qwen2") return Arch::qwen2;
    if (name == "qwen3") return Arch::qwen3;
    throw std::runtime_error("unsupported architecture \"" + name + "\" (supported: qwen2, qwen3)");
}

std::string ModelConfig::architecture_name() const {
    return arch == Arch::qwen2 ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM";
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& origin) {
    auto fail = [&](const std::string& why) -> void { throw std::runtime_error(origin + ": " + why); };
    if (!j.is_object()) fail("not a JSON object");
    ModelConfig c;
    std::string type = j.value("model_type", std::string());
    std::string arch_name;
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
        arch_name = j["architectures"][0].get<std::string>();
    if (type == "qwen2" || arch_name == "Qwen2ForCausalLM") {
        c.arch = Arch::qwen2;
    } else if (type == "qwen3" || arch_name == "Qwen3ForCausalLM") {
        c.arch = Arch::qwen3;
    } else {
        fail("unsupported architecture \"" + (arch_name.empty() ? type : arch_name) +
             "\" (supported: Qwen2ForCausalLM, Qwen3ForCausalLM)");
    }
    auto need_int = [&](const char* key) -> int64_t {
        if (!j.contains(key) || !j[key].is_number_integer())
            fail(std::string("missing or non-integer field \"") + key + "\"");
        int64_t v = j[key].get<int64_t>();
        if (v <= 0) fail(std::string("field \"") + key + "\" must be positive");
        return v;
    };
    c.vocab_size = need_int("vocab_size");
    c.hidden_size = need_int("hidden_size");
    c.intermediate_size = need_int("intermediate_size");
    c.num_layers = need_int("num_hidden_layers");
    c.num_heads = need_int("num_attention_heads");
    c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                         ? need_int("num_key_value_heads")
                         : c.num_heads;
    if (j.contains("head_dim") && !j["head_dim"].is_null()) {
        c.head_dim = need_int("head_dim");
    } else {
        if (c.hidden_size % c.num_heads) fail("hidden_size is not a multiple of num_attention_heads");
        c.head_dim = c.hidden_size / c.num_heads;
    }
    if (c.num_heads % c.num_kv_heads) fail("num_attention_heads is not a multiple of num_key_value_heads");
    if (c.head_dim % 2) fail("head_dim must be even for rotary embeddings");
    c.rms_norm_eps = j.value("rms_norm_eps", 1e-6);
    c.max_position_embeddings = j.value("max_position_embeddings", int64_t{32768});
    c.tie_word_embeddings = j.value("tie_word_embeddings", false);
    c.initializer_range = j.value("initializer_range", 0.02);
    if (j.contains("torch_dtype") && j["torch_dtype"].is_string())
        c.torch_dtype = j["torch_dtype"];
    else if (j.contains("dtype") && j["dtype"].is_string())
        c.torch_dtype = j["dtype"];
    if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
        c.bos_token_id = j["bos_token_id"].get<int64_t>();
    if (j.contains("eos_token_id")) c.eos_token_ids = id_list(j["eos_token_id"]);
    if (c.arch == Arch::qwen2) {
        c.qkv_bias = true;
        c.o_bias = false;
        c.qk_norm = false;
        if (j.value("use_sliding_window", false))
            fail("sliding-window attention (use_sliding_window) is not supported");
    } else {
        bool bias = j.value("attention_bias", false);
        c.qkv_bias = c.o_bias = bias;
        c.qk_norm = true;
        if (j.value("use_sliding_window", false))
            fail("sliding-window attention (use_sliding_window) is not supported");
    }
    // RoPE: transformers 4.x writes rope_theta (+ rope_scaling); 5.x writes rope_parameters.
    std::string rope_type = "default";
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
        const json& rp = j["rope_parameters"];
        if (!rp.contains("rope_theta") || !rp["rope_theta"].is_number())
            fail("rope_parameters has no numeric rope_theta");
        c.rope_theta = rp["rope_theta"].get<double>();
        rope_type = rp.value("rope_type", rp.value("type", std::string("default")));
    } else {
        c.rope_theta = j.value("rope_theta", 10000.0);
        if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
            const json& rs = j["rope_scaling"];
            rope_type = rs.value("rope_type", rs.value("type", std::string("default")));
        }
    }
    if (rope_type != "default") fail("unsupported RoPE type \"" + rope_type + "\" (supported: default)");
    return c;
}

ModelConfig ModelConfig::load(const std::string& model_dir) {
    std::string path = (fs::path(model_dir) / "config.json").string();
    std::error_code ec;
    if (!fs::exists(path, ec)) throw std::runtime_error(model_dir + ": no config.json");
    return from_json(parse_file(path), path);
}

json ModelConfig::to_json() const {
    json j = {{"architectures", {architecture_name()}},
              {"model_type", arch == Arch::qwen2 ? "qwen2" : "qwen3"},
              {"vocab_size", vocab_size},
              {"hidden_size", hidden_size},
              {"intermediate_size", intermediate_size},
              {"num_hidden_layers", num_layers},
              {"num_attention_heads", num_heads},
              {"num_key_value_heads", num_kv_heads},
              {"head_dim", head_dim},
              {"hidden_act", "silu"},
              {"rms_norm_eps", rms_norm_eps},
              {"rope_theta", rope_theta},
              {"max_position_embeddings", max_position_embeddings},
              {"tie_word_embeddings", tie_word_embeddings},
              {"initializer_range", initializer_range},
              {"attention_dropout", 0.0},
              {"use_cache", true},
              {"use_sliding_window", false},
              {"torch_dtype", torch_dtype}};
    if (arch == Arch::qwen3) j["attention_bias"] = qkv_bias;
    if (bos_token_id) j["bos_token_id"] = *bos_token_id;
    if (eos_token_ids.size() == 1)
        j["eos_token_id"] = eos_token_ids[0];
    else if (!eos_token_ids.empty())
        j["eos_token_id"] = eos_token_ids;
    return j;
}

ModelConfig ModelConfig::preset(Arch arch, const std::string& name, int64_t vocab_size) {
    ModelConfig c;
    c.arch = arch;
    c.vocab_size = vocab_size;
    c.qk_norm = arch == Arch::qwen3;
    c.qkv_bias = arch == Arch::qwen2;
    c.o_bias = false;
    c.rope_theta = 1e6;
    if (name == "tiny") {
        c.hidden_size = 64, c.intermediate_size = 128, c.num_layers = 2, c.num_heads = 4, c.num_kv_heads = 2;
        c.tie_word_embeddings = true;
    } else if (name == "small" || name == "small-deep") {
        c.hidden_size = 512, c.intermediate_size = 1408, c.num_heads = 8, c.num_kv_heads = 2;
        c.num_layers = name == "small" ? 6 : 12;
        c.tie_word_embeddings = true;
    } else if (name == "7b-shape") {  // Qwen2.5-7B / Qwen2.5-Coder-7B dimensions
        c.hidden_size = 3584, c.intermediate_size = 18944, c.num_layers = 28, c.num_heads = 28, c.num_kv_heads = 4;
        c.tie_word_embeddings = false;
    } else {
        std::string names;
        for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
        throw std::runtime_error("unknown model preset \"" + name + "\" (" + names + ")");
    }
    c.head_dim = arch == Arch::qwen3 && name == "7b-shape" ? 128 : c.hidden_size / c.num_heads;
    return c;
}

const std::vector<std::string>& ModelConfig::preset_names() {
    static const std::vector<std::string> names = {"tiny", "small", "small-deep", "7b-shape"};
    return names;
}

GenerationDefaults GenerationDefaults::load(const std::string& model_dir) {
    GenerationDefaults g;
    std::string path = (fs::path(model_dir) / "generation_config.json").string();
    std::error_code ec;
    if (!fs::exists(path, ec)) return g;
    json j = parse_file(path);
    if (j.contains("temperature") && j["temperature"].is_number()) g.temperature = j["temperature"].get<double>();
    if (j.contains("top_p") && j["top_p"].is_number()) g.top_p = j["top_p"].get<double>();
    if (j.contains("top_k") && j["top_k"].is_number_integer()) g.top_k = j["top_k"].get<int64_t>();
    if (j.contains("do_sample") && j["do_sample"].is_boolean()) g.do_sample = j["do_sample"].get<bool>();
    if (j.contains("eos_token_id")) g.eos_token_ids = id_list(j["eos_token_id"]);
    return g;
}

}  // namespace kz
