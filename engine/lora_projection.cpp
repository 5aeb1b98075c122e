#include "engine/lora_projection.h"

#include <optional>
#include <stdexcept>
#include <string>

namespace kz {

namespace {

constexpr size_t kMaxParts = 3;  // q|k|v

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Layout {
    std::vector<double> scales;
    std::vector<int64_t> widths;
};

// The adapted parts: their column offset in y, their row offset in the stacked A, their rank.
struct Adapted {
    size_t part;
    int64_t col, row, rank;
};

std::vector<Adapted> adapted(const variable_list& ab, const std::vector<int64_t>& widths) {
    std::vector<Adapted> out;
    int64_t col = 0, row = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
        if (ab[2 * i].defined()) {
            const int64_t r = ab[2 * i].size(0);
            out.push_back({i, col, row, r});
            row += r;
        }
        col += widths[i];
    }
    return out;
}

// The adapted parts' A stacked: (R, C) in dtype dt.
torch::Tensor stacked_a(const variable_list& ab, const std::vector<Adapted>& parts, torch::ScalarType dt) {
    std::vector<torch::Tensor> as;
    for (const auto& p : parts) as.push_back(ab[2 * p.part].to(dt));
    return as.size() == 1 ? as[0] : torch::cat(as, 0);
}

torch::Tensor tensor(const std::optional<torch::Tensor>& t) { return t.value_or(torch::Tensor()); }

std::optional<torch::Tensor> optional(const torch::Tensor& t) { return t.defined() ? std::optional(t) : std::nullopt; }

struct LoraProjectionFn : public torch::autograd::Function<LoraProjectionFn> {
    // ab = a0, b0, a1, b1, a2, b2 (undefined past the parts, or where a part has no adapter).
    // Undefined tensors go in as empty optionals: autograd records every tensor argument's device.
    using Opt = std::optional<torch::Tensor>;
    static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight, Opt bias, Opt a0, Opt b0,
                                 Opt a1, Opt b1, Opt a2, Opt b2, std::vector<double> scales,
                                 std::vector<int64_t> widths, int64_t lora_dtype) {
        const auto dt = static_cast<torch::ScalarType>(lora_dtype);
        const variable_list ab{tensor(a0), tensor(b0), tensor(a1), tensor(b1), tensor(a2), tensor(b2)};
        const int64_t C = x.size(-1);
        auto x2 = x.reshape({-1, C});                                     // (N, C)
        auto y = torch::nn::functional::linear(x, weight, tensor(bias));  // (..., O): returned as is, not a view
        auto y2 = y.view({-1, weight.size(0)});                           // (N, O)
        const auto parts = adapted(ab, widths);
        torch::Tensor h;  // (N, R): x A^T of every adapted part, side by side
        if (!parts.empty()) {
            h = x2.to(dt).mm(stacked_a(ab, parts, dt).t());
            for (const auto& p : parts) {
                auto hp = h.narrow(1, p.row, p.rank);           // (N, r)
                auto bp = ab[2 * p.part + 1].to(dt);            // (o, r)
                auto yp = y2.narrow(1, p.col, widths[p.part]);  // (N, o), a column block of y
                // In y's dtype the update goes in with the product (one rounding of the fp32 sum);
                // otherwise the fp32 product is added in fp32 arithmetic and rounded once.
                if (dt == y2.scalar_type())
                    yp.addmm_(hp, bp.t(), 1.0, scales[p.part]);
                else
                    yp.add_(hp.mm(bp.t()), scales[p.part]);
            }
        }
        ctx->save_for_backward({x, weight, h, ab[0], ab[1], ab[2], ab[3], ab[4], ab[5]});
        ctx->saved_data["scales"] = scales;
        ctx->saved_data["widths"] = widths;
        ctx->saved_data["dtype"] = lora_dtype;
        return y;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
        const auto saved = ctx->get_saved_variables();
        const auto& x = saved[0];
        const auto& weight = saved[1];
        const auto& h = saved[2];  // (N, R)
        const variable_list ab(saved.begin() + 3, saved.end());
        const auto scales = ctx->saved_data["scales"].toDoubleVector();
        const auto widths = ctx->saved_data["widths"].toIntVector();
        const auto dt = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
        const int64_t C = x.size(-1);
        auto g = grad_out[0].reshape({-1, weight.size(0)});  // (N, O)
        variable_list grads(12);
        const auto parts = adapted(ab, widths);
        torch::Tensor dh;  // (N, R)
        if (!parts.empty()) {
            std::vector<torch::Tensor> dhs;
            for (const auto& p : parts) {
                const double s = scales[p.part];
                auto gp = g.narrow(1, p.col, widths[p.part]).to(dt);  // (N, o)
                const auto& b = ab[2 * p.part + 1];
                grads[3 + 2 * p.part + 1] =
                    gp.t().mm(h.narrow(1, p.row, p.rank)).mul_(s).to(b.scalar_type());  // (o, r)
                dhs.push_back(gp.mm(b.to(dt)).mul_(s));                                 // (N, r)
            }
            dh = dhs.size() == 1 ? dhs[0] : torch::cat(dhs, 1);
            auto da = dh.t().mm(x.reshape({-1, C}).to(dt));  // (R, C)
            for (const auto& p : parts)
                grads[3 + 2 * p.part] = da.narrow(0, p.row, p.rank).to(ab[2 * p.part].scalar_type());
        }
        if (ctx->needs_input_grad(0)) {
            auto dx = g.mm(weight);  // (N, C)
            // With fp32 products: added in fp32 arithmetic and rounded once.
            if (dh.defined()) dx.add_(dh.mm(stacked_a(ab, parts, dt)));
            grads[0] = dx.view(x.sizes());
        }
        return grads;
    }
};

}  // namespace

torch::Tensor lora_projection(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              const std::vector<LoraPart>& parts, torch::ScalarType lora_dtype) {
    if (parts.empty() || parts.size() > kMaxParts)
        throw std::logic_error("lora_projection takes 1 to 3 layers, got " + std::to_string(parts.size()));
    if (weight.requires_grad() || (bias.defined() && bias.requires_grad()))
        throw std::logic_error("lora_projection needs a frozen base weight");
    variable_list ab(2 * kMaxParts);
    std::vector<double> scales;
    std::vector<int64_t> widths;
    int64_t total = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
        const auto& p = parts[i];
        if (p.a.defined() != p.b.defined()) throw std::logic_error("a LoRA part needs both A and B");
        if (p.a.defined() && (p.b.size(0) != p.width || p.b.size(1) != p.a.size(0) || p.a.size(1) != x.size(-1)))
            throw std::logic_error("LoRA part " + std::to_string(i) + ": A and B do not fit its width and x");
        ab[2 * i] = p.a;
        ab[2 * i + 1] = p.b;
        scales.push_back(p.scale);
        widths.push_back(p.width);
        total += p.width;
    }
    if (total != weight.size(0))
        throw std::logic_error("lora_projection: the parts' widths (" + std::to_string(total) +
                               ") do not add up to the weight's rows (" + std::to_string(weight.size(0)) + ")");
    return LoraProjectionFn::apply(x, weight, optional(bias), optional(ab[0]), optional(ab[1]), optional(ab[2]),
                                   optional(ab[3]), optional(ab[4]), optional(ab[5]), scales, widths,
                                   static_cast<int64_t>(lora_dtype));
}

}  // namespace kz
