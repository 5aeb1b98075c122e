#include "train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/html.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string num(double v, const char* f = "%.3g") { return format_number(v, f); }

// A value at a JSON pointer path, if it is a number.
std::optional<double> at(const json& j, const std::string& pointer) {
    try {
        const json& v = j.at(json::json_pointer(pointer));
        if (v.is_number()) return v.get<double>();
        if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    } catch (const json::exception&) {}
    return std::nullopt;
}

// The mean of a field over the Coder phase's steps of one iteration.
std::optional<double> coder_mean(const json& m, const std::string& field) {
    if (!m.contains("coder") || !m["coder"].contains("steps")) return std::nullopt;
    double s = 0;
    int n = 0;
    for (const auto& st : m["coder"]["steps"])
        if (st.contains(field) && st[field].is_number()) s += st[field].get<double>(), ++n;
    if (!n) return std::nullopt;
    return s / n;
}

struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;  // (iteration, value)
};

std::string line_chart(const std::string& title, const std::vector<Series>& series) {
    const int W = 460, H = 220, L = 48, R = 12, T = 24, B = 30;
    double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
    for (const auto& s : series)
        for (auto [x, y] : s.points)
            x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    std::ostringstream o;
    o << "<figure><svg width='" << W << "' height='" << H << "' viewBox='0 0 " << W << " " << H
      << "' xmlns='http://www.w3.org/2000/svg' font-family='sans-serif' font-size='11'>";
    o << "<text x='" << L << "' y='14' font-weight='bold'>" << html_escape(title) << "</text>";
    if (x0 > x1) {
        o << "<text x='" << L << "' y='" << H / 2 << "'>no data</text></svg></figure>";
        return o.str();
    }
    if (y0 == y1) y0 -= 0.5, y1 += 0.5;
    if (x0 == x1) x0 -= 0.5, x1 += 0.5;
    auto X = [&](double x) { return L + (W - L - R) * (x - x0) / (x1 - x0); };
    auto Y = [&](double y) { return T + (H - T - B) * (1 - (y - y0) / (y1 - y0)); };
    for (int k = 0; k <= 4; ++k) {
        double v = y0 + (y1 - y0) * k / 4;
        o << "<line x1='" << L << "' x2='" << W - R << "' y1='" << Y(v) << "' y2='" << Y(v) << "' stroke='#ddd'/>";
        o << "<text x='" << L - 4 << "' y='" << Y(v) + 4 << "' text-anchor='end'>" << num(v) << "</text>";
    }
    o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 4 << "' text-anchor='middle'>iteration</text>";
    o << "<text x='" << L << "' y='" << H - B + 14 << "' text-anchor='middle'>" << num(x0, "%.0f") << "</text>";
    o << "<text x='" << W - R << "' y='" << H - B + 14 << "' text-anchor='middle'>" << num(x1, "%.0f") << "</text>";
    static const char* colors[] = {"#1f6feb", "#d1590f", "#2da44e", "#8250df", "#cf222e"};
    for (size_t i = 0; i < series.size(); ++i) {
        const char* c = colors[i % 5];
        std::string pts;
        for (auto [x, y] : series[i].points) pts += num(X(x), "%.1f") + "," + num(Y(y), "%.1f") + " ";
        o << "<polyline fill='none' stroke='" << c << "' stroke-width='2' points='" << pts << "'/>";
        for (auto [x, y] : series[i].points)
            o << "<circle cx='" << X(x) << "' cy='" << Y(y) << "' r='3' fill='" << c << "'/>";
        o << "<text x='" << W - R - 4 << "' y='" << 14 + 13 * static_cast<int>(i) << "' text-anchor='end' fill='" << c
          << "'>" << html_escape(series[i].name) << "</text>";
    }
    o << "</svg></figure>";
    return o.str();
}

Series series(const std::string& name, const std::vector<json>& metrics,
              const std::function<std::optional<double>(const json&)>& get) {
    Series s{name, {}};
    for (const auto& m : metrics)
        if (auto v = get(m)) s.points.emplace_back(m.value("iteration", 0.0), *v);
    return s;
}

