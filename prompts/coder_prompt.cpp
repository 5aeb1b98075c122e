#include "prompts/coder_prompt.h"

#include <regex>
#include <stdexcept>

#include "common/files.h"

namespace kz {

CoderFormat coder_format(const std::string& backend, const std::string& format) {
    if (backend == "triton") {
        if (!format.empty() && format != "triton")
            throw std::invalid_argument("--format " + format + " is for the cuda backend only");
        return CoderFormat::triton;
    }
    if (backend == "cuda") {
        if (format.empty() || format == "nvrtc") return CoderFormat::cuda_nvrtc;
        if (format == "inline") return CoderFormat::cuda_inline;
        throw std::invalid_argument("unknown --format \"" + format + "\" (nvrtc or inline)");
    }
    throw std::invalid_argument("unknown backend \"" + backend + "\" (cuda or triton)");
}

const char* backend_of(CoderFormat f) { return f == CoderFormat::triton ? "triton" : "cuda"; }

const char* format_name(CoderFormat f) {
    switch (f) {
        case CoderFormat::triton: return "triton";
        case CoderFormat::cuda_nvrtc: return "cuda_nvrtc";
        case CoderFormat::cuda_inline: return "cuda_inline";
    }
    return "?";
}

namespace {

std::string without_trailing_space(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

}  // namespace

std::string default_prompts_dir() { return std::string(KZ_SOURCE_DIR) + "/prompts"; }

CoderPrompt CoderPrompt::load(CoderFormat format, const std::string& version, const std::string& dir) {
    auto read = [&](const std::string& name) {
        const std::string path = dir + "/" + version + "/" + name;
        std::string text;
        try {
            text = read_file(path);
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string("coder prompt: ") + e.what());
        }
        return without_trailing_space(text);
    };
    CoderPrompt p;
    p.version_ = version;
    p.system_ = read("system.md");
    p.user_template_ = read(std::string(format_name(format)) + ".md");
    if (p.user_template_.find("{task}") == std::string::npos)
        throw std::runtime_error("coder prompt " + dir + "/" + version + "/" + format_name(format) +
                                 ".md has no {task} placeholder");
    return p;
}

std::vector<ChatMessage> CoderPrompt::messages(const std::string& task_source) const {
    const std::string task = without_trailing_space(task_source);
    std::string user = user_template_;
    user.replace(user.find("{task}"), 6, task);
    return {{"system", system_}, {"user", user}};
}

std::string coder_answer(const std::string& candidate_source) {
    std::string answer = "```python\n" + candidate_source;
    if (!answer.empty() && answer.back() != '\n') answer += '\n';
    return answer + "```";
}

Extraction extract_candidate(const std::string& completion) {
    // A fence opens at the start of a line with ``` and an optional language tag, and closes at the
    // next line that is ``` alone (trailing spaces allowed).
    static const std::regex open_fence(R"(^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[ \t]*$)");
    static const std::regex close_fence(R"(^[ \t]*```[ \t]*$)");
    static const std::regex defines_model_new(R"((^|\n)class[ \t]+ModelNew\b)");
    std::vector<std::string> blocks;
    bool in_block = false, unclosed = false;
    std::string lang, current;
    size_t pos = 0;
    while (pos <= completion.size()) {
        size_t nl = completion.find('\n', pos);
        const std::string line = completion.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        std::smatch m;
        if (!in_block && std::regex_match(line, m, open_fence)) {
            in_block = true;
            lang = m[1];
            current.clear();
        } else if (in_block && std::regex_match(line, close_fence)) {
            in_block = false;
            if (lang.empty() || lang == "python" || lang == "py" || lang == "python3") blocks.push_back(current);
        } else if (in_block) {
            current += line + "\n";
        }
        if (nl == std::string::npos) break;
        pos = nl + 1;
    }
    unclosed = in_block;
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
        if (std::regex_search(*it, defines_model_new)) return {*it, ""};
    if (!blocks.empty()) return {"", "no Python code block defines class ModelNew"};
    if (unclosed) return {"", "the code block is not closed (``` missing): the completion was cut off"};
    return {"", "no Python code block (```python ... ```) in the completion"};
}

}  // namespace kz
