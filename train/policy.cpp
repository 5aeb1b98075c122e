#include "train/policy.h"

#include <filesystem>
#include <stdexcept>

#include "common/files.h"
#include "engine/hf_checkpoint.h"

namespace kz {

namespace fs = std::filesystem;

std::string materialise_model(const PolicySpec& spec, const std::string& dir, uint64_t seed) {
    if (spec.model.rfind("init:", 0) != 0) {
        if (!fs::is_regular_file(fs::path(spec.model) / "config.json"))
            throw std::runtime_error("model directory " + spec.model + " has no config.json");
        return spec.model;
    }
    if (fs::is_regular_file(fs::path(dir) / "model.safetensors")) return dir;  // written by an earlier start
    const std::string preset = spec.model.substr(5);
    Tokenizer tok = Tokenizer::load(spec.tokenizer);
    ModelConfig cfg = ModelConfig::preset(Arch::qwen2, preset, (tok.vocab_size() + 127) / 128 * 128);
    if (auto e = tok.eos_id()) cfg.eos_token_ids = {*e};
    if (auto e = tok.token_id("<|endoftext|>")) cfg.bos_token_id = *e;
    Model m = Model::random(cfg, torch::kCPU, torch::kFloat32, seed);
    // Written beside and renamed: a directory with model.safetensors is complete.
    const std::string tmp = dir + ".tmp";
    fs::remove_all(tmp);
    save_hf_model(m, tmp, torch::kFloat32, spec.tokenizer);
    fs::remove_all(dir);
    fs::rename(tmp, dir);
    return dir;
}

Policy::Policy(std::string name, const PolicySpec& spec, const std::string& model_dir, const std::string& device,
               uint64_t seed)
    : name_(std::move(name)),
      model_dir_(model_dir),
      spec_(spec),
      tok_(Tokenizer::load(model_dir)),
      model_([&] {
          torch::Device dev = device_from_name(device);
          return Model::load(model_dir, dev, dtype_from_name(spec.dtype, dev));
      }()),
      chat_(ChatFormat::from_template(tok_.chat_template())),
      stops_(stop_ids(tok_, model_.config(), GenerationDefaults::load(model_dir))) {
    std::vector<std::pair<std::string, torch::Tensor>> params;
    if (spec.full_finetune) {
        params = full_parameters(model_);
    } else {
        if (!spec.adapter.empty()) {
            lora_ = load_peft_adapter(model_, spec.adapter);
        } else {
            lora_.rank = spec.lora_rank;
            lora_.alpha = spec.lora_alpha;
            lora_.target_modules = spec.lora_targets;
            lora_.validate();
            attach_lora(model_, lora_, seed);
        }
        params = lora_parameters(model_);
        model_.lora_in_base_dtype = spec.lora_compute == "base";
    }
    model_.recompute_layers = spec.recompute;
    optim_.lr = spec.lr;
    optim_.weight_decay = spec.weight_decay;
    optim_.max_grad_norm = spec.max_grad_norm;
    optim_.warmup_steps = spec.warmup_steps;
    opt_ = std::make_unique<PolicyOptimizer>(std::move(params), optim_);
}

void Policy::reset_optimizer() {
    auto params = opt_->params();
    opt_.reset();
    opt_ = std::make_unique<PolicyOptimizer>(std::move(params), optim_);
}

std::vector<int64_t> Policy::encode_chat(const std::vector<ChatMessage>& messages) const {
    return tok_.encode(chat_.render(messages, true));
}

void Policy::save(const std::string& dir) const {
    fs::create_directories(dir);
    opt_->save_state(dir + "/optimizer.pt");
    if (!spec_.full_finetune) save_peft_adapter(const_cast<Model&>(model_), lora_, dir + "/adapter", model_dir_);
}

void Policy::restore(const std::string& dir) { opt_->load_state(dir + "/optimizer.pt"); }

PolicySource::PolicySource(Model& model, const Tokenizer& tok, std::vector<int64_t> stops, SamplingParams sampling,
                           int64_t max_new_tokens, int batch, std::string describe)
    : model_(model),
      tok_(tok),
      chat_(ChatFormat::from_template(tok.chat_template())),
      stops_(std::move(stops)),
      sampling_(sampling),
      max_new_tokens_(max_new_tokens),
      batch_(batch),
      describe_(std::move(describe)) {}

std::vector<std::vector<std::string>> PolicySource::complete(const std::vector<std::vector<ChatMessage>>& prompts,
                                                             int n) {
    GenerateRequest req;
    for (const auto& p : prompts) {
        auto ids = tok_.encode(chat_.render(p, true));
        for (int s = 0; s < n; ++s) req.prompts.push_back(ids);
    }
    req.max_new_tokens = max_new_tokens_;
    req.stop_ids = stops_;
    req.sampling = sampling_;
    req.sampling.seed = sampling_.seed + 1000003 * calls_++;  // a fresh stream per call, reproducible
    std::vector<Completion> outs;
    {
        torch::NoGradGuard no_grad;
        outs = generate(model_, req);
    }
    std::vector<std::vector<std::string>> texts(prompts.size());
    for (size_t i = 0; i < outs.size(); ++i)
        texts[i / static_cast<size_t>(n)].push_back(tok_.decode(outs[i].text_tokens()));
    return texts;
}

}  // namespace kz
