// Task-generation subcommands: tasks validate (the store's list/show/stats/export/import follow).
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/files.h"
#include "tasks/api_catalog.h"
#include "tasks/validation.h"

namespace kz::cli {

Runner add_tasks(CLI::App& app) {
    struct Args {
        std::string file, apis, device = "cpu", catalog;
        double max_runtime_ms = 1000, min_runtime_ms = 0, max_memory_mb = 4096;
        bool compile = false, as_json = false;
    };
    auto a = std::make_shared<Args>();
    auto* tasks = app.add_subcommand("tasks", "Task modules: validation (and, with a store, listing and export)");
    tasks->require_subcommand(1);
    auto* val = tasks->add_subcommand("validate", "Validate a task module, every check by name");
    val->add_option("file", a->file, "Task file (KernelBench format)")->required();
    val->add_option("--apis", a->apis, "Comma-separated catalog APIs the module must use");
    val->add_option("--device", a->device, "cpu, cuda or cuda:N");
    val->add_option("--max-runtime-ms", a->max_runtime_ms, "Upper end of the runtime band")->check(CLI::PositiveNumber);
    val->add_option("--min-runtime-ms", a->min_runtime_ms, "Lower end of the runtime band")->check(CLI::NonNegativeNumber);
    val->add_option("--max-memory-mb", a->max_memory_mb, "Upper end of the memory band")->check(CLI::PositiveNumber);
    val->add_flag("--compile", a->compile, "Also run torch.compile (check \"compile\")");
    val->add_option("--catalog", a->catalog, "API catalog (default: the repository's tasks/api_catalog.json)");
    val->add_flag("--json", a->as_json, "Last line: {\"valid\", \"checks\", \"reason\", ...}");
    return [=]() -> int {
        if (!tasks->parsed()) return -1;
        auto usage = [](const std::string& why) {
            std::fprintf(stderr, "kernelzero tasks validate: %s\n", why.c_str());
            return 2;
        };
        std::string source;
        try {
            source = read_file(a->file);
        } catch (const std::exception& e) {
            return usage(e.what());
        }
        try {
            ApiCatalog catalog = ApiCatalog::load(a->catalog.empty() ? ApiCatalog::default_path() : a->catalog);
            std::vector<std::string> apis;
            for (size_t i = 0; i < a->apis.size();) {
                size_t j = a->apis.find(',', i);
                std::string n = a->apis.substr(i, j == std::string::npos ? std::string::npos : j - i);
                if (!n.empty()) {
                    if (!catalog.find(n)) return usage("API \"" + n + "\" is not in the catalog");
                    apis.push_back(n);
                }
                if (j == std::string::npos) break;
                i = j + 1;
            }
            ValidationOptions o;
            o.device = a->device;
            o.max_runtime_ms = a->max_runtime_ms, o.min_runtime_ms = a->min_runtime_ms, o.max_memory_mb = a->max_memory_mb;
            o.compile = a->compile;
            TaskValidator validator(catalog, o);
            TaskValidation v = validator.validate(source, apis);
            if (a->as_json) {
                std::cout << v.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
            } else {
                std::cout << (v.valid ? "valid" : "invalid") << "\n";
                for (const auto& name : validation_checks()) {
                    std::cout << "  " << name << ": " << v.checks[name];
                    if (v.reasons.count(name)) std::cout << " (" << v.reasons[name] << ")";
                    std::cout << "\n";
                }
            }
            return 0;
        } catch (const std::exception& e) {
            return usage(e.what());
        }
    };
}

}  // namespace kz::cli
