#include "engine/hf_checkpoint.h"

#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "engine/tensor_io.h"

namespace kz {

namespace fs = std::filesystem;

namespace {

std::string dtype_name(torch::ScalarType t) {
    switch (t) {
        case torch::kFloat32: return "float32";
        case torch::kBFloat16: return "bfloat16";
        case torch::kFloat16: return "float16";
        default: return "float32";
    }
}

}  // namespace

void save_hf_model(const Model& model, const std::string& out_dir, torch::ScalarType dtype,
                   const std::string& tokenizer_dir) {
    fs::create_directories(out_dir);
    save_tensors((fs::path(out_dir) / "model.safetensors").string(), model.named_parameters(), dtype);
    ModelConfig cfg = model.config();
    cfg.torch_dtype = dtype_name(dtype);
    write_file_atomic((fs::path(out_dir) / "config.json").string(), cfg.to_json().dump(2) + "\n");
    nlohmann::json gen = {{"do_sample", true}, {"temperature", 1.0}, {"top_p", 1.0}};
    if (cfg.bos_token_id) gen["bos_token_id"] = *cfg.bos_token_id;
    if (!cfg.eos_token_ids.empty()) gen["eos_token_id"] = cfg.eos_token_ids;
    write_file_atomic((fs::path(out_dir) / "generation_config.json").string(), gen.dump(2) + "\n");
    if (!tokenizer_dir.empty()) {
        for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
            fs::path src = fs::path(tokenizer_dir) / f;
            std::error_code ec;
            if (!fs::exists(src, ec)) {
                if (std::string(f) == "tokenizer.json") throw std::runtime_error(tokenizer_dir + ": no tokenizer.json");
                continue;
            }
            write_file_atomic((fs::path(out_dir) / f).string(), read_file(src.string()));
        }
    }
}

}  // namespace kz
