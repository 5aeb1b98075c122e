#include "teach/corpus.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/files.h"
#include "common/hash.h"
#include "prompts/coder_prompt.h"
#include "tasks/api_catalog.h"
#include "tasks/proposer.h"
#include "tasks/symbolic.h"
#include "teach/teacher.h"
#include "tasks/similarity.h"

namespace kz {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A number in [0, 1) fixed by `key` alone: the split and the quality choice do not depend on the
// order of the draws or on the machine.
double unit_hash(const std::string& key) {
    return static_cast<double>(std::stoull(sha256_hex(key).substr(0, 13), nullptr, 16)) /
           static_cast<double>(1ULL << 52);
}

struct Task {
    std::string name, key, source;
    std::vector<std::string> apis;
    int level = 0;
    std::map<std::string, bool> correct;  // quality -> the verifier passed its candidate
    std::string hash;
    std::set<std::string> shingles;
};

std::vector<Task> verified_tasks(const std::string& dir) {
    if (!fs::is_regular_file(dir + "/draws.jsonl"))
        throw std::runtime_error(dir + " has no draws.jsonl: not the output of kernelzero teach");
    if (!fs::is_regular_file(dir + "/verdicts.jsonl"))
        throw std::runtime_error(dir + " has no verdicts.jsonl: run kernelzero teach without --no-verify");
    std::map<std::string, std::string> status;
    for (const json& v : read_json_lines(dir + "/verdicts.jsonl"))
        if (v.contains("id") && v["id"].is_string()) status[v["id"].get<std::string>()] = v.value("status", "");
    std::vector<Task> tasks;
    for (const json& d : read_json_lines(dir + "/draws.jsonl")) {
        if (!d.value("valid", false) || !d.contains("kernels")) continue;
        Task t;
        t.name = d.at("name").get<std::string>();
        t.apis = d.at("apis").get<std::vector<std::string>>();
        t.level = d.value("level", 0);
        for (const auto& [quality, kernels] : d["kernels"].items())
            t.correct[quality] = status[quality + "/" + t.name] == "correct";
        if (std::none_of(t.correct.begin(), t.correct.end(), [](const auto& q) { return q.second; })) continue;
        t.key = api_set_key(t.apis);
        t.source = read_file(dir + "/tasks/" + t.name + ".py");
        t.hash = normalised_hash(t.source);
        t.shingles = shingles(t.source);
        tasks.push_back(std::move(t));
    }
    return tasks;
}

}  // namespace

