// The rule that picks a decode GEMM's algorithm from its candidates' times (no GPU needed): the
// heuristic's first unless another is clearly faster, and stable under small timing noise.
#include <gtest/gtest.h>

#include "engine/decode_gemm.h"

using kz::cuda::decode_gemm_choice;

TEST(DecodeGemmChoice, KeepsTheFirstUnlessAnotherIsThreePercentFaster) {
    EXPECT_EQ(decode_gemm_choice({1.0f, 0.99f, 0.98f}), 0u);
    EXPECT_EQ(decode_gemm_choice({1.0f, 0.975f}), 0u);
    EXPECT_EQ(decode_gemm_choice({1.0f, 0.9f, 0.95f}), 1u);
    EXPECT_EQ(decode_gemm_choice({1.0f}), 0u);
}

TEST(DecodeGemmChoice, TakesTheFirstInOrderWithinOnePercentOfTheFastest) {
    EXPECT_EQ(decode_gemm_choice({1.0f, 0.955f, 0.95f}), 1u);  // 0.955 is within 1% of 0.95
    EXPECT_EQ(decode_gemm_choice({1.0f, 0.97f, 0.95f}), 2u);   // 0.97 is not
    // Noise between two near-equal candidates does not change the pick.
    EXPECT_EQ(decode_gemm_choice({1.0f, 0.931f, 0.93f}), decode_gemm_choice({1.0f, 0.93f, 0.931f}));
}

TEST(DecodeGemmChoice, SkipsCandidatesThatDidNotRun) {
    EXPECT_EQ(decode_gemm_choice({-1.0f, 1.0f, 0.9f}), 2u);
    EXPECT_EQ(decode_gemm_choice({-1.0f, 1.0f, 1.005f}), 1u);
    EXPECT_EQ(decode_gemm_choice({1.0f, -1.0f, 0.99f}), 0u);
    EXPECT_EQ(decode_gemm_choice({-1.0f, -1.0f}), 0u);
    EXPECT_EQ(decode_gemm_choice({}), 0u);
}
