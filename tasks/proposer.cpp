#include "tasks/proposer.h"

#include <sstream>

namespace kz {

std::vector<ChatMessage> proposer_prompt(const ApiCatalog& catalog, const std::vector<std::string>& apis,
                                         const std::string& difficulty_hint, const std::vector<std::string>& examples) {
    std::ostringstream sys, user;
    sys << "You write PyTorch reference modules for a GPU-kernel benchmark in the KernelBench format: a Python file "
           "defining `class Model(nn.Module)` with `__init__` and `forward`, `get_inputs()` returning a list of CPU "
           "tensors, and `get_init_inputs()` returning the constructor arguments. forward must be deterministic (no "
           "random operations), its output must depend on its inputs and must not be constant or near zero.";
    user << "Write one task module whose forward uses every one of these PyTorch APIs:\n";
    for (const auto& name : apis) {
        const ApiSpec* a = catalog.find(name);
        user << "- " << name;
        if (a) user << " (" << a->torch_api << ", " << a->category << ")";
        user << "\n";
    }
    if (!difficulty_hint.empty()) user << "\nDifficulty: " << difficulty_hint << "\n";
    for (const auto& e : examples) user << "\nAn example of the format:\n```python\n" << e << "\n```\n";
    user << "\nAnswer with exactly one ```python code block holding the whole file, and nothing else.";
    return {{"system", sys.str()}, {"user", user.str()}};
}

ParsedProposal parse_proposal(const std::string& text) {
    ParsedProposal p;
    std::vector<std::string> blocks;
    size_t pos = 0;
    while (true) {
        size_t open = text.find("```", pos);
        if (open == std::string::npos) break;
        size_t line_end = text.find('\n', open);
        if (line_end == std::string::npos) {
            p.reason = "a code block opens and never closes";
            return p;
        }
        size_t close = text.find("```", line_end + 1);
        if (close == std::string::npos) {
            p.reason = "a code block opens and never closes (truncated completion?)";
            return p;
        }
        std::string lang = text.substr(open + 3, line_end - open - 3);
        while (!lang.empty() && (lang.back() == '\r' || lang.back() == ' ')) lang.pop_back();
        if (lang.empty() || lang == "python" || lang == "py")
            blocks.push_back(text.substr(line_end + 1, close - line_end - 1));
        pos = close + 3;
    }
    if (blocks.empty()) {
        p.reason = "no ```python code block";
        return p;
    }
    std::vector<std::string> tasks;
    for (const auto& b : blocks)
        if (b.find("class Model") != std::string::npos) tasks.push_back(b);
    if (tasks.empty()) {
        p.reason = "no code block defines class Model";
        return p;
    }
    if (tasks.size() > 1) {
        p.reason = std::to_string(tasks.size()) + " code blocks define class Model; exactly one task file is expected";
        return p;
    }
    for (const char* need : {"def get_inputs", "def get_init_inputs"})
        if (tasks[0].find(need) == std::string::npos) {
            p.reason = std::string("the task file lacks ") + (need + 4) + "()";
            return p;
        }
    p.ok = true;
    p.source = tasks[0];
    return p;
}

}  // namespace kz
