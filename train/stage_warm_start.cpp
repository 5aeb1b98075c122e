// Stage warm_start (iteration 1, with warm_start = true): SFT of the Coder on [sft] (design 6.6), RL
// from there. Reads the configuration's [sft] pairs (and sft.eval_data's, whose loss each epoch
// measures); changes the Coder's weights (the leader trains, the other ranks take its weights); adds
// "warm_start" to the metrics.
#include "train/trainer_impl.h"

#include "train/sft.h"

namespace kz {

using json = nlohmann::json;

void Trainer::warm_start(json& m) {
    if (ranks_.leader()) {
        int64_t skipped = 0;
        auto pairs = load_sft_pairs(cfg_, *coder_, &skipped);
        if (pairs.empty()) throw std::runtime_error("warm_start: [sft] gives no usable pair");
        SftRunOptions run;
        run.held_out = load_sft_eval_pairs(cfg_, *coder_, nullptr);
        SftResult r = sft_train(*coder_, pairs, cfg_, stop_, run);
        coder_->reset_optimizer();
        r.skipped = skipped;
        m["warm_start"] = r.to_json();
    }
    ranks_.barrier("warm-start", kEvalTimeout);
    ranks_.share_weights(*coder_);
}

}  // namespace kz
