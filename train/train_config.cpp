#include "train/train_config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

#include "common/files.h"

namespace kz {

namespace {

namespace fs = std::filesystem;

// Reads one TOML table: every key read is remembered, so that finish() can refuse the rest.
class TableReader {
public:
    TableReader(const toml::table* t, std::string path, const std::string& origin)
        : t_(t), path_(std::move(path)), origin_(origin) {}

    template <class T>
    void get(const char* key, T& out) {
        const toml::node* n = node(key);
        if (!n) return;
        if constexpr (std::is_same_v<T, bool>) {
            auto v = n->value_exact<bool>();
            if (!v) fail(key, "a boolean");
            out = *v;
        } else if constexpr (std::is_integral_v<T>) {
            auto v = n->value_exact<int64_t>();
            if (!v) fail(key, "an integer");
            if constexpr (std::is_unsigned_v<T>)
                if (*v < 0) fail(key, "a non-negative integer");
            out = static_cast<T>(*v);
        } else if constexpr (std::is_floating_point_v<T>) {
            auto v = n->value<double>();  // an integer is a fine float
            if (!v) fail(key, "a number");
            out = *v;
        } else if constexpr (std::is_same_v<T, std::string>) {
            auto v = n->value_exact<std::string>();
            if (!v) fail(key, "a string");
            out = *v;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            const toml::array* a = n->as_array();
            if (!a) fail(key, "an array of strings");
            out.clear();
            for (const auto& e : *a) {
                auto v = e.value_exact<std::string>();
                if (!v) fail(key, "an array of strings");
                out.push_back(*v);
            }
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
            const toml::array* a = n->as_array();
            if (!a) fail(key, "an array of integers");
            out.clear();
            for (const auto& e : *a) {
                auto v = e.value_exact<int64_t>();
                if (!v) fail(key, "an array of integers");
                out.push_back(static_cast<int>(*v));
            }
        }
    }
    // A path: relative ones resolve against base_dir. "init:..." model names are not paths.
    void path(const char* key, std::string& out, const std::string& base_dir) {
        get(key, out);
        if (!out.empty() && out.rfind("init:", 0) != 0 && fs::path(out).is_relative() && node(key))
            out = (fs::path(base_dir) / out).lexically_normal().string();
    }
    void paths(const char* key, std::vector<std::string>& out, const std::string& base_dir) {
        get(key, out);
        if (!node(key)) return;
        for (auto& p : out)
            if (fs::path(p).is_relative()) p = (fs::path(base_dir) / p).lexically_normal().string();
    }
    const toml::table* sub(const char* key) {
        const toml::node* n = node(key);
        if (!n) return nullptr;
        if (!n->is_table()) fail(key, "a table");
        return n->as_table();
    }
    std::string key_path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
    void finish() const {
        if (!t_) return;
        for (const auto& [k, v] : *t_)
            if (!used_.count(std::string(k.str())))
                throw std::invalid_argument(origin_ + ": unknown key '" + key_path(std::string(k.str()).c_str()) + "'");
    }

private:
    const toml::node* node(const char* key) {
        if (!t_) return nullptr;
        used_.insert(key);
        return t_->get(key);
    }
    [[noreturn]] void fail(const char* key, const char* want) const {
        throw std::invalid_argument(origin_ + ": '" + key_path(key) + "' must be " + want);
    }
    const toml::table* t_;
    std::string path_;
    const std::string& origin_;
    std::set<std::string> used_;
};

void read_policy(TableReader& parent, const char* name, PolicySpec& p, const std::string& origin,
                 const std::string& base_dir) {
    TableReader r(parent.sub(name), name, origin);
    r.path("model", p.model, base_dir);
    r.path("tokenizer", p.tokenizer, base_dir);
    r.path("adapter", p.adapter, base_dir);
    r.get("full_finetune", p.full_finetune);
    r.get("lora_rank", p.lora_rank);
    r.get("lora_alpha", p.lora_alpha);
    r.get("lora_targets", p.lora_targets);
    r.get("lora_compute", p.lora_compute);
    r.get("recompute", p.recompute);
    r.get("lr", p.lr);
    r.get("weight_decay", p.weight_decay);
    r.get("max_grad_norm", p.max_grad_norm);
    r.get("dtype", p.dtype);
    r.finish();
}

[[noreturn]] void bad(const std::string& key, const std::string& why) {
    throw std::invalid_argument("'" + key + "' " + why);
}

void check_policy(const std::string& name, const PolicySpec& p) {
    if (p.model.empty()) bad(name + ".model", "is required");
    if (p.model.rfind("init:", 0) == 0 && p.tokenizer.empty())
        bad(name + ".tokenizer", "is required for an init: model (it sets the vocabulary)");
    if (p.lora_rank < 1) bad(name + ".lora_rank", "must be >= 1");
    if (p.lora_alpha <= 0) bad(name + ".lora_alpha", "must be > 0");
    if (p.lora_compute != "adapter" && p.lora_compute != "base") bad(name + ".lora_compute", "must be adapter or base");
    if (p.lr <= 0) bad(name + ".lr", "must be > 0");
    if (p.dtype != "auto" && p.dtype != "float32" && p.dtype != "bfloat16")
        bad(name + ".dtype", "must be float32, bfloat16 or auto");
}

nlohmann::json policy_json(const PolicySpec& p) {
    return {{"model", p.model},
            {"tokenizer", p.tokenizer},
            {"adapter", p.adapter},
            {"full_finetune", p.full_finetune},
            {"lora_rank", p.lora_rank},
            {"lora_alpha", p.lora_alpha},
            {"lora_targets", p.lora_targets},
            {"lora_compute", p.lora_compute},
            {"recompute", p.recompute},
            {"lr", p.lr},
            {"weight_decay", p.weight_decay},
            {"max_grad_norm", p.max_grad_norm},
            {"dtype", p.dtype}};
}

}  // namespace

void TrainConfig::validate() const {
    if (iterations < 0) bad("iterations", "must be >= 0");
    if (backend != "triton" && backend != "cuda") bad("backend", "must be triton or cuda");
    if (!format.empty() && format != "nvrtc" && format != "inline") bad("format", "must be nvrtc or inline");
    if (!format.empty() && backend != "cuda") bad("format", "applies to the cuda backend only");
    check_policy("coder", coder);
    if (propose.enabled) check_policy("proposer", proposer);
    if (propose.api_sets < 0) bad("propose.api_sets", "must be >= 0");
    if (propose.samples_per_set < 1) bad("propose.samples_per_set", "must be >= 1");
    if (propose.probe_samples < 1) bad("propose.probe_samples", "must be >= 1");
    if (propose.max_new_tokens < 1) bad("propose.max_new_tokens", "must be >= 1");
    for (int l : propose.levels)
        if (l != 1 && l != 2) bad("propose.levels", "holds levels 1 and 2 only");
    if (propose.levels.empty()) bad("propose.levels", "must not be empty");
    if (!(propose.target > 0 && propose.target < 1)) bad("propose.target", "must lie in (0, 1)");
    if (!(0 <= propose.band_low && propose.band_low <= propose.band_high && propose.band_high <= 1))
        bad("propose.band_low/band_high", "must satisfy 0 <= low <= high <= 1");
    if (propose.sizes != "small" && propose.sizes != "typical") bad("propose.sizes", "must be small or typical");
    if (propose.validation_workers < 1 || propose.validation_workers > 64)
        bad("propose.validation_workers", "must lie in [1, 64]");
    if (propose.advantage != "grpo" && propose.advantage != "dr_grpo")
        bad("propose.advantage", "must be grpo or dr_grpo");
    if (coder_phase.steps < 0) bad("coder_phase.steps", "must be >= 0");
    if (coder_phase.tasks_per_step < 1) bad("coder_phase.tasks_per_step", "must be >= 1");
    if (coder_phase.group_size < 2) bad("coder_phase.group_size", "must be >= 2 (advantages are group-relative)");
    if (coder_phase.max_new_tokens < 1) bad("coder_phase.max_new_tokens", "must be >= 1");
    if (coder_phase.micro_batch < 1) bad("coder_phase.micro_batch", "must be >= 1");
    if (coder_phase.replay < 0) bad("coder_phase.replay", "must be >= 0");
    if (eval.samples < 1) bad("eval.samples", "must be >= 1");
    if (eval.every < 1) bad("eval.every", "must be >= 1");
    if (verifier.workers < 1) bad("verifier.workers", "must be >= 1");
    if (sft.epochs < 1) bad("sft.epochs", "must be >= 1");
    if (sft.batch_size < 1) bad("sft.batch_size", "must be >= 1");
    if (sft.lr < 0) bad("sft.lr", "must be >= 0");
    if (sft.tasks.empty() != sft.candidates.empty()) bad("sft.tasks/sft.candidates", "go together");
    if (warm_start && sft.data.empty() && sft.tasks.empty()) bad("warm_start", "needs sft.data or sft.tasks");
    if (verifier.policy != "strict" && verifier.policy != "lenient")
        bad("verifier.policy", "must be strict or lenient");
}

nlohmann::json TrainConfig::to_json() const {
    const auto& p = propose;
    const auto& c = coder_phase;
    return {{"name", name},
            {"seed", seed},
            {"iterations", iterations},
            {"device", device},
            {"verify_device", verify_device},
            {"backend", backend},
            {"format", format},
            {"task_store", task_store},
            {"warm_start", warm_start},
            {"coder", policy_json(coder)},
            {"proposer", policy_json(proposer)},
            {"propose",
             {{"enabled", p.enabled},
              {"api_sets", p.api_sets},
              {"samples_per_set", p.samples_per_set},
              {"probe_samples", p.probe_samples},
              {"max_new_tokens", p.max_new_tokens},
              {"temperature", p.temperature},
              {"top_p", p.top_p},
              {"levels", p.levels},
              {"target", p.target},
              {"band_low", p.band_low},
              {"band_high", p.band_high},
              {"lambda_rep", p.lambda_rep},
              {"min_valid", p.min_valid},
              {"validation_workers", p.validation_workers},
              {"sizes", p.sizes},
              {"advantage", p.advantage}}},
            {"coder_phase",
             {{"steps", c.steps},
              {"tasks_per_step", c.tasks_per_step},
              {"group_size", c.group_size},
              {"max_new_tokens", c.max_new_tokens},
              {"temperature", c.temperature},
              {"top_p", c.top_p},
              {"replay", c.replay},
              {"micro_batch", c.micro_batch},
              {"reward", c.reward},
              {"gate", c.gate},
              {"advantage", c.advantage},
              {"lambda", c.lambda},
              {"tau", c.tau},
              {"s_max", c.s_max},
              {"ema_decay", c.ema_decay},
              {"eps_low", c.eps_low},
              {"eps_high", c.eps_high},
              {"kl_beta", c.kl_beta},
              {"mask_overlong", c.mask_overlong}}},
            {"eval",
             {{"tasks", eval.tasks},
              {"samples", eval.samples},
              {"every", eval.every},
              {"max_new_tokens", eval.max_new_tokens},
              {"temperature", eval.temperature}}},
            {"verifier",
             {{"workers", verifier.workers},
              {"in_flight", verifier.in_flight},
              {"timing_iters", verifier.timing_iters},
              {"trials", verifier.trials},
              {"timeout_s", verifier.timeout_s},
              {"policy", verifier.policy},
              {"url", verifier.url}}},
            {"sft",
             {{"data", sft.data},
              {"tasks", sft.tasks},
              {"candidates", sft.candidates},
              {"lr", sft.lr},
              {"epochs", sft.epochs},
              {"batch_size", sft.batch_size},
              {"max_tokens", sft.max_tokens},
              {"out", sft.out}}}};
}

TrainConfig parse_train_config(const std::string& text, const std::string& origin, const std::string& base_dir) {
    toml::table root;
    try {
        root = toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        std::ostringstream msg;
        msg << origin << ": line " << e.source().begin.line << ": " << e.description();
        throw std::invalid_argument(msg.str());
    }
    TrainConfig c;
    TableReader r(&root, "", origin);
    r.get("name", c.name);
    r.get("seed", c.seed);
    r.get("iterations", c.iterations);
    r.get("device", c.device);
    r.get("verify_device", c.verify_device);
    r.get("backend", c.backend);
    r.get("format", c.format);
    r.path("task_store", c.task_store, base_dir);
    r.get("warm_start", c.warm_start);
    read_policy(r, "coder", c.coder, origin, base_dir);
    // The Proposer defaults to the Coder's base (its own copy and adapter).
    c.proposer = c.coder;
    c.proposer.adapter.clear();
    read_policy(r, "proposer", c.proposer, origin, base_dir);
    {
        TableReader t(r.sub("propose"), "propose", origin);
        auto& p = c.propose;
        t.get("enabled", p.enabled);
        t.get("api_sets", p.api_sets);
        t.get("samples_per_set", p.samples_per_set);
        t.get("probe_samples", p.probe_samples);
        t.get("max_new_tokens", p.max_new_tokens);
        t.get("temperature", p.temperature);
        t.get("top_p", p.top_p);
        t.get("levels", p.levels);
        t.get("target", p.target);
        t.get("band_low", p.band_low);
        t.get("band_high", p.band_high);
        t.get("lambda_rep", p.lambda_rep);
        t.get("min_valid", p.min_valid);
        t.get("validation_workers", p.validation_workers);
        t.get("sizes", p.sizes);
        t.get("advantage", p.advantage);
        t.finish();
    }
    {
        TableReader t(r.sub("coder_phase"), "coder_phase", origin);
        auto& p = c.coder_phase;
        t.get("steps", p.steps);
        t.get("tasks_per_step", p.tasks_per_step);
        t.get("group_size", p.group_size);
        t.get("max_new_tokens", p.max_new_tokens);
        t.get("temperature", p.temperature);
        t.get("top_p", p.top_p);
        t.get("replay", p.replay);
        t.get("micro_batch", p.micro_batch);
        t.get("reward", p.reward);
        t.get("gate", p.gate);
        t.get("advantage", p.advantage);
        t.get("lambda", p.lambda);
        t.get("tau", p.tau);
        t.get("s_max", p.s_max);
        t.get("ema_decay", p.ema_decay);
        t.get("eps_low", p.eps_low);
        t.get("eps_high", p.eps_high);
        t.get("kl_beta", p.kl_beta);
        t.get("mask_overlong", p.mask_overlong);
        t.finish();
    }
    {
        TableReader t(r.sub("eval"), "eval", origin);
        t.paths("tasks", c.eval.tasks, base_dir);
        t.get("samples", c.eval.samples);
        t.get("every", c.eval.every);
        t.get("max_new_tokens", c.eval.max_new_tokens);
        t.get("temperature", c.eval.temperature);
        t.finish();
    }
    {
        TableReader t(r.sub("verifier"), "verifier", origin);
        t.get("workers", c.verifier.workers);
        t.get("in_flight", c.verifier.in_flight);
        t.get("timing_iters", c.verifier.timing_iters);
        t.get("trials", c.verifier.trials);
        t.get("timeout_s", c.verifier.timeout_s);
        t.get("policy", c.verifier.policy);
        t.get("url", c.verifier.url);
        t.finish();
    }
    {
        TableReader t(r.sub("sft"), "sft", origin);
        t.path("data", c.sft.data, base_dir);
        t.path("tasks", c.sft.tasks, base_dir);
        t.path("candidates", c.sft.candidates, base_dir);
        t.get("lr", c.sft.lr);
        t.get("epochs", c.sft.epochs);
        t.get("batch_size", c.sft.batch_size);
        t.get("max_tokens", c.sft.max_tokens);
        t.path("out", c.sft.out, base_dir);
        t.finish();
    }
    r.finish();
    try {
        c.validate();
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(origin + ": " + e.what());
    }
    return c;
}

TrainConfig load_train_config(const std::string& path) {
    if (!fs::is_regular_file(path)) throw std::invalid_argument("config file " + path + " does not exist");
    std::string base = fs::absolute(path).parent_path().string();
    return parse_train_config(read_file(path), path, base);
}

}  // namespace kz
