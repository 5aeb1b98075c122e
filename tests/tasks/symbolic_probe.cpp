// Writes N symbolic tasks (half level 1, half level 2) for tests/tasks/test_symbolic.py:
//   symbolic_probe N SEED OUT_DIR    -> OUT_DIR/task_NNNN.py and OUT_DIR/manifest.json
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tasks/symbolic.h"

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: symbolic_probe N SEED OUT_DIR\n";
        return 2;
    }
    try {
        const int n = std::stoi(argv[1]);
        std::mt19937_64 rng(std::stoull(argv[2]));
        const std::string out = argv[3];
        std::filesystem::create_directories(out);
        auto catalog = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
        nlohmann::json manifest = nlohmann::json::array();
        for (int i = 0; i < n; ++i) {
            kz::ApiSet set = kz::sample_api_set(catalog, i % 2 ? 2 : 1, rng);
            kz::GeneratedTask t = kz::generate_task(catalog, set, kz::SizeProfile::small, rng);
            char name[32];
            std::snprintf(name, sizeof name, "task_%04d.py", i);
            kz::write_file_atomic(out + "/" + name, t.source);
            manifest.push_back(
                {{"file", name}, {"level", set.level}, {"apis", t.apis}, {"output_shape", t.output_shape}});
        }
        kz::write_file_atomic(out + "/manifest.json", manifest.dump(1));
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "symbolic_probe: " << e.what() << "\n";
        return 2;
    }
}
