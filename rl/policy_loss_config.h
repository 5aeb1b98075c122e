// The policy loss's settings (rl/policy_loss.h), in a header of their own so that configuration code
// (train/train_config.h) can hold them without torch.
#pragma once

namespace kz {

struct PolicyLossConfig {
    double eps_low = 0.2, eps_high = 0.28;  // ratio clipped to [1 - eps_low, 1 + eps_high]
    double kl_beta = 0.0;                   // weight of the k3 KL to the reference policy
    void validate() const;                  // throws std::invalid_argument; in policy_loss.cpp
};

}  // namespace kz
