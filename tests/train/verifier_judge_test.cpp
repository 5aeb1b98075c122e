// The trainer's judge on the CPU verifier: a correct candidate in a code block is correct, a
// completion without code is a format_error, a wrong kernel is incorrect; none is an infra error.
#include <gtest/gtest.h>

#include "common/files.h"
#include "train/verifier_judge.h"

namespace {

TEST(VerifierJudge, ExtractsVerifiesAndKeepsVerdicts) {
    const std::string ex = std::string(KZ_SOURCE_DIR) + "/examples/known_good/";
    kz::VerifyOptions vo;
    vo.device = "cpu";
    vo.timing_iters = 2;
    vo.lanes = 2;
    vo.compile_workers = 1;
    kz::Verifier verifier(vo);
    verifier.start();
    kz::VerifierJudge judge(verifier, {kz::read_file(ex + "tasks/relu.py"), kz::read_file(ex + "tasks/softmax.py")},
                            "triton");
    const std::string relu = "Here it is:\n```python\n" + kz::read_file(ex + "triton/relu.py") + "```\n";
    auto out = judge({{0, relu}, {0, "I would rather not."}, {1, relu}});
    ASSERT_EQ(out.size(), 3u);
    ASSERT_EQ(judge.verdicts().size(), 3u);
    EXPECT_TRUE(out[0].correct) << judge.verdicts()[0].reason;
    EXPECT_TRUE(out[0].speedup_eager.has_value());
    EXPECT_FALSE(out[1].correct);
    EXPECT_EQ(judge.verdicts()[1].status, kz::Status::format_error);
    EXPECT_FALSE(out[2].correct);  // relu is not softmax
    EXPECT_EQ(judge.verdicts()[2].status, kz::Status::incorrect) << judge.verdicts()[2].reason;
    for (const auto& o : out) EXPECT_FALSE(o.infra_error);
    EXPECT_THROW(judge({{5, relu}}), std::out_of_range);
}

}  // namespace
