// The trainer's judge (a CoderJudge): each completion's candidate is extracted (prompts/coder_prompt.h;
// none is a format_error verdict, incorrect) and the rest are verified in parallel by the verifier.
// Verdicts are kept for the rollout records; an infra_error stays an infra error (never a reward).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "rl/rewards.h"
#include "verify/verifier.h"

namespace kz {

class VerifierJudge {
public:
    // `task_sources` indexed as the step's tasks; backend "triton" | "cuda".
    VerifierJudge(VerifyService& verifier, std::vector<std::string> task_sources, std::string backend,
                  int in_flight = 4);
    std::vector<RolloutOutcome> operator()(const std::vector<std::pair<size_t, std::string>>& items);
    // The verdicts of the last call, in its order.
    const std::vector<Verdict>& verdicts() const { return verdicts_; }
    // How many of the last call's completions reached the verifier (the rest had no candidate).
    size_t verified() const { return verified_; }

private:
    VerifyService& verifier_;
    std::vector<std::string> tasks_;
    std::string backend_;
    int in_flight_;
    std::vector<Verdict> verdicts_;
    size_t verified_ = 0;
};

RolloutOutcome outcome_of(const Verdict& v);
// The same from a verdict's JSON (a rollout record's "verdict"); null or malformed reads as incorrect.
RolloutOutcome outcome_of_json(const nlohmann::json& verdict);

}  // namespace kz
