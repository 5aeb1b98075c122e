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

// What a key's value must be (checked by validate()). Messages name the key: "'<key>' must be ...".
struct AtLeast {  // value >= lo
    double lo;
    const char* why = nullptr;  // appended in parentheses
};
struct Positive {};  // value > 0
struct OneOf {       // a string among these
    std::vector<std::string> names;
};
struct Between {  // lo <= value <= hi, or lo < value < hi when open
    double lo, hi;
    bool open = false;
};

[[noreturn]] void bad(const std::string& key, const std::string& why) {
    throw std::invalid_argument("'" + key + "' " + why);
}

std::string number(double x) {
    std::ostringstream o;
    o << x;
    return o.str();
}

// The field tables: each section lists its keys once, with the member each key sets and, where it
// has one, its rule. Parsing, validation and to_json walk the same table with three visitors:
//   v(key, member [, rule])       a value
//   v.path(key, member)           a path (relative ones resolve against the config's directory)
//   v.paths(key, member)          a list of paths
const auto policy_fields = [](auto& p, auto& v) {
    v.path("model", p.model);
    v.path("tokenizer", p.tokenizer);
    v.path("adapter", p.adapter);
    v("full_finetune", p.full_finetune);
    v("lora_rank", p.lora_rank, AtLeast{1});
    v("lora_alpha", p.lora_alpha, Positive{});
    v("lora_targets", p.lora_targets);
    v("lora_compute", p.lora_compute, OneOf{{"adapter", "base"}});
    v("recompute", p.recompute);
    // 0: the policy samples and is scored but never moves (a control for the runs that update).
    v("lr", p.lr, AtLeast{0});
    v("weight_decay", p.weight_decay);
    v("max_grad_norm", p.max_grad_norm);
    v("warmup_steps", p.warmup_steps, AtLeast{0});
    v("dtype", p.dtype, OneOf{{"float32", "bfloat16", "auto"}});
};

const auto propose_fields = [](auto& p, auto& v) {
    v("enabled", p.enabled);
    v("api_sets", p.api_sets, AtLeast{0});
    v("samples_per_set", p.samples_per_set, AtLeast{1});
    v("probe_samples", p.probe_samples, AtLeast{1});
    v("max_new_tokens", p.max_new_tokens, AtLeast{1});
    v("temperature", p.temperature, Positive{});  // the update scores its samples at this temperature
    v("top_p", p.top_p);
    v("levels", p.levels);
    v("target", p.target, Between{0, 1, true});
    v("band_low", p.band_low);
    v("band_high", p.band_high);
    v("lambda_rep", p.lambda_rep);
    v("min_valid", p.min_valid);
    v("validation_workers", p.validation_workers, Between{1, 64});
    v("sizes", p.sizes, OneOf{{"small", "typical"}});
    v("advantage", p.advantage, OneOf{{"grpo", "dr_grpo"}});
    v.path("exclude_sets", p.exclude_sets);
};

const auto coder_phase_fields = [](auto& p, auto& v) {
    v("steps", p.steps, AtLeast{0});
    v("tasks_per_step", p.tasks_per_step, AtLeast{1});
    v("group_size", p.group_size, AtLeast{2, "advantages are group-relative"});
    v("max_new_tokens", p.max_new_tokens, AtLeast{1});
    v("temperature", p.temperature, Positive{});  // the update scores its samples at this temperature
    v("top_p", p.top_p);
    v("replay", p.replay, AtLeast{0});
    v("micro_batch", p.micro_batch, AtLeast{1});
    v("mini_batches", p.mini_batches, AtLeast{1});
    v("reward", p.reward.reward);
    v("gate", p.reward.gate);
    v("advantage", p.reward.advantage);
    v("lambda", p.reward.lambda);
    v("tau", p.reward.tau);
    v("s_max", p.reward.s_max);
    v("ema_decay", p.reward.ema_decay);
    v("eps_low", p.loss.eps_low);
    v("eps_high", p.loss.eps_high);
    v("kl_beta", p.loss.kl_beta);
    v("kl_estimator", p.loss.kl_estimator);
    v("mask_overlong", p.mask_overlong);
};

