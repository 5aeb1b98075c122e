// The teacher's operator table (teach/teacher.h): which family each catalog API belongs to and the
// Triton it becomes. Internal to teach/.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tasks/symbolic.h"

namespace kz::teach {

// layout: an operator that moves no arithmetic (a view), written as the task writes it.
enum class Family { elementwise, row, matmul, conv, layout, unsupported };

// Operators of the kinds the generator records (ForwardStep::kind) and names (::api).
Family family_of(const ForwardStep& step);

// An elementwise API as a Triton expression of `t` (the running value, fp32), with `{y}` the second
// operand, `{b}` a bias value and `{w}` a scalar weight where the API reads one, and `{scalar}` the
// template's substitution. Helpers are @triton.jit functions the expression calls.
struct ElementwiseRule {
    std::string expr;
    std::vector<std::string> helpers;
};
const ElementwiseRule* elementwise_rule(const std::string& api);

// The source of a helper named in a rule (or "_tanh", which domains use).
const std::string& helper_source(const std::string& name);

// The expression that maps `v` into a catalog domain ("any", "positive", "bounded").
std::string domain_expr(const std::string& v, const std::string& domain, std::set<std::string>& helpers);

// A code block under construction: lines at an indentation, 4 spaces a level.
struct Code {
    std::vector<std::string> lines;
    void add(int level, const std::string& text) { lines.push_back(std::string(4 * level, ' ') + text); }
    std::string str() const;
};

// "{key}" replaced by its value in `text`, for every key of `subs`.
std::string substitute(std::string text, const std::map<std::string, std::string>& subs);

}  // namespace kz::teach
