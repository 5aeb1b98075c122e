#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/html.h"

namespace kz {

using json = nlohmann::json;

namespace {

std::string fmt(double v, const char* f = "%.3f") { return format_number(v, f); }
std::string fmt_opt(const std::optional<double>& v, const char* f = "%.3f") { return v ? fmt(*v, f) : "–"; }
std::string pct(double v) { return fmt(100 * v, "%.1f%%"); }
std::string pct_opt(const std::optional<double>& v) { return v ? pct(*v) : "–"; }

// Each value in backticks for Markdown, in <code> (escaped) for HTML.
std::string run_line(const json& run, bool html) {
    auto v = [&](const char* key) {
        std::string s = run.value(key, std::string("?"));
        return html ? "<code>" + html_escape(s) + "</code>" : "`" + s + "`";
    };
    return "source " + v("source") + ", format " + v("format") + ", prompt " + v("prompt_version") + ", " +
           std::to_string(run.value("samples", 0)) + " sample(s) per task";
}

// Rows of (name, metrics) for the overall and per-group tables.
std::vector<std::pair<std::string, const GroupMetrics*>> rows_of(const BenchMetrics& m) {
    std::vector<std::pair<std::string, const GroupMetrics*>> rows = {{"all", &m.overall}};
    for (const auto& [name, g] : m.by_group) rows.emplace_back(name, &g);
    return rows;
}

// fast_p against eager (and torch.compile) as a line chart over the thresholds.
std::string fast_p_svg(const GroupMetrics& g) {
    const int W = 520, H = 240, L = 48, R = 116, T = 16, B = 36;  // the legend sits in the right margin
    const size_t n = kFastThresholds.size();
    auto x = [&](size_t i) { return L + (W - L - R) * static_cast<double>(i) / static_cast<double>(n - 1); };
    auto y = [&](double v) { return T + (H - T - B) * (1.0 - v); };
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
      << "' role='img' aria-label='fast_p'>";
    for (double v : {0.0, 0.25, 0.5, 0.75, 1.0})
        s << "<line x1='" << L << "' x2='" << W - R << "' y1='" << y(v) << "' y2='" << y(v) << "' stroke='#ddd'/>"
          << "<text x='" << L - 6 << "' y='" << y(v) + 4 << "' font-size='11' text-anchor='end'>" << v << "</text>";
    for (size_t i = 0; i < n; ++i)
        s << "<text x='" << x(i) << "' y='" << H - B + 16 << "' font-size='11' text-anchor='middle'>"
          << kFastThresholds[i] << "</text>";
    s << "<text x='" << (L + W - R) / 2 << "' y='" << H - 4
      << "' font-size='11' text-anchor='middle'>p (speedup above)</text>";
    auto line = [&](const std::map<double, double>& vals, const char* color, const char* label, int row) {
        s << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
        for (size_t i = 0; i < n; ++i) s << x(i) << "," << y(vals.at(kFastThresholds[i])) << " ";
        s << "'/>";
        for (size_t i = 0; i < n; ++i)
            s << "<circle cx='" << x(i) << "' cy='" << y(vals.at(kFastThresholds[i])) << "' r='3' fill='" << color
              << "'/>";
        s << "<text x='" << W - R + 10 << "' y='" << T + 12 + 16 * row << "' font-size='11' fill='" << color << "'>"
          << label << "</text>";
    };
    line(g.fast_eager, "#1f6feb", "vs eager", 0);
    if (g.geomean_speedup_compile)
        line(g.fast_compile, "#d2691e", "vs torch.compile", 1);
    else
        s << "<text x='" << W - R + 10 << "' y='" << T + 28
          << "' font-size='11' fill='#888'>torch.compile not timed</text>";
    s << "</svg>";
    return s.str();
}

// Histogram of log2(speedup vs eager) over correct samples.
std::string speedup_svg(const std::vector<SampleOutcome>& samples) {
    std::vector<double> l;
    for (const auto& s : samples)
        if (s.correct && s.speedup_eager && *s.speedup_eager > 0) l.push_back(std::log2(*s.speedup_eager));
    const int W = 420, H = 240, L = 40, R = 16, T = 16, B = 36;
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
      << "' role='img' aria-label='speedups'>";
    if (l.empty()) {
        s << "<text x='" << W / 2 << "' y='" << H / 2
          << "' font-size='13' text-anchor='middle'>no correct sample with a "
          << "speedup</text></svg>";
        return s.str();
    }
    const double lo = std::floor(std::min(-1.0, *std::min_element(l.begin(), l.end())));
    const double hi = std::ceil(std::max(1.0, *std::max_element(l.begin(), l.end())));
    const int bins = static_cast<int>((hi - lo) * 4);  // quarter octaves
    std::vector<int> count(static_cast<size_t>(bins), 0);
    for (double v : l) count[static_cast<size_t>(std::min(bins - 1, static_cast<int>((v - lo) * 4)))]++;
    const int top = *std::max_element(count.begin(), count.end());
    const double bw = static_cast<double>(W - L - R) / bins;
    for (int i = 0; i < bins; ++i) {
        const double h = (H - T - B) * count[static_cast<size_t>(i)] / static_cast<double>(top);
        s << "<rect x='" << L + i * bw + 1 << "' y='" << H - B - h << "' width='" << bw - 2 << "' height='" << h
          << "' fill='#2da44e'><title>" << count[static_cast<size_t>(i)] << "</title></rect>";
    }
    for (double e = lo; e <= hi; e += 1) {
        const double x = L + (e - lo) * 4 * bw;
        s << "<line x1='" << x << "' x2='" << x << "' y1='" << T << "' y2='" << H - B << "' stroke='"
          << (e == 0 ? "#888" : "#eee") << "'/><text x='" << x << "' y='" << H - B + 16
          << "' font-size='11' text-anchor='middle'>" << fmt(std::exp2(e), "%gx") << "</text>";
    }
    s << "<text x='" << (L + W - R) / 2 << "' y='" << H - 4
      << "' font-size='11' text-anchor='middle'>speedup vs eager, correct samples (" << l.size() << ")</text></svg>";
    return s.str();
}

}  // namespace

std::string report_markdown(const BenchMetrics& m, const json& run, const std::vector<int64_t>& ks) {
    std::ostringstream o;
    o << "# KernelZero bench report\n\n" << run_line(run, false) << ".\n\n";
    o << "| group | tasks | samples | correct |";
    for (int64_t k : ks) o << " pass@" << k << " |";
    for (double p : kFastThresholds) o << " fast_" << p << " |";
    o << " geomean speedup (eager / compile) | infra errors |\n|---|---|---|---|";
    for (size_t i = 0; i < ks.size() + kFastThresholds.size(); ++i) o << "---|";
    o << "---|---|\n";
    for (const auto& [name, g] : rows_of(m)) {
        o << "| " << name << " | " << g->tasks << " | " << g->samples << " | " << g->correct << " |";
        for (int64_t k : ks) o << " " << pct_opt(g->pass_at.at(k)) << " |";
        for (double p : kFastThresholds) o << " " << pct(g->fast_eager.at(p)) << " |";
        o << " " << fmt_opt(g->geomean_speedup_eager, "%.2fx") << " / " << fmt_opt(g->geomean_speedup_compile, "%.2fx")
          << " | " << g->infra_errors << " |\n";
    }
    o << "\nfast_p counts a sample that is correct and more than p times faster than eager PyTorch (fast_0: correct), "
         "averaged over samples per task, then over tasks.\n\n## Tasks\n\n"
         "| task | samples | correct | best speedup vs eager | vs torch.compile |\n|---|---|---|---|---|\n";
    for (const auto& t : m.tasks)
        o << "| " << t.task << " | " << t.samples << " | " << t.correct << " | "
          << fmt_opt(t.best_speedup_eager, "%.2fx") << " | " << fmt_opt(t.best_speedup_compile, "%.2fx") << " |\n";
    return o.str();
}

std::string report_html(const BenchMetrics& m, const std::vector<SampleOutcome>& samples, const json& run,
                        const std::vector<int64_t>& ks) {
    std::ostringstream o;
    o << "<!doctype html><html><head><meta charset='utf-8'><title>KernelZero bench report</title><style>"
         "body{font-family:system-ui,sans-serif;margin:24px;color:#1f2328}table{border-collapse:collapse;margin:12px 0}"
         "td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:right}th{background:#f6f8fa}td:first-child,"
         "th:first-child{text-align:left}.charts{display:flex;gap:24px;flex-wrap:wrap}figure{margin:0}"
         "figcaption{font-size:13px;color:#57606a}.bad{color:#cf222e}.good{color:#1a7f37}</style></head><body>";
    o << "<h1>KernelZero bench report</h1><p>" << run_line(run, true) << ".</p>";
    o << "<table><tr><th>group</th><th>tasks</th><th>samples</th><th>correct</th>";
    for (int64_t k : ks) o << "<th>pass@" << k << "</th>";
    for (double p : kFastThresholds) o << "<th>fast<sub>" << p << "</sub></th>";
    o << "<th>geomean speedup<br>eager / compile</th><th>infra errors</th></tr>";
    for (const auto& [name, g] : rows_of(m)) {
        o << "<tr><td>" << html_escape(name) << "</td><td>" << g->tasks << "</td><td>" << g->samples << "</td><td>"
          << g->correct << "</td>";
        for (int64_t k : ks) o << "<td>" << pct_opt(g->pass_at.at(k)) << "</td>";
        for (double p : kFastThresholds) o << "<td>" << pct(g->fast_eager.at(p)) << "</td>";
        o << "<td>" << fmt_opt(g->geomean_speedup_eager, "%.2fx") << " / "
          << fmt_opt(g->geomean_speedup_compile, "%.2fx") << "</td><td>" << g->infra_errors << "</td></tr>";
    }
    o << "</table><div class='charts'><figure>" << fast_p_svg(m.overall)
      << "<figcaption>fast<sub>p</sub>: share correct and more than p times faster than the "
         "baseline</figcaption></figure>"
      << "<figure>" << speedup_svg(samples)
      << "<figcaption>speedup distribution (log scale)</figcaption></figure></div>";
    o << "<h2>Tasks</h2><table><tr><th>task</th><th>samples</th><th>correct</th><th>best speedup vs eager</th>"
         "<th>vs torch.compile</th></tr>";
    for (const auto& t : m.tasks)
        o << "<tr><td>" << html_escape(t.task) << "</td><td>" << t.samples << "</td><td class='"
          << (t.correct > 0 ? "good" : "bad") << "'>" << t.correct << "</td><td>"
          << fmt_opt(t.best_speedup_eager, "%.2fx") << "</td><td>" << fmt_opt(t.best_speedup_compile, "%.2fx")
          << "</td></tr>";
    o << "</table></body></html>\n";
    return o.str();
}

}  // namespace kz