const auto eval_fields = [](auto& p, auto& v) {
    v.paths("tasks", p.tasks);
    v("samples", p.samples, AtLeast{1});
    v("every", p.every, AtLeast{1});
    v("max_new_tokens", p.max_new_tokens);
    v("temperature", p.temperature);
};

const auto verifier_fields = [](auto& p, auto& v) {
    v("workers", p.workers, AtLeast{1});
    v("in_flight", p.in_flight);
    v("timing_iters", p.timing_iters);
    v("trials", p.trials);
    v("timeout_s", p.timeout_s);
    v("policy", p.policy, OneOf{{"strict", "lenient"}});
    v("url", p.url);
};

const auto sft_fields = [](auto& p, auto& v) {
    v.path("data", p.data);
    v.path("tasks", p.tasks);
    v.path("candidates", p.candidates);
    v.path("eval_data", p.eval_data);
    v("lr", p.lr, AtLeast{0});
    v("schedule", p.schedule, OneOf{{"constant", "cosine"}});
    v("warmup_steps", p.warmup_steps, AtLeast{0});
    v("epochs", p.epochs, AtLeast{1});
    v("batch_size", p.batch_size, AtLeast{1});
    v("group_by_length", p.group_by_length);
    v("max_tokens", p.max_tokens);
    v("deterministic", p.deterministic);
    v.path("out", p.out);
};

// The top level's own keys (the sections are tables of their own).
const auto top_fields = [](auto& c, auto& v) {
    v("name", c.name);
    v("seed", c.seed);
    v("iterations", c.iterations, AtLeast{0});
    v("device", c.device);
    v("verify_device", c.verify_device);
    v("backend", c.backend, OneOf{{"triton", "cuda"}});
    v("format", c.format);
    v.path("task_store", c.task_store);
    v.path("catalog", c.catalog);
    v("warm_start", c.warm_start);
    v("keep_checkpoints", c.keep_checkpoints, AtLeast{0});
    v("verification_budget", c.verification_budget, AtLeast{0});
    v("token_budget", c.token_budget, AtLeast{0});
};

// Reads a table's keys into the members.
struct ReadFields {
    TableReader& r;
    const std::string& base_dir;
    template <class T, class... Rule>
    void operator()(const char* key, T& out, const Rule&...) {
        r.get(key, out);
    }
    void path(const char* key, std::string& out) { r.path(key, out, base_dir); }
    void paths(const char* key, std::vector<std::string>& out) { r.paths(key, out, base_dir); }
};

// Writes the members as a JSON object.
struct WriteFields {
    nlohmann::json& j;
    template <class T, class... Rule>
    void operator()(const char* key, const T& value, const Rule&...) {
        j[key] = value;
    }
    void path(const char* key, const std::string& value) { j[key] = value; }
    void paths(const char* key, const std::vector<std::string>& value) { j[key] = value; }
};

// Checks each member against its rule; throws naming `prefix` + key.
struct CheckFields {
    std::string prefix;
    template <class T>
    void operator()(const char*, const T&) {}
    template <class T>
    void operator()(const char* key, const T& value, const AtLeast& rule) {
        if (static_cast<double>(value) < rule.lo)
            bad(prefix + key,
                "must be >= " + number(rule.lo) + (rule.why ? std::string(" (") + rule.why + ")" : std::string()));
    }
    template <class T>
    void operator()(const char* key, const T& value, const Positive&) {
        if (!(static_cast<double>(value) > 0)) bad(prefix + key, "must be > 0");
    }
    template <class T>
    void operator()(const char* key, const T& value, const Between& rule) {
        const double x = static_cast<double>(value);
        if (rule.open ? !(x > rule.lo && x < rule.hi) : !(x >= rule.lo && x <= rule.hi))
            bad(prefix + key, "must lie in " + std::string(rule.open ? "(" : "[") + number(rule.lo) + ", " +
                                  number(rule.hi) + (rule.open ? ")" : "]"));
    }
    void operator()(const char* key, const std::string& value, const OneOf& rule) {
        for (const auto& n : rule.names)
            if (value == n) return;
        std::string list;
        for (size_t i = 0; i < rule.names.size(); ++i)
            list += (i == 0 ? "" : i + 1 == rule.names.size() ? " or " : ", ") + rule.names[i];
        bad(prefix + key, "must be " + list);
    }
    void path(const char*, const std::string&) {}
    void paths(const char*, const std::vector<std::string>&) {}
};