// API x iteration, colour = the frontier's posterior mean pass rate (APIs seen at least once).
std::string capability_map(const std::vector<std::pair<int64_t, json>>& frontiers) {
    std::map<std::string, std::map<int64_t, double>> cells;
    for (const auto& [it, f] : frontiers)
        for (const auto& [key, v] : f.items())
            if (key.find('|') == std::string::npos && v.is_array() && v.size() == 3 && v[2].get<double>() > 0)
                cells[key][it] = v[0].get<double>() / (v[0].get<double>() + v[1].get<double>());
    if (cells.empty()) return "<p>No API has been measured yet.</p>";
    const int cw = std::max(14, 480 / std::max<int>(1, static_cast<int>(frontiers.size()))), ch = 14, L = 170, T = 20;
    const int W = L + cw * static_cast<int>(frontiers.size()) + 10, H = T + ch * static_cast<int>(cells.size()) + 30;
    std::ostringstream o;
    o << "<svg width='" << W << "' height='" << H
      << "' xmlns='http://www.w3.org/2000/svg' font-family='sans-serif' font-size='10'>";
    for (size_t k = 0; k < frontiers.size(); ++k)
        o << "<text x='" << L + cw * static_cast<int>(k) + cw / 2 << "' y='" << T - 6 << "' text-anchor='middle'>"
          << frontiers[k].first << "</text>";
    int row = 0;
    for (const auto& [api, by_it] : cells) {
        int y = T + ch * row++;
        o << "<text x='" << L - 4 << "' y='" << y + 11 << "' text-anchor='end'>" << html_escape(api) << "</text>";
        for (size_t k = 0; k < frontiers.size(); ++k) {
            auto f = by_it.find(frontiers[k].first);
            if (f == by_it.end()) continue;
            const double p = f->second;  // red (0) -> yellow -> green (1)
            const int r = static_cast<int>(p < 0.5 ? 220 : 220 - (p - 0.5) * 2 * 170);
            const int g = static_cast<int>(p < 0.5 ? 60 + p * 2 * 160 : 220);
            o << "<rect x='" << L + cw * static_cast<int>(k) << "' y='" << y << "' width='" << cw - 1 << "' height='"
              << ch - 1 << "' fill='rgb(" << r << "," << g << ",70)'><title>" << html_escape(api) << " iter "
              << frontiers[k].first << ": " << num(p, "%.2f") << "</title></rect>";
        }
    }
    o << "<text x='" << L << "' y='" << H - 8
      << "'>columns: iterations; colour: estimated pass@1 (red 0, green 1)</text>";
    o << "</svg>";
    return o.str();
}

}  // namespace

