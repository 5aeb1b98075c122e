#include "train/verifier_judge.h"

#include <atomic>
#include <stdexcept>
#include <thread>

#include "prompts/coder_prompt.h"

namespace kz {

RolloutOutcome outcome_of(const Verdict& v) {
    RolloutOutcome o;
    o.correct = v.correct();
    o.infra_error = v.status == Status::infra_error;
    if (o.correct) o.speedup_eager = v.speedup_eager;
    return o;
}

RolloutOutcome outcome_of_json(const nlohmann::json& v) {
    RolloutOutcome o;
    if (!v.is_object()) return o;
    o.correct = v.value("correct", false) && v.value("status", std::string()) == "correct";
    o.infra_error = v.value("status", std::string()) == "infra_error";
    if (o.correct && v.contains("speedup_eager") && v["speedup_eager"].is_number())
        o.speedup_eager = v["speedup_eager"].get<double>();
    return o;
}

VerifierJudge::VerifierJudge(VerifyService& verifier, std::vector<std::string> task_sources, std::string backend,
                             int in_flight)
    : verifier_(verifier),
      tasks_(std::move(task_sources)),
      backend_(std::move(backend)),
      in_flight_(std::max(1, in_flight)) {}

std::vector<RolloutOutcome> VerifierJudge::operator()(const std::vector<std::pair<size_t, std::string>>& items) {
    verdicts_.assign(items.size(), Verdict{});
    std::vector<size_t> to_verify;
    std::vector<Job> jobs(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
        const auto& [task, text] = items[i];
        if (task >= tasks_.size())
            throw std::out_of_range("judge: task index " + std::to_string(task) + " out of range");
        Extraction ex = extract_candidate(text);
        if (!ex.ok()) {
            verdicts_[i] = early_verdict(Status::format_error, ex.reason, verifier_.options().device, backend_);
            continue;
        }
        jobs[i] = {"rollout-" + std::to_string(i), tasks_[task], ex.source, backend_};
        to_verify.push_back(i);
    }
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t k; (k = next++) < to_verify.size();) verdicts_[to_verify[k]] = verifier_.verify(jobs[to_verify[k]]);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::min<int>(in_flight_, static_cast<int>(to_verify.size())); ++t)
        threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    verified_ = to_verify.size();
    std::vector<RolloutOutcome> out;
    for (const auto& v : verdicts_) out.push_back(outcome_of(v));
    return out;
}

}  // namespace kz
