// `kernelzero teach`: the teacher over a stream of the symbolic generator's draws, each candidate
// judged by the verifier. Writes, under the output directory:
//   tasks/NAME.py              every valid task the teacher writes (KernelBench format)
//   <quality>/NAME.py          its candidate of each quality (naive/, fused/), or of the one quality
//                              TeachOptions::fused_share chose for it
//   draws.jsonl                one line per draw: name, level, apis, unsupported operator or
//                              validity (and why not), kernels per quality
//   jobs.jsonl                 the verifier's jobs (verify --jobs format), id "<quality>/NAME"
//   verdicts.jsonl             their verdicts (a re-run skips the jobs judged as they are now: a task or
//                              candidate that changed, e.g. under other options, is judged again)
//   validation.jsonl           validity by (device, API set, source): a re-run does not validate again
//   summary.json               coverage and verdicts by level and quality
// Draws are a function of the seed alone: a re-run with the same options writes the same files.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/api_catalog.h"
#include "tasks/symbolic.h"
#include "tasks/validation.h"
#include "teach/teacher.h"

namespace kz {

struct TeachOptions {
    std::string out_dir;
    int count = 200;  // draws, levels taken in turn
    uint64_t seed = 0;
    std::vector<int> levels = {1, 2};
    SizeProfile sizes = SizeProfile::typical;
    std::vector<TeacherQuality> qualities = {TeacherQuality::naive, TeacherQuality::fused};
    // At or above 0: one candidate per task instead of one per quality, the fused one for this share
    // of the tasks (quality_by_share) and the naive one for the rest. A corpus trains on one candidate
    // per task, so verifying the other is work it never uses.
    double fused_share = -1;
    // Instead of sampled sets: one level-1 task per catalog API the teacher supports (count ignored),
    // so that every operator it writes is exercised.
    bool each_api = false;
    // Sample API sets from the operators the teacher writes only (a corpus run: every draw can become
    // a pair), instead of the whole catalog (a coverage run: how much of the generator it covers).
    bool supported_only = false;
};

struct TeachDraw {
    std::string name;  // file stem: task_NNNNN
    int level = 1;
    std::vector<std::string> apis;
    std::string unsupported;  // the operator the teacher cannot write; empty when it writes the task
    bool valid = false;       // the task passed validation (only tasks the teacher writes are validated)
    std::string invalid_reason;
    std::map<std::string, int> kernels;  // quality -> kernel launches per forward
    nlohmann::json to_json() const;
};

// Draws the tasks, writes the teacher's candidates for the valid ones and the jobs file. Tasks run
// through `validator` several at once (its workers). Stops early, with what it drew so far, when
// `stop` is set. Throws std::runtime_error when the output directory cannot be written.
std::vector<TeachDraw> write_teacher_candidates(const ApiCatalog& catalog, const TeachOptions& opts,
                                                TaskValidator& validator, const std::atomic<bool>& stop);

// Coverage and verdicts by level and quality from the draws and a verdicts file (verify --out;
// missing or partial: the jobs without a verdict count as unverified):
// {"levels": {"1": {"drawn", "teacher_families", "valid", "<quality>": {"written", "verified",
//   "correct", "fast_1", "geomean_speedup", "coverage"}}}, "unsupported": {api: draws}, "families"}
// coverage = correct / written: the share of the valid draws given a candidate of that quality that
// the teacher writes correctly (every valid draw, unless TeachOptions::fused_share chose one quality).
nlohmann::json teach_summary(const std::vector<TeachDraw>& draws, const std::vector<TeacherQuality>& qualities,
                             const std::string& verdicts_path);

}  // namespace kz
