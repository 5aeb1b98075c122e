// kernelzero serve: the policy engine behind an OpenAI-compatible HTTP API (serve/server.h).
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/chat.h"
#include "serve/server.h"

namespace kz::cli {

Runner add_serve(CLI::App& app) {
    struct Args : ModelArgs {
        ServeOptions serve;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "serve", "Serve a model on an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions)");
    add_model_options(cmd, *a);
    cmd->add_option("--served-model-name", a->serve.model_name,
                    "The name clients pass as \"model\" (default: the directory's name)");
    cmd->add_option("--host", a->serve.host, "Address to listen on");
    cmd->add_option("--port", a->serve.port, "Port (0: any free port; the chosen one is printed)")
        ->check(CLI::Range(0, 65535));
    cmd->add_option("--max-batch", a->serve.max_batch, "Most rows decoded together")->check(CLI::Range(1, 4096));
    cmd->add_option("--http-threads", a->serve.http_threads, "Connections handled at once")->check(CLI::Range(1, 1024));
    return [a, cmd]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            Tokenizer tok = Tokenizer::load(a->model);
            Model model = load_model(*a);
            ServeOptions o = a->serve;
            if (o.model_name.empty())
                o.model_name = std::filesystem::path(a->model).lexically_normal().filename().string();
            if (o.model_name.empty())
                o.model_name = std::filesystem::path(a->model).lexically_normal().parent_path().filename().string();
            PolicyServer server(model, tok, stop_ids(tok, model.config(), GenerationDefaults::load(a->model)), o);
            catch_stop_signals();
            std::thread watcher([&] {
                while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
                server.stop();
            });
            try {
                server.run();
            } catch (...) {
                g_stop = true;
                watcher.join();
                throw;
            }
            g_stop = true;
            watcher.join();
            return 0;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kernelzero serve: %s\n", e.what());
            return 2;
        }
    };
}

}  // namespace kz::cli
