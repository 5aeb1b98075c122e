#include "tasks/proposer.h"

#include <gtest/gtest.h>

namespace {

const std::string kTask =
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return "
    "torch.relu(x)\n\n"
    "def get_inputs():\n    return [torch.randn(4, 4)]\n\ndef get_init_inputs():\n    return []\n";

}  // namespace

TEST(ProposerParser, AcceptsExactlyOneTaskFile) {
    auto p = kz::parse_proposal("Here it is:\n```python\n" + kTask + "```\nDone.");
    ASSERT_TRUE(p.ok) << p.reason;
    EXPECT_EQ(p.source, kTask);
    // An unlabelled block and a helper block next to the task are fine.
    p = kz::parse_proposal("```\n" + kTask + "```\n```python\nprint('usage')\n```");
    EXPECT_TRUE(p.ok) << p.reason;
}

TEST(ProposerParser, RefusesWithAReason) {
    struct Case {
        std::string completion, reason;
    } cases[] = {
        {"I cannot do that.", "no ```python code block"},
        {"```python\nprint(1)\n```", "no code block defines class Model"},
        {"```python\n" + kTask + "```\n```python\n" + kTask + "```", "2 code blocks define class Model"},
        {"```python\n" + kTask, "never closes"},
        {"```python\nclass Model:\n    pass\ndef get_inputs():\n    return []\n```", "lacks get_init_inputs()"},
        {"```cpp\n" + kTask + "```", "no ```python code block"},
    };
    for (const auto& c : cases) {
        auto p = kz::parse_proposal(c.completion);
        EXPECT_FALSE(p.ok) << c.completion;
        EXPECT_NE(p.reason.find(c.reason), std::string::npos) << p.reason;
    }
}

TEST(ProposerPrompt, NamesEveryApiAndTheFormat) {
    auto cat = kz::ApiCatalog::load(std::string(KZ_SOURCE_DIR) + "/tasks/api_catalog.json");
    auto msgs = kz::proposer_prompt(cat, {"conv2d", "relu"}, "level 2");
    ASSERT_EQ(msgs.size(), 2u);
    EXPECT_EQ(msgs[0].role, "system");
    EXPECT_NE(msgs[1].content.find("conv2d (torch.nn.Conv2d, convolution)"), std::string::npos);
    EXPECT_NE(msgs[1].content.find("relu"), std::string::npos);
    EXPECT_NE(msgs[1].content.find("exactly one ```python code block"), std::string::npos);
    EXPECT_NE(msgs[1].content.find("Difficulty: level 2"), std::string::npos);
}
