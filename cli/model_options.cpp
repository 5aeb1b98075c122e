#include "cli/model_options.h"

#include "engine/lora.h"

namespace kz::cli {

void add_model_options(CLI::App* cmd, ModelArgs& a, bool required) {
    auto* opt = cmd->add_option("--model", a.model, "Hugging Face model directory");
    if (required) opt->required();
    cmd->add_option("--adapter", a.adapter, "A peft LoRA adapter directory to apply");
    cmd->add_option("--device", a.device, "cpu, cuda, cuda:N or auto");
    cmd->add_option("--dtype", a.dtype, "float32, bfloat16, float16 or auto (bf16 on GPU, fp32 on CPU)");
}

Model load_model(const ModelArgs& a) {
    torch::Device dev = device_from_name(a.device);
    Model m = Model::load(a.model, dev, dtype_from_name(a.dtype, dev));
    if (!a.adapter.empty()) load_peft_adapter(m, a.adapter);
    return m;
}

}  // namespace kz::cli