std::string write_train_report(const std::string& dir) {
    if (!fs::is_regular_file(dir + "/run.json")) throw std::runtime_error(dir + " holds no training run (no run.json)");
    json run = json::parse(read_file(dir + "/run.json"));
    std::vector<json> metrics = read_json_lines(dir + "/metrics.jsonl");
    std::vector<std::pair<int64_t, json>> frontiers;
    if (fs::is_directory(dir + "/checkpoints"))
        for (const auto& e : fs::directory_iterator(dir + "/checkpoints")) {
            std::string n = e.path().filename().string();
            if (n.rfind("iter-", 0) != 0 || n.find(".tmp") != std::string::npos) continue;
            try {
                json s = json::parse(read_file(e.path().string() + "/state.json"));
                frontiers.emplace_back(s.at("iteration").get<int64_t>(), s.at("frontier"));
            } catch (const std::exception&) {}
        }
    std::sort(frontiers.begin(), frontiers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

    std::ostringstream o;
    o << "<!doctype html><html><head><meta charset='utf-8'><title>KernelZero training run</title><style>"
         "body{font-family:sans-serif;margin:24px;color:#1f2328}table{border-collapse:collapse;margin:8px 0}"
         "td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:right}th{background:#f6f8fa}"
         "td:first-child,th:first-child{text-align:left}figure{display:inline-block;margin:6px}"
         "code{background:#f6f8fa;padding:1px 4px}</style></head><body>";
    const json& cfg = run.value("config", json::object());
    o << "<h1>KernelZero training run</h1><p>run <code>" << html_escape(run.value("run_id", std::string("?")))
      << "</code>, configuration <code>" << html_escape(cfg.value("name", std::string("?")))
      << "</code>, backend <code>" << html_escape(cfg.value("backend", std::string("?"))) << "</code>, "
      << metrics.size() << " finished iteration(s).</p>";

    o << "<h2>Training curves</h2>";
    o << line_chart(
        "Coder",
        {series("pass rate", metrics, [](const json& m) { return coder_mean(m, "pass_rate"); }),
         series("mean reward", metrics, [](const json& m) { return coder_mean(m, "mean_reward"); }),
         series("gate open-rate", metrics, [](const json& m) { return coder_mean(m, "gate_open_rate"); }),
         // The update's share that speedups alone order (docs/RL.md): timing noise under grpo.
         series("speed-only share", metrics, [](const json& m) { return coder_mean(m, "speed_only_share"); })});
    o << line_chart(
        "Proposer",
        {series("valid share", metrics,
                [](const json& m) -> std::optional<double> {
                    auto v = at(m, "/propose/valid"), n = at(m, "/propose/proposals");
                    if (!v || !n || *n == 0) return std::nullopt;
                    return *v / *n;
                }),
         series("mean reward", metrics, [](const json& m) { return at(m, "/propose/mean_reward"); }),
         series("band occupancy", metrics, [](const json& m) { return at(m, "/propose/band_occupancy"); })});
    o << line_chart("Evaluation",
                    {series("pass@1", metrics, [](const json& m) { return at(m, "/eval/pass_at_k/pass@1"); }),
                     series("fast_1", metrics, [](const json& m) { return at(m, "/eval/fast_p_eager/1"); })});
    o << line_chart(
        "Frontier and throughput",
        {series("frontier keys", metrics, [](const json& m) { return at(m, "/frontier_size"); }),
         series("verifier jobs/min", metrics, [](const json& m) { return at(m, "/verifier_jobs_per_min"); })});

    o << "<h2>Capability map</h2>" << capability_map(frontiers);

    o << "<h2>Stage times (s)</h2><table><tr><th>iteration</th>";
    // The trainer's order first (JSON objects come back sorted by name), then anything else.
    std::vector<std::string> stages = {"warm_start", "propose", "refresh_pool", "coder", "eval", "checkpoint"};
    for (const auto& m : metrics)
        if (m.contains("stage_s"))
            for (auto& [k, v] : m["stage_s"].items())
                if (std::find(stages.begin(), stages.end(), k) == stages.end()) stages.push_back(k);
    stages.erase(std::remove_if(stages.begin(), stages.end(),
                                [&](const std::string& s) {
                                    return std::none_of(metrics.begin(), metrics.end(), [&](const json& m) {
                                        return m.contains("stage_s") && m["stage_s"].contains(s);
                                    });
                                }),
                 stages.end());
    for (const auto& s : stages) o << "<th>" << html_escape(s) << "</th>";
    o << "</tr>";
    for (const auto& m : metrics) {
        o << "<tr><td>" << m.value("iteration", 0) << "</td>";
        for (const auto& s : stages) {
            auto v = at(m, "/stage_s/" + s);
            o << "<td>" << (v ? num(*v, "%.1f") : "–") << "</td>";
        }
        o << "</tr>";
    }
    o << "</table>";
    o << "<h2>Configuration</h2><pre>" << html_escape(cfg.dump(2)) << "</pre></body></html>\n";
    const std::string path = dir + "/report.html";
    write_file_atomic(path, o.str());
    return path;
}

}  // namespace kz
