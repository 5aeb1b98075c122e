// The Proposer's prompt and the parser of its completions (design section 4). The parser never
// repairs: a completion that does not hold exactly one complete task file is a parse failure with a
// reason, and the Proposer's reward for it is -1.
#pragma once

#include <string>
#include <vector>

#include "engine/chat.h"
#include "tasks/api_catalog.h"

namespace kz {

constexpr int kProposerPromptVersion = 1;

// System and user messages asking for one KernelBench-format task that uses every API of the set.
std::vector<ChatMessage> proposer_prompt(const ApiCatalog& catalog, const std::vector<std::string>& apis,
                                         const std::string& difficulty_hint = "",
                                         const std::vector<std::string>& examples = {});

struct ParsedProposal {
    bool ok = false;
    std::string source;  // the task file, when ok
    std::string reason;  // why not, when not ok
};

ParsedProposal parse_proposal(const std::string& completion);

}  // namespace kz
