#include "verify/sources.h"

#include <filesystem>

#include "common/files.h"

namespace kz {

std::optional<SourceText> load_source(const std::string& value, const std::string& base_dir, std::string& error) {
    SourceText s;
    if (value.find('\n') != std::string::npos) {
        s.text = value;
        s.origin = "<inline>";
    } else {
        std::filesystem::path p(value);
        if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
        std::error_code ec;
        if (value.empty()) {
            error = "empty path";
            return std::nullopt;
        }
        if (!std::filesystem::exists(p, ec)) {
            error = "file not found: " + p.string();
            return std::nullopt;
        }
        try {
            s.text = read_file(p.string());
        } catch (const std::exception& e) {
            error = e.what();
            return std::nullopt;
        }
        s.origin = p.string();
    }
    return s;
}

}  // namespace kz
