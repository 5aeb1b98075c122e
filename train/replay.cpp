#include "train/replay.h"

#include <cstdio>

#include "train/verifier_judge.h"

namespace kz {

using json = nlohmann::json;

RecordIndex::RecordIndex(const std::string& path) {
    int skipped = 0;
    for (auto& r : read_rollouts(path, &skipped)) by_key_.emplace(r.key(), std::move(r));
    if (skipped) std::fprintf(stderr, "[train] %d unreadable rollout record line(s) skipped\n", skipped);
}

std::vector<const RolloutRecord*> RecordIndex::complete(int64_t it, const std::string& role,
                                                        const std::vector<std::string>& hashes, int first_sample,
                                                        int G) const {
    std::vector<const RolloutRecord*> out;
    for (const auto& h : hashes)
        for (int j = 0; j < G; ++j) {
            auto f = by_key_.find({it, role, h, first_sample + j});
            if (f == by_key_.end()) return {};
            out.push_back(&f->second);
        }
    return out;
}

std::vector<Rollout> rollouts_from(const std::vector<const RolloutRecord*>& recs, int G) {
    std::vector<Rollout> out(recs.size());
    for (size_t i = 0; i < recs.size(); ++i) {
        Rollout& r = out[i];
        r.task = i / static_cast<size_t>(G);
        r.sample = static_cast<int>(i % static_cast<size_t>(G));
        r.completion_ids = recs[i]->completion_tokens;
        r.sampler_logprobs = recs[i]->logprobs;
        r.text = recs[i]->completion;
        r.stopped = recs[i]->verdict.is_object() ? recs[i]->verdict.value("stopped", true) : true;
        r.outcome = outcome_of_json(recs[i]->verdict);
    }
    return out;
}

std::vector<Rollout> rows_of(const std::vector<Rollout>& all, size_t begin, size_t end) {
    std::vector<Rollout> out;
    for (const auto& r : all)
        if (r.task >= begin && r.task < end) out.push_back(r);
    return out;
}

json serialise_step(const JudgedStep& j, bool judged) {
    json a = json::array();
    for (size_t i = 0; i < j.rollouts.size(); ++i) {
        const Rollout& r = j.rollouts[i];
        a.push_back({{"task", r.task},
                     {"sample", r.sample},
                     {"ids", r.completion_ids},
                     {"logprobs", r.sampler_logprobs},
                     {"stopped", r.stopped},
                     {"text", r.text},
                     {"verdict", judged ? j.verdicts[i] : json(nullptr)}});
    }
    return a;
}

void deserialise_step(const json& a, bool judged, JudgedStep& out) {
    for (const auto& e : a) {
        Rollout r;
        r.task = e.at("task").get<size_t>();
        r.sample = e.at("sample").get<int>();
        r.completion_ids = e.at("ids").get<std::vector<int64_t>>();
        r.sampler_logprobs = e.at("logprobs").get<std::vector<float>>();
        r.stopped = e.at("stopped").get<bool>();
        r.text = e.at("text").get<std::string>();
        if (judged) {
            r.outcome = outcome_of_json(e.at("verdict"));
            out.verdicts.push_back(e.at("verdict"));
        }
        out.rollouts.push_back(std::move(r));
    }
}

}  // namespace kz
