// `kernelzero report RUN_DIR`: a training run as one self-contained HTML page (no scripts, no external
// files): the stage timing table, training curves over iterations (Coder pass rate and reward,
// Proposer validity and reward, gate open-rate, frontier size, band occupancy, evaluation pass@1),
// and the capability map: the frontier's estimated pass rate per API at every checkpointed iteration.
// No torch here.
#pragma once

#include <string>

namespace kz {

// Reads RUN_DIR/metrics.jsonl and the checkpoints' state.json files; writes RUN_DIR/report.html
// atomically and returns its path. Throws std::runtime_error naming a missing run.
std::string write_train_report(const std::string& run_dir);

}  // namespace kz
