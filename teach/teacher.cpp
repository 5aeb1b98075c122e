#include "teach/teacher.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "common/hash.h"
#include "teach/kernel_writer.h"

namespace kz {

const char* quality_name(TeacherQuality q) { return q == TeacherQuality::naive ? "naive" : "fused"; }

TeacherQuality parse_quality(const std::string& name) {
    if (name == "naive") return TeacherQuality::naive;
    if (name == "fused") return TeacherQuality::fused;
    throw std::invalid_argument("unknown teacher quality '" + name + "' (naive or fused)");
}

TeacherQuality quality_by_share(uint64_t seed, const std::string& task, double fused_share) {
    return unit_hash("quality:" + std::to_string(seed) + ":" + task) < fused_share ? TeacherQuality::fused
                                                                                   : TeacherQuality::naive;
}

bool teacher_supports(const std::string& api) {
    ForwardStep probe;
    probe.api = api;
    return teach::family_of(probe) != teach::Family::unsupported;
}

namespace {

using namespace teach;

std::string kernel_name(const Group& g, std::set<std::string>& taken) {
    std::string name;
    auto add = [&](const ForwardStep* s) { name += (name.empty() ? "" : "_") + s->api; };
    for (const auto* s : g.pre) add(s);
    if (g.anchor) add(g.anchor);
    for (const auto* s : g.post) add(s);
    if (g.size() > 3) name = g.first().api + "_to_" + g.last().api;
    name += "_kernel";
    std::string unique = name;
    for (int i = 2; taken.count(unique); ++i) unique = name + "_" + std::to_string(i);
    taken.insert(unique);
    return unique;
}

// The candidate of a task whose operators are all in the teacher's families.
TeacherCandidate write_candidate(const GeneratedTask& task, TeacherQuality quality) {
    TeacherCandidate out;
    std::set<std::string> helpers, names;
    std::vector<std::string> kernels;
    Code fwd;
    const bool fused = quality == TeacherQuality::fused;
    Group g;
    auto flush = [&] {
        if (g.empty()) return;
        Kernel k{kernel_name(g, names), {}, {}, {}, helpers, {}, 0};
        std::string comment;
        for (const auto& l : g.lines) {
            comment += "# " + l + "\n";
            fwd.add(2, "# " + l);
        }
        if (g.anchor && family_of(*g.anchor) == Family::matmul)
            write_matmul(g, k, fwd);
        else if (g.anchor && family_of(*g.anchor) == Family::conv)
            write_conv(g, k, fwd);
        else if (g.anchor)
            write_row(g, k, fwd, operand_name(g.first(), "x"));
        else
            write_elementwise(g, k, fwd, operand_name(g.first(), "x"));
        fwd.add(2, g.output + " = out");
        kernels.push_back(comment + k.source());
        g = Group{};
    };
    for (const ForwardStep& s : task.steps) {
        if (!s.is_op) {
            const std::string reshape = g.output + ".reshape";
            const bool view = fused && !g.pre.empty() && !g.anchor && s.expr.rfind(reshape, 0) == 0 &&
                              std::none_of(g.pre.begin(), g.pre.end(), [](auto* p) { return p->api == "bias_add"; });
            if (view) {
                g.views.push_back(s.expr.substr(reshape.size()));
                g.lines.push_back(s.line());
                g.output = s.output;
                continue;
            }
            flush();
            fwd.add(2, s.line());
            continue;
        }
        switch (family_of(s)) {
            case Family::elementwise: (g.anchor ? g.post : g.pre).push_back(&s); break;
            case Family::row:
                if (!g.empty() && (g.anchor || !fused)) flush();
                g.anchor = &s;
                break;
            case Family::matmul:
            case Family::conv:
                flush();
                g.anchor = &s;
                break;
            case Family::layout:
                flush();
                fwd.add(2, s.line());
                continue;
            case Family::unsupported: throw std::logic_error("unsupported operator past the check");
        }
        g.output = s.output;
        g.lines.push_back(s.line());
        if (!fused) flush();
    }
    flush();
    if (kernels.empty()) {
        out.unsupported = "no operator with arithmetic";
        return out;
    }
    std::string src = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n";
    for (const auto& h : helpers) src += helper_source(h) + "\n\n";
    for (const auto& k : kernels) src += k + "\n\n";
    src += "class ModelNew(nn.Module):\n    def __init__(" + init_signature(task.init_args) +
           "):\n        super().__init__()\n";
    for (const auto& l : task.init) src += "        " + l + "\n";
    src += "\n    def forward(self";
    for (const auto& p : task.inputs) src += ", " + p;
    src += "):\n" + fwd.str() + "        return " + task.result + "\n";
    out.written = true;
    out.source = src;
    out.kernels = static_cast<int>(kernels.size());
    return out;
}

}  // namespace

TeacherCandidate teach_triton(const GeneratedTask& task, TeacherQuality quality) {
    for (const ForwardStep& s : task.steps) {
        if (s.is_op && family_of(s) == Family::unsupported) {
            TeacherCandidate out;
            out.unsupported = s.api;
            return out;
        }
    }
    try {
        return write_candidate(task, quality);
    } catch (const std::runtime_error& e) {  // a step the graph does not describe fully: not written
        TeacherCandidate out;
        out.unsupported = e.what();
        return out;
    }
}

}  // namespace kz
