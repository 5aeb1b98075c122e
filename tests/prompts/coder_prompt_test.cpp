// The Coder prompt files and the extraction of a candidate from a completion, on well-formed and
// malformed completions.
#include <gtest/gtest.h>

#include "prompts/coder_prompt.h"

namespace {

using kz::extract_candidate;

const std::string kModel = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n";

TEST(CoderPrompt, EveryFormatLoadsAndTakesTheTask) {
    for (auto f : {kz::CoderFormat::triton, kz::CoderFormat::cuda_nvrtc, kz::CoderFormat::cuda_inline}) {
        auto p = kz::CoderPrompt::load(f);
        EXPECT_EQ(p.version(), kz::kCoderPromptVersion);
        auto msgs = p.messages("class Model:\n    MARKER_42\n");
        ASSERT_EQ(msgs.size(), 2u);
        EXPECT_EQ(msgs[0].role, "system");
        EXPECT_EQ(msgs[1].role, "user");
        EXPECT_NE(msgs[1].content.find("MARKER_42"), std::string::npos);
        EXPECT_EQ(msgs[1].content.find("{task}"), std::string::npos);
        EXPECT_NE(msgs[1].content.find("ModelNew"), std::string::npos);
        // The worked example in the prompt is itself extractable (it defines ModelNew in a block).
        EXPECT_TRUE(extract_candidate(msgs[1].content).ok()) << kz::format_name(f);
    }
    EXPECT_THROW(kz::CoderPrompt::load(kz::CoderFormat::triton, "no-such-version"), std::runtime_error);
}

TEST(CoderPrompt, FormatNames) {
    EXPECT_EQ(kz::coder_format("triton", ""), kz::CoderFormat::triton);
    EXPECT_EQ(kz::coder_format("cuda", ""), kz::CoderFormat::cuda_nvrtc);
    EXPECT_EQ(kz::coder_format("cuda", "inline"), kz::CoderFormat::cuda_inline);
    EXPECT_THROW(kz::coder_format("triton", "inline"), std::invalid_argument);
    EXPECT_THROW(kz::coder_format("metal", ""), std::invalid_argument);
}

struct Case {
    const char* name;
    std::string completion;
    bool ok;
    std::string expect;  // the extracted source, or a word of the reason
};

TEST(Extraction, Corpus) {
    const std::vector<Case> cases = {
        {"plain block", "Here:\n```python\n" + kModel + "```\n", true, kModel},
        {"no language tag", "```\n" + kModel + "```", true, kModel},
        {"py tag", "```py\n" + kModel + "```\nDone.", true, kModel},
        {"last block wins", "```python\nclass ModelNew: old = 1\n```\ntext\n```python\n" + kModel + "```\n", true,
         kModel},
        {"last defining block, not the last block", "```python\n" + kModel + "```\n```python\nprint(1)\n```\n", true,
         kModel},
        {"trailing spaces on fences", "```python  \n" + kModel + "```   \n", true, kModel},
        {"indented fences", "  ```python\n" + kModel + "  ```\n", true, kModel},
        {"other language blocks ignored", "```cpp\nclass ModelNew {};\n```\n```python\n" + kModel + "```\n", true,
         kModel},
        {"no block", "I cannot do that.", false, "no Python code block"},
        {"empty completion", "", false, "no Python code block"},
        {"unclosed block", "```python\n" + kModel, false, "not closed"},
        {"block without ModelNew", "```python\nclass Model:\n    pass\n```\n", false, "ModelNew"},
        {"ModelNew only in prose", "class ModelNew is below\n```python\nx = 1\n```", false, "ModelNew"},
        {"ModelNewer is not ModelNew", "```python\nclass ModelNewer:\n    pass\n```", false, "ModelNew"},
        {"only a cpp block", "```cpp\nclass ModelNew {};\n```", false, "no Python code block"},
        {"closed block then unclosed", "```python\n" + kModel + "```\n```python\nclass ModelNew:\n", true, kModel},
    };
    for (const auto& c : cases) {
        auto ex = extract_candidate(c.completion);
        EXPECT_EQ(ex.ok(), c.ok) << c.name << ": " << ex.reason;
        if (c.ok)
            EXPECT_EQ(ex.source, c.expect) << c.name;
        else
            EXPECT_NE(ex.reason.find(c.expect), std::string::npos) << c.name << ": " << ex.reason;
    }
}

TEST(Extraction, TheAnswerOfACandidateGivesItBack) {
    const std::string src = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n";
    EXPECT_EQ(kz::coder_answer(src), "```python\n" + src + "```");
    EXPECT_EQ(kz::extract_candidate(kz::coder_answer(src)).source, src);
    // A source without a final newline still closes its block on a line of its own.
    EXPECT_EQ(kz::extract_candidate(kz::coder_answer(src.substr(0, src.size() - 1))).source, src);
}

}  // namespace
