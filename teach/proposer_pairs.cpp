#include "teach/proposer_pairs.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/files.h"
#include "tasks/api_catalog.h"
#include "tasks/symbolic.h"
#include "teach/corpus.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

json write_proposer_pairs(const ProposerPairsOptions& o) {
    if (o.n < 1) throw std::runtime_error("the number of pairs must be at least 1");
    if (o.level < 0 || o.level > 2) throw std::runtime_error("the level is 1, 2, or 0 for both in turn");
    const std::string catalog_path = o.corpus_dir + "/catalog.json";
    const std::string heldout_path = o.corpus_dir + "/heldout/api_sets.txt";
    for (const std::string& p : {catalog_path, heldout_path})
        if (!fs::is_regular_file(p))
            throw std::runtime_error(o.corpus_dir + " has no " + p.substr(o.corpus_dir.size() + 1) +
                                     ": not the output of kernelzero corpus");
    const ApiCatalog catalog = ApiCatalog::load(catalog_path);
    const std::set<std::string> heldout = read_api_sets(heldout_path);
    const SizeProfile sizes = o.small_sizes ? SizeProfile::small : SizeProfile::typical;

    std::mt19937_64 rng(o.seed);
    std::string out;
    std::set<std::string> written;  // the modules' sources: a repeat is drawn again
    std::map<std::string, int> redrawn = {{"held_out", 0}, {"too_many_apis", 0}, {"repeat", 0}};
    std::map<int, int> by_apis;
    // A draw lands on an excluded set now and then; only options that exclude (nearly) every set keep
    // it there, and those get an error rather than a loop without end.
    const int max_tries = 100 * o.n + 1000;
    int tries = 0;
    for (int i = 0; i < o.n; ++tries) {
        if (tries >= max_tries)
            throw std::runtime_error("after " + std::to_string(tries) + " draws only " + std::to_string(i) + " of " +
                                     std::to_string(o.n) + " pairs: the options exclude nearly every API set");
        const int level = o.level ? o.level : 1 + i % 2;
        const ApiSet set = sample_api_set(catalog, level, rng);
        GeneratedTask task = generate_task(catalog, set, sizes, rng);
        const std::set<std::string> distinct(task.apis.begin(), task.apis.end());
        if (heldout.count(api_set_key(task.apis))) {
            ++redrawn["held_out"];
            continue;
        }
        if (o.max_apis > 0 && static_cast<int>(distinct.size()) > o.max_apis) {
            ++redrawn["too_many_apis"];
            continue;
        }
        if (!written.insert(task.source).second) {
            ++redrawn["repeat"];
            continue;
        }
        char name[32];
        std::snprintf(name, sizeof name, "drawn_%05d", i);
        out += proposer_pair(catalog, task.apis, task.source, name);
        ++by_apis[static_cast<int>(distinct.size())];
        ++i;
    }
    write_file_atomic(o.out, out);
    json counts = json::object();
    for (const auto& [k, v] : by_apis) counts[std::to_string(k)] = v;
    return {{"pairs", o.n},       {"out", o.out},      {"corpus", o.corpus_dir},
            {"seed", o.seed},     {"level", o.level},  {"max_apis", o.max_apis},
            {"redrawn", redrawn}, {"by_apis", counts}, {"sizes", o.small_sizes ? "small" : "typical"}};
}

}  // namespace kz
