// The trainer's configuration (design sections 6.2-6.6): one TOML file, or a named preset embedded in
// the binary (tiny-cpu, tiny-gpu, qwen2.5-coder-7b). Every key has a default; an unknown key, a value
// of the wrong type or out of range is an error naming the key, so a typo never silently falls back
// to a default. No torch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/policy_loss_config.h"
#include "rl/rewards.h"
#include "verify/service.h"

namespace kz {

// One trainable policy (the Coder, or the Proposer).
struct PolicySpec {
    // A Hugging Face model directory, or "init:<preset>" (engine/config.h): a random Qwen2 of that shape
    // with the vocabulary of `tokenizer`, written once into the run directory (seeded by run.seed).
    std::string model = "init:tiny";
    std::string tokenizer;       // for "init:" models; a model directory brings its own
    std::string adapter;         // optional PEFT adapter to start from (e.g. an SFT result)
    bool full_finetune = false;  // false: LoRA
    int64_t lora_rank = 16;
    double lora_alpha = 32;
    std::vector<std::string> lora_targets = {"all-linear"};
    // Where the LoRA products are computed: "adapter" (in the adapters' fp32, as peft computes them)
    // or "base" (in the activations' dtype, as torch.autocast does: HF Trainer with bf16, verl).
    std::string lora_compute = "adapter";
    // Per-layer activation recomputation in the policy update: each layer's activations are kept
    // for one layer at a time (memory of a 7B update at long sequences), for ~1/3 more compute.
    bool recompute = false;
    double lr = 1e-5, weight_decay = 0.0, max_grad_norm = 1.0;
    // The lr rises linearly over the policy's first warmup_steps AdamW steps (engine/training.h).
    int64_t warmup_steps = 0;
    std::string dtype = "auto";  // float32 | bfloat16 | auto (bf16 on CUDA, fp32 on the CPU)
};

struct ProposerPhase {
    bool enabled = true;
    int api_sets = 4;         // API sets drawn from the frontier per iteration
    int samples_per_set = 4;  // proposals per set: the Proposer's group
    int probe_samples = 4;    // Coder samples per valid module, for p-hat
    int64_t max_new_tokens = 1024;
    double temperature = 1.0, top_p = 1.0;
    std::vector<int> levels = {1, 2};  // KernelBench levels drawn from, in turn
    double target = 0.5;               // the frontier's target pass rate
    double band_low = 0.2, band_high = 0.8;
    double lambda_rep = 0.1;  // repetition penalty of the Proposer's reward
    // When fewer than this many modules pass validation, the symbolic generator composes the rest
    // from the same API sets (a Proposer that writes nothing usable does not starve the Coder).
    int min_valid = 1;
    int validation_workers = 1;      // module validations at once per rank (one reference worker each)
    std::string sizes = "typical";   // symbolic fallback's sizes: small | typical
    std::string advantage = "grpo";  // grpo | dr_grpo over each set's proposals
    // A file of API sets never drawn, one per line, APIs comma-separated in any order (e.g. the held-out
    // sets of an evaluation: `kernelzero corpus` writes heldout/api_sets.txt). "" = none.
    std::string exclude_sets;
};

struct CoderPhase {
    int steps = 1;  // CA-GRPO steps per iteration
    int tasks_per_step = 4;
    int group_size = 8;  // G
    int64_t max_new_tokens = 1024;
    double temperature = 1.0, top_p = 1.0;
    int replay = 2;  // older stored tasks mixed into each iteration's pool
    int64_t micro_batch = 8;
    int mini_batches = 1;   // optimizer updates per step, over whole groups (CoderStepConfig)
    RewardConfig reward;    // keys reward, gate, advantage, lambda, tau, s_max, ema_decay
    PolicyLossConfig loss;  // keys eps_low, eps_high, kl_beta, kl_estimator
    bool mask_overlong = true;
};

struct EvalPhase {
    std::vector<std::string> tasks;  // KernelBench-format directories (empty: no evaluation)
    int samples = 1;
    int every = 1;  // iterations between evaluations (the last one always runs)
    int64_t max_new_tokens = 1024;
    double temperature = 0.0;  // 0: greedy
};

struct VerifierSpec {
    int workers = 2;
    int in_flight = 4;
    int timing_iters = 0;  // 0: the verifier's default for the device
    std::string url;       // "" / "local": the in-process pool; redis://host:port/db: a farm
    int trials = kVerifyDefaults.trials;
    double timeout_s = kVerifyDefaults.timeout_s;
    std::string policy = "strict";
};

struct SftSpec {
    std::string data;  // JSONL: {"prompt": str | [messages], "completion": str}
    // And/or pairs from two directories: each task file of `tasks` with the candidate of the same
    // name in `candidates`, as the Coder prompt and a ```python block (the answer format it asks for).
    std::string tasks, candidates;
    // JSONL pairs in sft.data's format that are never trained on: their mean completion loss is
    // measured after every epoch (a held-out curve: where the SFT stops generalising). Empty: none.
    std::string eval_data;
    double lr = 0;  // 0: the policy's lr
    // "constant", or "cosine": from lr down to lr / 10 over all steps. Either starts with
    // warmup_steps of linear warm-up from 0 (training from scratch needs it; fine-tuning rarely).
    std::string schedule = "constant";
    int warmup_steps = 0;
    int epochs = 1;
    int batch_size = 8;
    // Batches of pairs of like length: each epoch's shuffled order is sorted by length (longest first)
    // within runs of 16 batches, so a batch pads to little more than its own pairs.
    bool group_by_length = false;
    int64_t max_tokens = 4096;  // longer pairs are skipped (counted)
    // PyTorch's deterministic algorithms, strict, while the SFT runs (and cuBLAS's deterministic
    // workspace, CUBLAS_WORKSPACE_CONFIG=:4096:8, unless the environment sets one): the same pairs,
    // seed and configuration on the same GPU and software give the same weights, bit for bit, so
    // that runs on separate machines can start from one checkpoint. An op with no deterministic
    // algorithm throws rather than run nondeterministically.
    bool deterministic = false;
    std::string out;  // where the adapter (or merged model) goes
};

struct TrainConfig {
    std::string name = "custom";
    uint64_t seed = 0;
    int iterations = 2;
    std::string device = "cpu";         // where the policies run: cpu | cuda | cuda:N
    std::string verify_device = "cpu";  // where candidates run
    std::string backend = "triton";     // triton | cuda
    std::string format;                 // cuda: nvrtc (default) | inline
    std::string task_store;             // "" = <run>/tasks.sqlite
    std::string catalog;                // the API catalog drawn from; "" = the repository's
    bool warm_start = false;            // train: SFT of the Coder on [sft] before iteration 1 (stage warm_start)
    // Complete checkpoints kept: the newest N (an older one goes once a newer one is in place); 0 keeps
    // all. A full-fine-tuning checkpoint holds fp32 masters and AdamW moments: ~14 bytes a parameter.
    int keep_checkpoints = 0;
    // What the run may spend, for arms compared at equal cost: it ends after the iteration at which
    // its verifications of sampled kernels (the Coder's steps and the probes of proposed modules, all
    // ranks; the evaluation's not counted) reach verification_budget, or its sampled tokens (both
    // policies) reach token_budget; that iteration is evaluated as the last. 0: no budget (`iterations`
    // alone ends the run, and always bounds it).
    int64_t verification_budget = 0, token_budget = 0;
    PolicySpec coder, proposer;
    ProposerPhase propose;
    CoderPhase coder_phase;
    EvalPhase eval;
    VerifierSpec verifier;
    SftSpec sft;

    // Throws std::invalid_argument naming the key.
    void validate() const;
    nlohmann::json to_json() const;  // recorded in the run directory
};

// Parses TOML text; `origin` names it in errors (a file path, or "preset tiny-cpu"). Relative paths in
// the file are resolved against `base_dir`. Throws std::invalid_argument naming the key or the line.
TrainConfig parse_train_config(const std::string& toml_text, const std::string& origin, const std::string& base_dir);
TrainConfig load_train_config(const std::string& path);
// The embedded presets; their relative paths resolve against the project's source directory.
std::vector<std::string> train_preset_names();
std::string train_preset_toml(const std::string& name);  // throws naming the known presets
TrainConfig train_preset(const std::string& name);

}  // namespace kz
