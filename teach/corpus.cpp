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

// The held-out and training tasks: a share of the API sets held out whole (minus exact repeats); a
// training task that repeats or nearly repeats a kept task, held out or trained, is dropped.
struct Split {
    std::vector<const Task*> heldout, train;
    int repeats = 0, near_duplicates = 0;
};

Split split_tasks(const std::vector<Task>& tasks, const CorpusOptions& o) {
    const std::string seed = std::to_string(o.seed);
    std::vector<const Task*> heldout, train;
    for (const Task& t : tasks) {
        const bool short_enough =
            o.heldout_max_apis <= 0 ||
            std::set<std::string>(t.apis.begin(), t.apis.end()).size() <= static_cast<size_t>(o.heldout_max_apis);
        const bool held = o.heldout_levels.count(t.level) && short_enough &&
                          unit_hash("heldout:" + seed + ":" + t.key) < o.heldout_fraction;
        (held ? heldout : train).push_back(&t);
    }
    Split s;
    std::vector<const Task*> kept;
    std::set<std::string> hashes;
    for (const Task* t : heldout) {
        if (!hashes.insert(t->hash).second) {
            ++s.repeats;
            continue;
        }
        kept.push_back(t);
        s.heldout.push_back(t);
    }
    for (const Task* t : train) {
        if (hashes.count(t->hash)) {
            ++s.repeats;
            continue;
        }
        if (std::any_of(kept.begin(), kept.end(),
                        [&](const Task* k) { return jaccard(k->shingles, t->shingles) >= o.near_duplicate; })) {
            ++s.near_duplicates;
            continue;
        }
        hashes.insert(t->hash);
        kept.push_back(t);
        s.train.push_back(t);
    }
    return s;
}

json messages_json(const std::vector<ChatMessage>& messages) {
    json j = json::array();
    for (const ChatMessage& m : messages) j.push_back({{"role", m.role}, {"content", m.content}});
    return j;
}

// The Coder's and the Proposer's pairs (JSONL) over the training tasks that have a candidate to teach.
struct Pairs {
    std::string coder, proposer;
    std::vector<const Task*> tasks;
    std::map<std::string, int> by_quality;
    int naive_only_dropped = 0;
};

Pairs make_pairs(const std::vector<const Task*>& train, const CorpusOptions& o, const CoderPrompt& prompt,
                 const ApiCatalog& catalog) {
    Pairs p;
    for (const Task* t : train) {
        const bool fused_allowed =
            std::none_of(t->apis.begin(), t->apis.end(), [&](const std::string& a) { return o.naive_only.count(a); });
        const bool fused_ok = fused_allowed && t->correct.count("fused") && t->correct.at("fused");
        const bool naive_ok = t->correct.count("naive") && t->correct.at("naive");
        std::string quality;
        if (fused_ok && (!naive_ok || quality_by_share(o.seed, t->name, o.fused_fraction) == TeacherQuality::fused))
            quality = "fused";
        else if (naive_ok)
            quality = "naive";
        if (quality.empty()) {
            ++p.naive_only_dropped;
            continue;
        }
        const std::string candidate = read_file(o.teach_dir + "/" + quality + "/" + t->name + ".py");
        p.coder += json{{"prompt", messages_json(prompt.messages(t->source))},
                        {"completion", coder_answer(candidate)},
                        {"task", t->name},
                        {"quality", quality},
                        {"apis", t->apis}}
                       .dump() +
                   "\n";
        p.proposer += proposer_pair(catalog, t->apis, t->source, t->name);
        ++p.by_quality[quality];
        p.tasks.push_back(t);
    }
    return p;
}

// A task directory made afresh (a set from other options must not linger beside this one), with a
// manifest.jsonl of the API sets and levels (`kernelzero tasks import` reads it).
void write_task_dir(const std::string& dir, const std::vector<const Task*>& tasks) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string manifest;
    for (const Task* t : tasks) {
        write_file_atomic(dir + "/" + t->name + ".py", t->source);
        manifest += json{{"file", t->name + ".py"}, {"apis", t->apis}, {"level", t->level}}.dump() + "\n";
    }
    write_file_atomic(dir + "/manifest.jsonl", manifest);
}

