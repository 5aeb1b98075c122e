// The symbolic generator's internals (tasks/symbolic.cpp composes a module, tasks/symbolic_rules.cpp
// holds each kind's shape rule): the builder of a module's forward and what a shape rule sees. Not an
// interface: include it from those two files only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tasks/symbolic.h"

namespace kz::symbolic {

using Shape = std::vector<int64_t>;

template <class T>
const T& pick(const std::vector<T>& v, std::mt19937_64& rng) {
    if (v.empty()) throw std::logic_error("pick from an empty set");
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

// `prefix` followed by n: a0, v3, m1. Appended rather than `prefix + std::to_string(n)`, on which
// GCC 12 warns falsely (-Wrestrict, its bug 105329).
inline std::string numbered(const char* prefix, size_t n) {
    std::string s = prefix;
    s += std::to_string(n);
    return s;
}

inline int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

inline std::string shape_args(const Shape& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r;
}

struct Builder {
    const ApiSpec* api = nullptr;
    SizeProfile sizes;
    std::mt19937_64& rng;
    std::vector<std::string> init, input_exprs, params;
    // The constructor's arguments (name, Python literal), get_init_inputs' values in order.
    std::vector<std::pair<std::string, std::string>> init_args;
    std::vector<ForwardStep> steps;  // forward's lines, `output = expr` each
    std::string cur;                 // the running value
    Shape shape;                     // its shape (empty: 0-dim)
    bool is_index = false;
    int vars = 0, mods = 0;

    Builder(SizeProfile s, std::mt19937_64& r) : sizes(s), rng(r) {}
    bool small() const { return sizes == SizeProfile::small; }

    std::string new_input(const Shape& s, const std::string& expr = "") {
        std::string name = numbered("a", params.size());
        params.push_back(name);
        input_exprs.push_back(expr.empty() ? "torch.randn(" + shape_args(s) + ")" : expr);
        return name;
    }
    // This module's name for each substitution key (generate_task draws them); a key without one is
    // named for itself.
    std::map<std::string, std::string> arg_names;
    // The constructor argument standing for substitution `key` = value (a module's size, a dimension):
    // its name, or the name numbered 2, 3, ... where an earlier operator took `key` with another value.
    std::string init_arg(const std::string& key, const std::string& value) {
        const auto named = arg_names.find(key);
        const std::string& base = named == arg_names.end() ? key : named->second;
        for (int n = 1;; ++n) {
            const std::string name = n == 1 ? base : base + std::to_string(n);
            auto it = std::find_if(init_args.begin(), init_args.end(), [&](const auto& a) { return a.first == name; });
            if (it == init_args.end()) {
                init_args.emplace_back(name, value);
                return name;
            }
            if (it->second == value) return name;
        }
    }
    // Adds a line `vN = expr` to forward, recorded as a layout step (apply() marks its operator line).
    void assign(const std::string& expr, Shape s) {
        std::string v = numbered("v", static_cast<size_t>(++vars));
        ForwardStep step;
        step.output = v, step.expr = expr, step.in_shape = shape, step.out_shape = s;
        steps.push_back(std::move(step));
        cur = v;
        shape = std::move(s);
    }
    int64_t dim(size_t i) const { return shape.at(i); }

    // Reshapes the running value to `rank` dims: trailing dims merged, or leading ones added.
    void to_rank(size_t rank) {
        if (shape.size() == rank) return;
        Shape s;
        if (shape.size() > rank) {
            s.assign(shape.begin(), shape.begin() + static_cast<long>(rank) - 1);
            s.push_back(numel(shape) / std::max<int64_t>(1, numel(s)));
        } else {
            s.assign(rank - shape.size(), 1);
            s.insert(s.end(), shape.begin(), shape.end());
        }
        assign(cur + ".reshape(" + shape_args(s) + ")", s);
    }
    void fit_rank(const ApiSpec& a) {
        if (static_cast<int>(shape.size()) > a.max_rank) to_rank(static_cast<size_t>(a.max_rank));
        if (static_cast<int>(shape.size()) < a.min_rank) to_rank(static_cast<size_t>(a.min_rank));
    }
    void as_float() {
        if (is_index) {
            assign(cur + ".float()", shape);
            is_index = false;
        }
    }
};

// A size near `base` (x 1/2 .. x 2 in powers of two, or +-25%): varied tasks from one API set.
int64_t vary(int64_t base, std::mt19937_64& rng);

// The operand as the API's input domain wants it.
std::string in_domain(const std::string& v, const std::string& domain);

// What a kind's shape rule sees and sets: the builder, the API, its kind, the template's
// substitutions and the output shape (the input's unless the rule changes it), the input's rank and
// the chosen reduction dimension.
struct Step {
    Builder& b;
    const ApiSpec& a;
    const std::string& k;
    std::map<std::string, std::string>& subs;
    Shape& out;
    size_t r;
    int64_t dim;
};

using ShapeRule = void (*)(Step&);

// The shape rule of each kind of API (api_catalog.json's "kind"); every conv* kind shares one.
ShapeRule shape_rule(const std::string& kind);

}  // namespace kz::symbolic
