// The Coder's prompt and the reading of its answer, shared by evaluation (`kernelzero bench`) and
// training. Prompts are versioned text files, prompts/<version>/: system.md and one file per
// candidate format (triton.md, cuda_nvrtc.md, cuda_inline.md), each with a worked example and a
// `{task}` placeholder for the task's source. Changing a prompt means a new version directory, so a
// run's records always say which prompt produced them.
#pragma once

#include <string>
#include <vector>

#include "engine/chat.h"

namespace kz {

inline constexpr const char* kCoderPromptVersion = "coder-v1";

enum class CoderFormat { triton, cuda_nvrtc, cuda_inline };

// backend "triton" | "cuda", format "nvrtc" | "inline" (cuda only; empty = nvrtc). Throws
// std::invalid_argument naming the bad value.
CoderFormat coder_format(const std::string& backend, const std::string& format);
const char* backend_of(CoderFormat f);   // "triton" | "cuda"
const char* format_name(CoderFormat f);  // "triton" | "cuda_nvrtc" | "cuda_inline"

// The source tree's prompts directory (where the build found it).
std::string default_prompts_dir();

class CoderPrompt {
public:
    // Reads <dir>/<version>/system.md and <format>.md. Throws std::runtime_error naming a missing
    // file or a template without `{task}`.
    static CoderPrompt load(CoderFormat format, const std::string& version = kCoderPromptVersion,
                            const std::string& dir = default_prompts_dir());
    // System and user messages for one task.
    std::vector<ChatMessage> messages(const std::string& task_source) const;
    const std::string& version() const { return version_; }

private:
    std::string version_, system_, user_template_;
};

// A candidate written as the Coder's answer (what SFT trains on): one ```python block holding it.
// extract_candidate() reads it back unchanged.
std::string coder_answer(const std::string& candidate_source);

// The candidate in a completion: the last complete fenced code block (```python or ```) that defines
// `class ModelNew`. On failure `source` is empty and `reason` says why (the format_error verdict's
// reason): no code block, an unclosed fence, or no block defining ModelNew.
struct Extraction {
    std::string source;
    std::string reason;
    bool ok() const { return !source.empty(); }
};
Extraction extract_candidate(const std::string& completion);

}  // namespace kz
