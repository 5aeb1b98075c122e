// What the project's self-contained HTML reports (bench, train) share: escaping, number formatting.
#pragma once

#include <cstdio>
#include <string>

namespace kz {

// A number through a printf format ("%.3f", "%.1f%%", ...).
inline std::string format_number(double v, const char* format) {
    char b[64];
    std::snprintf(b, sizeof b, format, v);
    return b;
}

inline std::string html_escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

}  // namespace kz
