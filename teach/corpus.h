// The SFT corpus from a teacher run (`kernelzero teach --out DIR`, verified): (prompt, completion)
// pairs in the trainer's format (train/sft.h: the Coder prompt of prompts/, the candidate as the
// answer), and a held-out evaluation set that shares no API set with them. Writes, under out_dir:
//   train.jsonl     {"prompt": [messages], "completion", "task", "quality", "apis"} per pair
//   heldout.jsonl   the same for the held-out tasks, never trained on: the SFT's held-out loss
//                   (sft.eval_data)
//   proposer.jsonl  the Proposer's pairs over the same training tasks: its prompt for the task's API
//                   set (tasks/proposer.h) and the task file as the answer, {"prompt", "completion",
//                   "task", "apis"}: SFT of a Proposer that writes valid modules
//   train_tasks/    the training tasks themselves (KernelBench format: a Coder pool to import)
//   heldout/        the held-out tasks (KernelBench format: `eval.tasks` or `bench --tasks`)
//                   Both with a manifest.jsonl: {"file", "apis", "level"} per task file; heldout/
//                   also with api_sets.txt, its API sets (train's propose.exclude_sets)
//   catalog.json    the API catalog's operators the teacher writes (train's `catalog` for a run on
//                   this corpus)
//   corpus.json     what was kept and dropped, and why, with the options; the operators of held-out
//                   tasks that no training pair has (unseen_operators: operator -> held-out tasks)
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/api_catalog.h"

namespace kz {

struct CorpusOptions {
    std::string teach_dir;  // a teach run's output: draws.jsonl, verdicts.jsonl, tasks/, naive/, fused/
    std::string out_dir;
    // API sets (the sorted set of a task's APIs) held out for evaluation, chosen by a hash of the
    // set and the seed: every task of a held-out set is held out, none is trained on.
    double heldout_fraction = 0.2;
    // Levels whose API sets may be held out; the other levels' tasks are all trained on. {2}: every
    // operator is taught alone (level 1) and the evaluation asks for new compositions of them.
    std::set<int> heldout_levels = {1, 2};
    // At most this many distinct operators in a held-out API set (0: any): short compositions are
    // what a small Coder can be asked for first; the longer ones all train.
    int heldout_max_apis = 0;
    // Training pairs that take the fused candidate (when it is correct); the rest take the naive one,
    // so that there is room to learn fusion.
    double fused_fraction = 0.25;
    // Operators whose tasks are only ever taught naive.
    std::set<std::string> naive_only;
    // A training task whose token-3-gram Jaccard similarity to a kept task (trained or held out)
    // reaches this is a near duplicate and dropped (the task pipeline's novelty rule).
    double near_duplicate = 0.9;
    uint64_t seed = 0;
    std::string catalog;  // the API catalog of the Proposer's prompt ("": the repository's)
};

// One line of proposer.jsonl: the Proposer's prompt for the API set (in forward order) and the module
// as its answer.
std::string proposer_pair(const ApiCatalog& catalog, const std::vector<std::string>& apis, const std::string& source,
                          const std::string& task);

// Builds the corpus; returns corpus.json's object. Throws std::runtime_error naming a missing or
// unreadable input of the teach run.
nlohmann::json build_corpus(const CorpusOptions& opts);

}  // namespace kz
