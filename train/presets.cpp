// The trainer's embedded presets. Relative paths resolve against the project's source directory.
#include <filesystem>
#include <map>
#include <stdexcept>

#include "train/train_config.h"

namespace kz {

namespace {

// End to end on a 2-core machine without a GPU: tiny random models (their proposals and kernels are
// noise, so the symbolic generator feeds the pool and the Coder's completions are format errors),
// Triton candidates on the CPU interpreter, small task sizes.
const char* kTinyCpu = R"(name = "tiny-cpu"
seed = 0
iterations = 2
device = "cpu"
verify_device = "cpu"
backend = "triton"

[coder]
model = "init:tiny"
tokenizer = "data/qwen2.5-tokenizer"
lora_rank = 8
lora_alpha = 16
lr = 1e-4

[proposer]
model = "init:tiny"
tokenizer = "data/qwen2.5-tokenizer"
lora_rank = 8
lora_alpha = 16
lr = 1e-4

[propose]
api_sets = 2
samples_per_set = 2
probe_samples = 2
max_new_tokens = 64
levels = [1, 2]
sizes = "small"
min_valid = 2

[coder_phase]
steps = 1
tasks_per_step = 2
group_size = 4
max_new_tokens = 64
replay = 1

[eval]
tasks = ["examples/known_good/tasks"]
samples = 1
every = 1
max_new_tokens = 64

[verifier]
workers = 1
in_flight = 2
timing_iters = 3
)";

// The same loop on one GPU: policies in bf16 on CUDA, candidates and validation on the GPU. The Coder
// first learns the known-good Triton answers by heart (warm start: SFT, full fine-tuning), so that
// it writes kernels the verifier runs: its greedy answers on the evaluation tasks, and whatever its
// samples on the pool's tasks become.
const char* kTinyGpu = R"(name = "tiny-gpu"
seed = 0
iterations = 2
device = "cuda"
verify_device = "cuda"
backend = "triton"
warm_start = true

[coder]
model = "init:small"
tokenizer = "data/qwen2.5-tokenizer"
full_finetune = true
lr = 1e-5

[sft]
tasks = "examples/known_good/tasks"
candidates = "examples/known_good/triton"
epochs = 60
batch_size = 4
lr = 1e-3

[proposer]
model = "init:small"
tokenizer = "data/qwen2.5-tokenizer"
full_finetune = false
lora_rank = 16
lora_alpha = 32
lr = 1e-4

[propose]
api_sets = 4
samples_per_set = 4
probe_samples = 4
max_new_tokens = 1024
levels = [1, 2]
sizes = "typical"
min_valid = 4
validation_workers = 4

[coder_phase]
steps = 2
tasks_per_step = 4
group_size = 8
max_new_tokens = 1024
replay = 2

[eval]
tasks = ["examples/known_good/tasks"]
samples = 2
every = 1
max_new_tokens = 1024

[verifier]
workers = 4
in_flight = 8
)";

// A real run (documented in docs/TRAIN.md): Qwen2.5-Coder-7B-Instruct as both Coder and Proposer,
// each with its own LoRA r64 adapter, on one H200 (the verifier shares the GPU). `model` must point
// at a local Hugging Face directory; set eval.tasks to KernelBench's level directories.
const char* kQwen7b = R"(name = "qwen2.5-coder-7b"
seed = 0
iterations = 50
device = "cuda"
verify_device = "cuda"
backend = "triton"

[coder]
model = "models/Qwen2.5-Coder-7B-Instruct"
lora_rank = 64
lora_alpha = 128
recompute = true
lr = 2e-5
max_grad_norm = 1.0

[proposer]
model = "models/Qwen2.5-Coder-7B-Instruct"
lora_rank = 64
lora_alpha = 128
recompute = true
lr = 1e-5

[propose]
api_sets = 16
samples_per_set = 4
probe_samples = 8
max_new_tokens = 2048
temperature = 1.0
levels = [1, 2]
target = 0.5
band_low = 0.2
band_high = 0.8
lambda_rep = 0.1
min_valid = 8
sizes = "typical"

[coder_phase]
steps = 8
tasks_per_step = 32
group_size = 8
max_new_tokens = 4096
temperature = 1.0
replay = 16
micro_batch = 4
reward = "ca_grpo"
gate = "group"
advantage = "grpo"
lambda = 1.0
tau = 0.5
s_max = 4.0
eps_low = 0.2
eps_high = 0.28
kl_beta = 0.0

[eval]
tasks = []
samples = 10
every = 5
max_new_tokens = 4096
temperature = 0.0

[verifier]
workers = 8
in_flight = 32
)";

const std::map<std::string, const char*>& presets() {
    static const std::map<std::string, const char*> p = {
        {"tiny-cpu", kTinyCpu}, {"tiny-gpu", kTinyGpu}, {"qwen2.5-coder-7b", kQwen7b}};
    return p;
}

}  // namespace

std::vector<std::string> train_preset_names() {
    std::vector<std::string> out;
    for (const auto& [k, v] : presets()) out.push_back(k);
    return out;
}

std::string train_preset_toml(const std::string& name) {
    auto it = presets().find(name);
    if (it == presets().end()) {
        std::string known;
        for (const auto& n : train_preset_names()) known += (known.empty() ? "" : ", ") + n;
        throw std::invalid_argument("unknown preset '" + name + "' (known: " + known + ")");
    }
    return it->second;
}

TrainConfig train_preset(const std::string& name) {
    return parse_train_config(train_preset_toml(name), "preset " + name, KZ_SOURCE_DIR);
}

}  // namespace kz
