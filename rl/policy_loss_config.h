// The policy loss's settings (rl/policy_loss.h), in a header of their own so that configuration code
// (train/train_config.h) can hold them without torch.
#pragma once

#include <string>

namespace kz {

struct PolicyLossConfig {
    double eps_low = 0.2, eps_high = 0.28;  // ratio clipped to [1 - eps_low, 1 + eps_high]
    double kl_beta = 0.0;                   // weight of the KL to the reference policy
    // The KL's per-token estimator: "k3", exp(d) - d - 1 with d = log(pi_ref / pi), whose gradient
    // (1 - pi_ref / pi) d log pi weighs a sampled token the policy finds unlikely and the reference
    // likely without bound; "k3_clamped", k3 clamped to at most kKlClamp as verl's low_var_kl is,
    // which gives such tokens no gradient; or "k3+", k3's value with k2's gradient
    // (logp - logp_ref) d log pi as verl's k3+ is, a pull that grows linearly with the distance
    // (less than k3's at every distance below the reference, so it wants a larger kl_beta).
    std::string kl_estimator = "k3";
    static constexpr double kKlClamp = 10.0;
    void validate() const;  // throws std::invalid_argument; in policy_loss.cpp
};

}  // namespace kz
