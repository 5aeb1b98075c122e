// kernelzero: the single controller of KernelZero (design section 2).
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/torch_info.h"

int main(int argc, char** argv) {
    CLI::App app{"KernelZero: train LLMs to write fast, correct GPU kernels"};
    app.require_subcommand(1);
    auto verify = kz::cli::add_verify(app);

    auto* info_cmd = app.add_subcommand("info", "Show the linked libtorch and the devices it sees");
    bool info_json = false;
    info_cmd->add_flag("--json", info_json, "Print JSON");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "kernelzero: %s\n", e.what());
        return 2;
    }
    if (info_cmd->parsed()) {
        kz::TorchInfo t = kz::torch_info();
        nlohmann::json j = {{"libtorch", t.linked ? t.version : "not linked"},
                            {"cuda_available", t.cuda_available},
                            {"cuda_devices", t.cuda_devices}};
        if (info_json) std::cout << j.dump() << "\n";
        else std::cout << "libtorch " << j["libtorch"].get<std::string>() << ", CUDA "
                       << (t.cuda_available ? std::to_string(t.cuda_devices) + " device(s)" : "not available") << "\n";
        return 0;
    }
    return verify();
}
