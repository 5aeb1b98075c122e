// The trainer's subcommands: train (design 6.5), sft (6.6), report (a run directory as HTML).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "train/launcher.h"
#include "train/report.h"
#include "train/sft.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace kz::cli {

Runner add_train(CLI::App& app) {
    struct Args {
        std::string config, preset, out, verifier;
        bool resume = false, print_config = false;
        std::optional<int> iterations;
        std::optional<double> deadline;
        int nproc = 1;
    };
    auto a = std::make_shared<Args>();
    std::string presets;
    for (const auto& n : train_preset_names()) presets += (presets.empty() ? "" : ", ") + n;
    auto* cmd = app.add_subcommand("train", "Co-evolution training: Proposer and Coder, CA-GRPO (design 6.5)");
    auto* cfg = cmd->add_option("--config", a->config, "The run's TOML configuration (docs/TRAIN.md)");
    cmd->add_option("--preset", a->preset, "An embedded configuration: " + presets)->excludes(cfg);
    cmd->add_option("--out", a->out, "Run directory (default runs/<name>)");
    cmd->add_flag("--resume", a->resume, "Continue the run in --out from its last checkpoint");
    cmd->add_option("--iterations", a->iterations, "Run until this iteration (overrides the configuration)")
        ->check(CLI::Range(0, 1000000));
    cmd->add_option("--deadline", a->deadline,
                    "Unix time (seconds) by which the run should have stopped: an iteration that would end later, "
                    "by the recorded ones, is not started, and the run exits 130 as an interrupted one does")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--verifier", a->verifier,
                    "Where verdicts come from: local (the in-process pool) or redis://host:port/db (a farm of "
                    "verifier daemons); overrides verifier.url");
    cmd->add_option("--nproc-per-node", a->nproc,
                    "Data-parallel ranks on this machine, one per GPU (or CPU process); torchrun-style "
                    "variables (RANK, WORLD_SIZE, ...) launch ranks from elsewhere")
        ->check(CLI::Range(1, 64));
    cmd->add_flag("--print-config", a->print_config,
                  "Print the preset's TOML (or the resolved configuration) and exit");
    return [a, cmd]() -> int {
        if (!cmd->parsed()) return -1;
        if (a->config.empty() == a->preset.empty())
            return usage_error("train", "give one of --config FILE or --preset NAME");
        try {
            if (a->print_config && !a->preset.empty()) {
                std::cout << train_preset_toml(a->preset);
                return 0;
            }
            TrainConfig c = a->preset.empty() ? load_train_config(a->config) : train_preset(a->preset);
            if (!a->verifier.empty()) c.verifier.url = a->verifier;
            if (a->print_config) {
                std::cout << c.to_json().dump(2) << "\n";
                return 0;
            }
            TrainOptions o;
            o.out_dir = a->out.empty() ? "runs/" + c.name : a->out;
            o.resume = a->resume;
            o.iterations = a->iterations;
            o.deadline = a->deadline;
            catch_stop_signals();
            if (a->nproc > 1) {
                if (std::getenv("WORLD_SIZE"))
                    return usage_error("train",
                                       "--nproc-per-node with WORLD_SIZE already set: this process is a launched rank");
                std::vector<std::string> argv = {std::filesystem::read_symlink("/proc/self/exe").string(), "train"};
                if (!a->config.empty())
                    argv.insert(argv.end(), {"--config", a->config});
                else
                    argv.insert(argv.end(), {"--preset", a->preset});
                argv.insert(argv.end(), {"--out", o.out_dir});
                if (a->resume) argv.push_back("--resume");
                if (a->iterations) argv.insert(argv.end(), {"--iterations", std::to_string(*a->iterations)});
                if (a->deadline) argv.insert(argv.end(), {"--deadline", std::to_string(*a->deadline)});
                if (!a->verifier.empty()) argv.insert(argv.end(), {"--verifier", a->verifier});
                return launch_local_ranks(a->nproc, argv, g_stop);
            }
            const TrainOutcome run = run_training(c, o, g_stop);
            const int64_t done = run.last_iteration;
            if (g_stop || run.stopped_by_deadline) {
                std::fprintf(stderr, "kernelzero train: %s after iteration %lld; --resume continues\n",
                             g_stop ? "interrupted" : "stopped for --deadline", static_cast<long long>(done));
                return 130;
            }
            const char* rank = std::getenv("RANK");  // a data-parallel rank: rank 0 speaks for the run
            if (!rank || std::string(rank) == "0")
                std::printf("finished iteration %lld; report: kernelzero report %s\n", static_cast<long long>(done),
                            o.out_dir.c_str());
            return 0;
        } catch (const std::exception& e) {
            if (g_stop) {
                std::fprintf(stderr, "kernelzero train: interrupted (%s); --resume continues\n", e.what());
                return 130;
            }
            return usage_error("train", e.what());
        }
    };
}

Runner add_sft(CLI::App& app) {
    struct Args {
        std::string config, data, eval_data, out, device;
        std::optional<int> epochs;
        bool resume = false;
    };
    auto a = std::make_shared<Args>();
    auto* cmd =
        app.add_subcommand("sft", "Supervised fine-tuning of the Coder on (prompt, completion) JSONL (design 6.6)");
    cmd->add_option("--config", a->config, "TOML configuration: [coder], device, seed and [sft]")->required();
    cmd->add_option("--data", a->data, "Overrides sft.data");
    cmd->add_option("--eval-data", a->eval_data, "Overrides sft.eval_data (pairs whose loss each epoch measures)");
    cmd->add_option("--out", a->out, "Overrides sft.out");
    cmd->add_option("--epochs", a->epochs, "Overrides sft.epochs")->check(CLI::Range(1, 100000));
    cmd->add_option("--device", a->device, "Overrides device (cpu, cuda, cuda:N)");
    cmd->add_flag("--resume", a->resume, "Continue the interrupted run in --out from its last checkpoint");
    return [a, cmd]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            TrainConfig c = load_train_config(a->config);
            if (!a->data.empty()) c.sft.data = a->data;
            if (!a->eval_data.empty()) c.sft.eval_data = a->eval_data;
            if (!a->out.empty()) c.sft.out = a->out;
            if (a->epochs) c.sft.epochs = *a->epochs;
            if (!a->device.empty()) c.device = a->device;
            catch_stop_signals();
            SftResult r = run_sft(c, g_stop, a->resume);
            std::cout << r.to_json().dump() << std::endl;
            if (r.stopped)
                std::fprintf(stderr, "kernelzero sft: interrupted at step %lld of %lld; --resume continues\n",
                             static_cast<long long>(r.steps), static_cast<long long>(r.total_steps));
            return r.stopped ? 130 : 0;
        } catch (const std::exception& e) {
            return usage_error("sft", e.what());
        }
    };
}

Runner add_report(CLI::App& app) {
    auto dir = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("report", "Render a training run directory as a self-contained HTML report");
    cmd->add_option("run_dir", *dir, "RUN_DIR")->required();
    return [dir, cmd]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            std::string path = write_train_report(*dir);
            std::cout << path << "\n";
            return 0;
        } catch (const std::exception& e) {
            return usage_error("report", e.what());
        }
    };
}

}  // namespace kz::cli
