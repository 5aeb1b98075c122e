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
    // likely without bound; or "k3_clamped", k3 clamped to at most kKlClamp as verl's low_var_kl is,
    // which gives such tokens no gradient.
    std::string kl_estimator = "k3";
    static constexpr double kKlClamp = 10.0;
    void validate() const;  // throws std::invalid_argument; in policy_loss.cpp
};

}  // namespace kz