json build_corpus(const CorpusOptions& o) {
    std::vector<Task> tasks = verified_tasks(o.teach_dir);
    const std::string seed = std::to_string(o.seed);
    std::vector<const Task*> heldout, train;
    for (const Task& t : tasks)
        (unit_hash("heldout:" + seed + ":" + t.key) < o.heldout_fraction ? heldout : train).push_back(&t);

    // Near duplicates: held-out tasks are kept whole (minus exact repeats); a training task close to
    // any kept task, held out or trained, is dropped.
    std::vector<const Task*> kept;
    std::set<std::string> hashes;
    int repeats = 0, near = 0;
    std::vector<const Task*> heldout_kept;
    for (const Task* t : heldout) {
        if (!hashes.insert(t->hash).second) {
            ++repeats;
            continue;
        }
        kept.push_back(t);
        heldout_kept.push_back(t);
    }
    std::vector<const Task*> train_kept;
    for (const Task* t : train) {
        if (hashes.count(t->hash)) {
            ++repeats;
            continue;
        }
        if (std::any_of(kept.begin(), kept.end(),
                        [&](const Task* k) { return jaccard(k->shingles, t->shingles) >= o.near_duplicate; })) {
            ++near;
            continue;
        }
        hashes.insert(t->hash);
        kept.push_back(t);
        train_kept.push_back(t);
    }

    auto messages_json = [](const std::vector<ChatMessage>& messages) {
        json j = json::array();
        for (const ChatMessage& m : messages) j.push_back({{"role", m.role}, {"content", m.content}});
        return j;
    };
    CoderPrompt prompt = CoderPrompt::load(CoderFormat::triton);
    const ApiCatalog catalog =
        ApiCatalog::load(o.catalog.empty() ? ApiCatalog::default_path() : o.catalog);  // the Proposer's prompt
    std::string lines, proposer_lines;
    std::vector<const Task*> paired;
    std::map<std::string, int> by_quality;
    int naive_only_dropped = 0;
    for (const Task* t : train_kept) {
        const bool fused_allowed =
            std::none_of(t->apis.begin(), t->apis.end(), [&](const std::string& a) { return o.naive_only.count(a); });
        const bool fused_ok = fused_allowed && t->correct.count("fused") && t->correct.at("fused");
        const bool naive_ok = t->correct.count("naive") && t->correct.at("naive");
        std::string quality;
        if (fused_ok && (!naive_ok || unit_hash("quality:" + seed + ":" + t->name) < o.fused_fraction))
            quality = "fused";
        else if (naive_ok)
            quality = "naive";
        if (quality.empty()) {
            ++naive_only_dropped;
            continue;
        }
        const std::string candidate = read_file(o.teach_dir + "/" + quality + "/" + t->name + ".py");
        lines += json{{"prompt", messages_json(prompt.messages(t->source))},
                      {"completion", coder_answer(candidate)},
                      {"task", t->name},
                      {"quality", quality},
                      {"apis", t->apis}}
                     .dump() +
                 "\n";
        ++by_quality[quality];
        paired.push_back(t);
        proposer_lines += json{{"prompt", messages_json(proposer_prompt(catalog, t->apis))},
                               {"completion", coder_answer(t->source)},
                               {"task", t->name},
                               {"apis", t->apis}}
                              .dump() +
                          "\n";
    }

    fs::create_directories(o.out_dir);
    // Sets from other options must not linger beside these ones.
    const std::string heldout_dir = o.out_dir + "/heldout", train_dir = o.out_dir + "/train_tasks";
    for (const std::string& d : {heldout_dir, train_dir}) {
        fs::remove_all(d);
        fs::create_directories(d);
    }
    // Each directory's manifest.jsonl keeps the API sets and levels (`kernelzero tasks import` reads it).
    auto write_tasks = [](const std::string& d, const std::vector<const Task*>& ts) {
        std::string manifest;
        for (const Task* t : ts) {
            write_file_atomic(d + "/" + t->name + ".py", t->source);
            manifest += json{{"file", t->name + ".py"}, {"apis", t->apis}, {"level", t->level}}.dump() + "\n";
        }
        write_file_atomic(d + "/manifest.jsonl", manifest);
    };
    write_tasks(heldout_dir, heldout_kept);
    write_tasks(train_dir, paired);
    std::set<std::string> heldout_sets;
    for (const Task* t : heldout_kept) heldout_sets.insert(t->key);
    std::string set_lines;
    for (const auto& k : heldout_sets) set_lines += k + "\n";
    write_file_atomic(heldout_dir + "/api_sets.txt", set_lines);
    // The catalog's operators the teacher writes: a run over this corpus draws its API sets from them
    // (train's `catalog`), so that its tasks stay in the families the Coder was taught.
    const std::string catalog_path = o.catalog.empty() ? ApiCatalog::default_path() : o.catalog;
    json families = json::parse(read_file(catalog_path));
    json kept_apis = json::array();
    for (const json& a : families.at("apis"))
        if (teacher_supports(a.value("name", ""))) kept_apis.push_back(a);
    families["apis"] = kept_apis;
    write_file_atomic(o.out_dir + "/catalog.json", families.dump(1) + "\n");
    write_file_atomic(o.out_dir + "/train.jsonl", lines);
    write_file_atomic(o.out_dir + "/proposer.jsonl", proposer_lines);
    json summary = {
        {"teach_dir", o.teach_dir},
        {"options",
         {{"heldout_fraction", o.heldout_fraction},
          {"fused_fraction", o.fused_fraction},
          {"naive_only", o.naive_only},
          {"near_duplicate", o.near_duplicate},
          {"seed", o.seed},
          {"prompt", prompt.version()}}},
        {"verified_tasks", tasks.size()},
        {"heldout_tasks", heldout_kept.size()},
        {"heldout_api_sets", heldout_sets},
        {"train_pairs", by_quality["naive"] + by_quality["fused"]},
        {"proposer_pairs", by_quality["naive"] + by_quality["fused"]},
        {"train_by_quality", by_quality},
        {"dropped",
         {{"repeats", repeats}, {"near_duplicates", near}, {"naive_only_without_naive", naive_only_dropped}}}};
    write_file_atomic(o.out_dir + "/corpus.json", summary.dump(1) + "\n");
    return summary;
}

}  // namespace kz
