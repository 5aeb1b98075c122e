// Task and candidate sources as jobs name them: a path to a .py file, or the Python source itself.
#pragma once

#include <optional>
#include <string>

namespace kz {

struct SourceText {
    std::string text;
    std::string origin;  // the path it came from, or "<inline>"
};

// `value` holding a newline is inline source; otherwise it is a path, resolved against `base_dir`
// when relative. Returns nullopt with `error` naming the cause (missing, unreadable). The text is
// not validated: the verifier judges it (a candidate that is not UTF-8 is a format_error).
std::optional<SourceText> load_source(const std::string& value, const std::string& base_dir, std::string& error);

}  // namespace kz
