// Stage checkpoint, and the restore a resumed run starts with: both policies, optimizer states, the
// rewards' and frontier's state and the iteration's metrics, in one directory renamed into place
// (train/run_dir.h). Every rank restores from the leader's checkpoint (the run directory is shared).
#include "train/trainer_impl.h"

#include <cstdio>

#include "common/files.h"

namespace kz {

using json = nlohmann::json;

void Trainer::checkpoint(int64_t it, json& m) {
    m["frontier_size"] = frontier_.stats().size();
    m["stage_s"] = timer_.to_json();
    run_->commit_checkpoint(it, [&](const std::string& dir) {
        coder_->save(dir + "/coder");
        if (proposer_) proposer_->save(dir + "/proposer");
        json state = {{"iteration", it}, {"frontier", frontier_.to_json()}, {"metrics", m}};
        if (rewards_.batch_correct_ema()) state["batch_correct_ema"] = *rewards_.batch_correct_ema();
        write_file_atomic(dir + "/state.json", state.dump(2) + "\n");
    });
    run_->prune_checkpoints(cfg_.keep_checkpoints);
}

// Every rank restores from the leader's checkpoint (the run directory is shared).
void Trainer::restore(int64_t it) {
    const std::string dir = RunDir::checkpoint_path(run_path_, it);
    json state = json::parse(read_file(dir + "/state.json"));
    coder_->restore(dir + "/coder");
    if (proposer_) proposer_->restore(dir + "/proposer");
    frontier_.from_json(state.at("frontier"));
    if (state.contains("batch_correct_ema")) rewards_.set_batch_correct_ema(state["batch_correct_ema"].get<double>());
    // A no-op unless the crash came between checkpoint and metrics.
    if (ranks_.leader()) run_->record_metrics(it, state.at("metrics"));
    std::fprintf(stderr, "[train] resumed after iteration %lld\n", static_cast<long long>(it));
}

}  // namespace kz