// The catalog's operators the teacher writes: a run over this corpus draws its API sets from them
// (train's `catalog`), so that its tasks stay in the families the Coder was taught.
void write_families_catalog(const std::string& catalog_path, const std::string& out) {
    json families = json::parse(read_file(catalog_path));
    json kept = json::array();
    for (const json& a : families.at("apis"))
        if (teacher_supports(a.value("name", ""))) kept.push_back(a);
    families["apis"] = kept;
    write_file_atomic(out, families.dump(1) + "\n");
}

}  // namespace

std::string proposer_pair(const ApiCatalog& catalog, const std::vector<std::string>& apis, const std::string& source,
                          const std::string& task) {
    return json{{"prompt", messages_json(proposer_prompt(catalog, apis))},
                {"completion", coder_answer(source)},
                {"task", task},
                {"apis", apis}}
               .dump() +
           "\n";
}

json build_corpus(const CorpusOptions& o) {
    const std::vector<Task> tasks = verified_tasks(o.teach_dir);
    const Split split = split_tasks(tasks, o);
    const CoderPrompt prompt = CoderPrompt::load(CoderFormat::triton);
    const std::string catalog_path = ApiCatalog::path_or_default(o.catalog);
    const ApiCatalog catalog = ApiCatalog::load(catalog_path);
    const Pairs pairs = make_pairs(split.train, o, prompt, catalog);
    const Pairs heldout_pairs = make_pairs(split.heldout, o, prompt, catalog);

    fs::create_directories(o.out_dir);
    write_task_dir(o.out_dir + "/heldout", split.heldout);
    write_task_dir(o.out_dir + "/train_tasks", pairs.tasks);
    std::set<std::string> heldout_sets;
    for (const Task* t : split.heldout) heldout_sets.insert(t->key);
    std::string set_lines;
    for (const auto& k : heldout_sets) set_lines += k + "\n";
    write_file_atomic(o.out_dir + "/heldout/api_sets.txt", set_lines);
    write_families_catalog(catalog_path, o.out_dir + "/catalog.json");
    write_file_atomic(o.out_dir + "/train.jsonl", pairs.coder);
    write_file_atomic(o.out_dir + "/heldout.jsonl", heldout_pairs.coder);
    write_file_atomic(o.out_dir + "/proposer.jsonl", pairs.proposer);
    const int n_pairs = static_cast<int>(pairs.tasks.size());
    // Operators the evaluation asks for that no training pair shows: a held-out task with one of them
    // asks the Coder for what it was never taught.
    std::set<std::string> taught;
    for (const Task* t : pairs.tasks) taught.insert(t->apis.begin(), t->apis.end());
    std::map<std::string, int> unseen;
    int with_unseen = 0;
    for (const Task* t : split.heldout) {
        bool any = false;
        for (const std::string& a : std::set<std::string>(t->apis.begin(), t->apis.end()))
            if (!taught.count(a)) ++unseen[a], any = true;
        with_unseen += any;
    }
    json summary = {{"teach_dir", o.teach_dir},
                    {"options",
                     {{"heldout_fraction", o.heldout_fraction},
                      {"heldout_levels", o.heldout_levels},
                      {"heldout_max_apis", o.heldout_max_apis},
                      {"fused_fraction", o.fused_fraction},
                      {"naive_only", o.naive_only},
                      {"near_duplicate", o.near_duplicate},
                      {"seed", o.seed},
                      {"prompt", prompt.version()}}},
                    {"verified_tasks", tasks.size()},
                    {"heldout_tasks", split.heldout.size()},
                    {"heldout_api_sets", heldout_sets},
                    {"unseen_operators", unseen},
                    {"heldout_with_unseen_operators", with_unseen},
                    {"train_pairs", n_pairs},
                    {"proposer_pairs", n_pairs},
                    {"heldout_pairs", heldout_pairs.tasks.size()},
                    {"train_by_quality", pairs.by_quality},
                    {"dropped",
                     {{"repeats", split.repeats},
                      {"near_duplicates", split.near_duplicates},
                      {"naive_only_without_naive", pairs.naive_only_dropped}}}};
    write_file_atomic(o.out_dir + "/corpus.json", summary.dump(1) + "\n");
    return summary;
}

}  // namespace kz
