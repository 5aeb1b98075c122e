// The teacher's kernel writers (internal to teach/): a group of operators that becomes one kernel,
// the kernel being written, and one writer per family. Each writer adds the kernel's body and
// parameters to `k` and the lines that launch it to forward (`fwd`, ending with the result in `out`).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tasks/symbolic.h"
#include "teach/triton_ops.h"

namespace kz::teach {

// Operators that become one kernel: elementwise ones before an anchor (applied as it loads; only a
// row operator takes them), the anchor (a row operator, a matrix product or a convolution; none in a
// run of elementwise operators), elementwise ones after it (applied before it stores).
struct Group {
    std::vector<const ForwardStep*> pre;
    const ForwardStep* anchor = nullptr;
    std::vector<const ForwardStep*> post;
    // Reshapes of the prologue's result (a contiguous value: a view, the same flat order), taken onto
    // the group's input instead, so that they do not split it: "(1, 512)" for `v.reshape(1, 512)`.
    std::vector<std::string> views;
    std::string output;  // the variable the group's result is: its last operator's or view's
    // The module's forward lines the group computes, in order (`v2 = self.m0(v1)`): the kernel and
    // its launch carry them as comments, so that each kernel names the line it replaces.
    std::vector<std::string> lines;
    bool empty() const { return pre.empty() && !anchor; }
    const ForwardStep& first() const { return pre.empty() ? *anchor : *pre.front(); }
    const ForwardStep& last() const { return !post.empty() ? *post.back() : anchor ? *anchor : *pre.back(); }
    int size() const { return static_cast<int>(pre.size() + post.size()) + (anchor ? 1 : 0); }
};

// A kernel being written: its parameters and, in the same order, what forward passes for each.
struct Kernel {
    std::string name;
    std::vector<std::string> params, args, constexprs;
    std::set<std::string>& helpers;
    Code body;
    int values = 0;  // names of loaded operands: y0, b1, w2, ...

    void arg(const std::string& param, const std::string& value) {
        params.push_back(param);
        args.push_back(value);
    }
    std::string fresh(const std::string& stem) { return stem + std::to_string(values++); }

    std::string source() const {
        std::string sig;
        for (const auto& p : params) sig += (sig.empty() ? "" : ", ") + p;
        for (const auto& c : constexprs) sig += ", " + c + ": tl.constexpr";
        return "@triton.jit\ndef " + name + "(" + sig + "):\n" + body.str();
    }
    // The launch: kernel[grid](args..., CONST=value...)
    std::string launch(const std::string& grid, const std::vector<std::string>& consts) const {
        std::string call;
        for (const auto& a : args) call += (call.empty() ? "" : ", ") + a;
        for (size_t i = 0; i < consts.size(); ++i) call += ", " + constexprs.at(i) + "=" + consts[i];
        return name + "[" + grid + "](" + call + ")";
    }
};

std::string operand_name(const ForwardStep& s, const std::string& key);  // throws std::runtime_error
std::string operand_domain(const ForwardStep& s, const std::string& key);

// The elementwise operators' lines on `t` at flat offsets `offs` under `mask`; `last`: forward's
// expression for the size of the value's last dimension (a bias is indexed by it).
void elementwise_run(const std::vector<const ForwardStep*>& steps, Kernel& k, int level, const std::string& last);
// `x` in forward: the group's input `x_name`, contiguous, in the shape of the views it was taken through.
void load_input(const Group& g, Code& fwd, const std::string& x_name);

void write_elementwise(const Group& g, Kernel& k, Code& fwd, const std::string& x_name);  // no anchor
void write_row(const Group& g, Kernel& k, Code& fwd, const std::string& x_name);          // a row anchor
void write_matmul(const Group& g, Kernel& k, Code& fwd);                                  // a matrix product
void write_conv(const Group& g, Kernel& k, Code& fwd);                                    // a convolution

}  // namespace kz::teach
