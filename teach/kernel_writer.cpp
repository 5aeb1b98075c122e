#include <stdexcept>

#include "teach/kernel_writer.h"

namespace kz::teach {

std::string operand_name(const ForwardStep& s, const std::string& key) {
    auto it = s.operands.find(key);
    if (it == s.operands.end()) throw std::runtime_error(s.api + " without operand " + key);
    return it->second.name;
}

std::string operand_domain(const ForwardStep& s, const std::string& key) {
    auto it = s.operands.find(key);
    return it == s.operands.end() ? "any" : it->second.domain;
}

namespace {

// The lines that apply an elementwise operator to `t` at flat offsets `offs` under `mask`; `last`
// is forward's expression for the size of the value's last dimension (a bias is indexed by it).
void elementwise_lines(const ForwardStep& s, Kernel& k, int level, const std::string& last) {
    const ElementwiseRule& rule = *elementwise_rule(s.api);
    std::map<std::string, std::string> subs;
    if (auto it = s.params.find("scalar"); it != s.params.end()) subs["scalar"] = it->second;
    const std::string x_domain = operand_domain(s, "x");
    if (x_domain != "any") k.body.add(level, "t = " + domain_expr("t", x_domain, k.helpers));
    if (rule.expr.find("{y}") != std::string::npos) {
        const std::string y = k.fresh("y");
        k.arg(y + "_ptr", operand_name(s, "y") + ".contiguous()");
        k.body.add(level, y + " = tl.load(" + y + "_ptr + offs, mask=mask, other=1.0)");
        const std::string y_domain = operand_domain(s, "y");
        if (y_domain != "any") k.body.add(level, y + " = " + domain_expr(y, y_domain, k.helpers));
        subs["y"] = y;
    }
    if (rule.expr.find("{b}") != std::string::npos) {
        const std::string b = k.fresh("b");
        k.arg(b + "_ptr", s.module);
        k.arg("last_" + b, last);
        k.body.add(level, b + " = tl.load(" + b + "_ptr + offs % last_" + b + ", mask=mask, other=0.0)");
        subs["b"] = b;
    }
    if (rule.expr.find("{w}") != std::string::npos) {
        const std::string w = k.fresh("w");
        k.arg(w + "_ptr", s.module + ".weight");
        k.body.add(level, w + " = tl.load(" + w + "_ptr)");
        subs["w"] = w;
    }
    for (const auto& h : rule.helpers) k.helpers.insert(h);
    k.body.add(level, "t = " + substitute(rule.expr, subs));
}

}  // namespace

void elementwise_run(const std::vector<const ForwardStep*>& steps, Kernel& k, int level, const std::string& last) {
    for (const ForwardStep* s : steps) elementwise_lines(*s, k, level, last);
}

// `x` in forward: the group's input, contiguous, in the shape of the views it was taken through.
void load_input(const Group& g, Code& fwd, const std::string& x) {
    fwd.add(2, "x = " + x + ".contiguous()");
    for (const auto& v : g.views) fwd.add(2, "x = x.reshape" + v);
}

// ---- a run of elementwise operators: one flat kernel ----

void write_elementwise(const Group& g, Kernel& k, Code& fwd, const std::string& x) {
    load_input(g, fwd, x);
    fwd.add(2, "out = torch.empty_like(x)");
    fwd.add(2, "n = x.numel()");
    k.arg("x_ptr", "x");
    k.arg("out_ptr", "out");
    k.arg("n", "n");
    k.constexprs = {"BLOCK"};
    k.body.add(1, "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)");
    k.body.add(1, "mask = offs < n");
    k.body.add(1, "t = tl.load(x_ptr + offs, mask=mask, other=0.0)");
    elementwise_run(g.pre, k, 1, "x.shape[-1]");
    k.body.add(1, "tl.store(out_ptr + offs, t, mask=mask)");
    fwd.add(2, k.launch("(triton.cdiv(n, 1024),)", {"1024"}));
}

}  // namespace kz::teach
