#include "rl/policy_loss.h"

#include <stdexcept>

namespace kz {

void PolicyLossConfig::validate() const {
    if (!(eps_low >= 0 && eps_low < 1)) throw std::invalid_argument("eps_low must be in [0, 1)");
    if (!(eps_high >= 0)) throw std::invalid_argument("eps_high must be >= 0");
    if (!(kl_beta >= 0)) throw std::invalid_argument("kl_beta must be >= 0");
    if (kl_estimator != "k3" && kl_estimator != "k3_clamped" && kl_estimator != "k3+")
        throw std::invalid_argument("kl_estimator must be k3, k3_clamped or k3+, not '" + kl_estimator + "'");
}

torch::Tensor policy_loss(const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& ref_logp,
                          const torch::Tensor& advantages, const torch::Tensor& mask, const PolicyLossConfig& cfg,
                          PolicyLossStats* stats) {
    cfg.validate();
    if (logp.dim() != 2 || old_logp.sizes() != logp.sizes() || mask.sizes() != logp.sizes())
        throw std::invalid_argument("policy_loss: logp, old_logp and mask must all be (N, L)");
    if (advantages.dim() != 1 || advantages.size(0) != logp.size(0))
        throw std::invalid_argument("policy_loss: advantages must be (N), one per completion");
    if (cfg.kl_beta > 0 && (!ref_logp.defined() || ref_logp.sizes() != logp.sizes()))
        throw std::invalid_argument("policy_loss: kl_beta > 0 needs ref_logp (N, L)");
    auto lp = logp.to(torch::kFloat32);
    auto m = mask.to(lp.device(), torch::kFloat32);                           // (N, L)
    auto a = advantages.to(lp.device(), torch::kFloat32).unsqueeze(1);        // (N, 1)
    auto ratio = torch::exp(lp - old_logp.to(lp.device(), torch::kFloat32));  // (N, L)
    auto clipped = ratio.clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high);
    auto policy = -torch::min(ratio * a, clipped * a);  // (N, L)
    auto per_token = policy;
    torch::Tensor kl, k3;
    if (cfg.kl_beta > 0) {
        auto d = ref_logp.to(lp.device(), torch::kFloat32) - lp;  // log(pi_ref / pi)
        k3 = torch::exp(d) - d - 1.0;                             // unbiased, >= 0
        if (cfg.kl_estimator == "k3_clamped") {
            kl = k3.clamp_max(PolicyLossConfig::kKlClamp);
        } else if (cfg.kl_estimator == "k3+") {
            auto k2 = 0.5 * d.square();  // its gradient, (logp - logp_ref) d logp, is the one kept
            kl = k3.detach() + (k2 - k2.detach());
        } else {
            kl = k3;
        }
        per_token = per_token + cfg.kl_beta * kl;
    }
    auto count = m.sum().clamp_min(1.0);
    auto loss = (per_token * m).sum() / count;
    if (stats) {
        torch::NoGradGuard no_grad;
        stats->loss = loss.item<double>();
        stats->policy = ((policy * m).sum() / count).item<double>();
        stats->kl = kl.defined() ? ((kl * m).sum() / count).item<double>() : 0.0;
        stats->kl_max = 0.0;
        if (k3.defined() && k3.numel() > 0) {
            auto masked = (k3 * m).flatten();
            const int64_t at = masked.argmax().item<int64_t>();
            auto value = [&](const torch::Tensor& t) { return t.flatten()[at].to(lp.device(), torch::kFloat32); };
            auto peak = torch::stack({masked[at], value(lp.detach()), value(old_logp), value(ref_logp)})
                            .to(torch::kCPU, torch::kFloat64);
            stats->kl_max = peak[0].item<double>();
            stats->kl_max_row = at / logp.size(1), stats->kl_max_col = at % logp.size(1);
            stats->kl_max_logp = peak[1].item<double>();
            stats->kl_max_old_logp = peak[2].item<double>();
            stats->kl_max_ref_logp = peak[3].item<double>();
        }
        stats->clip_fraction = (((ratio != clipped).to(torch::kFloat32) * m).sum() / count).item<double>();
        stats->tokens = m.sum().item<double>();
    }
    return loss;
}

}  // namespace kz
