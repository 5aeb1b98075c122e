// The tokenizer is shared by the server's HTTP threads: encoding from several threads at once must
// give what encoding one text at a time gives (its piece cache is shared; an unguarded cache once hung
// `kernelzero serve` in a busy loop under four concurrent requests).
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "common/files.h"
#include "engine/tokenizer.h"

TEST(TokenizerThreads, ConcurrentEncodingMatchesSerial) {
    const std::string src = KZ_SOURCE_DIR;
    std::vector<std::string> texts;
    for (const auto& e : std::filesystem::directory_iterator(src + "/examples/known_good/triton"))
        texts.push_back(kz::read_file(e.path().string()));
    for (const auto& e : std::filesystem::directory_iterator(src + "/examples/known_good/tasks"))
        texts.push_back(kz::read_file(e.path().string()));
    std::vector<std::vector<int64_t>> want;
    {
        kz::Tokenizer serial = kz::Tokenizer::load(src + "/data/qwen2.5-tokenizer");
        for (const auto& t : texts) want.push_back(serial.encode(t));
    }
    kz::Tokenizer shared = kz::Tokenizer::load(src + "/data/qwen2.5-tokenizer");  // a cold cache
    std::vector<std::vector<std::vector<int64_t>>> got(4, std::vector<std::vector<int64_t>>(texts.size()));
    std::vector<std::thread> threads;
    for (size_t k = 0; k < got.size(); ++k)
        threads.emplace_back([&, k] {
            for (int round = 0; round < 3; ++round)
                for (size_t i = 0; i < texts.size(); ++i) {
                    const size_t j = (i + 5 * k + round) % texts.size();  // each thread from its own start
                    auto ids = shared.encode(texts[j]);
                    if (round == 2) got[k][j] = std::move(ids);
                }
        });
    for (auto& t : threads) t.join();
    for (size_t k = 0; k < got.size(); ++k)
        for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(got[k][i], want[i]) << "thread " << k << ", text " << i;
}