template <class S, class Fn>
void read_section(TableReader& parent, const char* name, S& s, Fn fields, const std::string& origin,
                  const std::string& base_dir) {
    TableReader r(parent.sub(name), name, origin);
    ReadFields v{r, base_dir};
    fields(s, v);
    r.finish();
}

template <class S, class Fn>
nlohmann::json section_json(const S& s, Fn fields) {
    nlohmann::json j = nlohmann::json::object();
    WriteFields v{j};
    fields(s, v);
    return j;
}

template <class S, class Fn>
void check_section(const std::string& name, const S& s, Fn fields) {
    CheckFields v{name.empty() ? name : name + "."};
    fields(s, v);
}

void check_policy(const std::string& name, const PolicySpec& p) {
    if (p.model.empty()) bad(name + ".model", "is required");
    if (p.model.rfind("init:", 0) == 0 && p.tokenizer.empty())
        bad(name + ".tokenizer", "is required for an init: model (it sets the vocabulary)");
    check_section(name, p, policy_fields);
}

}  // namespace

void TrainConfig::validate() const {
    check_section("", *this, top_fields);
    if (!format.empty() && format != "nvrtc" && format != "inline") bad("format", "must be nvrtc or inline");
    if (!format.empty() && backend != "cuda") bad("format", "applies to the cuda backend only");
    check_policy("coder", coder);
    if (propose.enabled) check_policy("proposer", proposer);
    check_section("propose", propose, propose_fields);
    for (int l : propose.levels)
        if (l != 1 && l != 2) bad("propose.levels", "holds levels 1 and 2 only");
    if (propose.levels.empty()) bad("propose.levels", "must not be empty");
    if (!(0 <= propose.band_low && propose.band_low <= propose.band_high && propose.band_high <= 1))
        bad("propose.band_low/band_high", "must satisfy 0 <= low <= high <= 1");
    check_section("coder_phase", coder_phase, coder_phase_fields);
    try {  // the reward's and the loss's own rules
        coder_phase.reward.validate();
        coder_phase.loss.validate();
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("coder_phase: ") + e.what());
    }
    // The reference policy is the Coder with its adapters off (rl/policy_loss.h): a full fine-tune
    // keeps no copy of its starting weights, so its KL would compare the policy with itself.
    if (coder_phase.loss.kl_beta > 0 && coder.full_finetune)
        bad("coder_phase.kl_beta",
            "needs a LoRA Coder (coder.full_finetune = false): the KL's reference is the "
            "base model with the adapters off");
    check_section("eval", eval, eval_fields);
    check_section("verifier", verifier, verifier_fields);
    check_section("sft", sft, sft_fields);
    if (sft.tasks.empty() != sft.candidates.empty()) bad("sft.tasks/sft.candidates", "go together");
    if (warm_start && sft.data.empty() && sft.tasks.empty()) bad("warm_start", "needs sft.data or sft.tasks");
}

nlohmann::json TrainConfig::to_json() const {
    nlohmann::json j = section_json(*this, top_fields);
    j["coder"] = section_json(coder, policy_fields);
    j["proposer"] = section_json(proposer, policy_fields);
    j["propose"] = section_json(propose, propose_fields);
    j["coder_phase"] = section_json(coder_phase, coder_phase_fields);
    j["eval"] = section_json(eval, eval_fields);
    j["verifier"] = section_json(verifier, verifier_fields);
    j["sft"] = section_json(sft, sft_fields);
    return j;
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
    ReadFields top{r, base_dir};
    top_fields(c, top);
    read_section(r, "coder", c.coder, policy_fields, origin, base_dir);
    // The Proposer defaults to the Coder's base (its own copy and adapter).
    c.proposer = c.coder;
    c.proposer.adapter.clear();
    read_section(r, "proposer", c.proposer, policy_fields, origin, base_dir);
    read_section(r, "propose", c.propose, propose_fields, origin, base_dir);
    read_section(r, "coder_phase", c.coder_phase, coder_phase_fields, origin, base_dir);
    read_section(r, "eval", c.eval, eval_fields, origin, base_dir);
    read_section(r, "verifier", c.verifier, verifier_fields, origin, base_dir);
    read_section(r, "sft", c.sft, sft_fields, origin, base_dir);
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
