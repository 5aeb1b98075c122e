// The generator's operator graph and the teacher's grouping (the kernels themselves are judged by
// the verifier in test_teach.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <sstream>

#include "tasks/api_catalog.h"
#include "tasks/symbolic.h"
#include "tasks/symbolic_builder.h"
#include "teach/teacher.h"

namespace {

const kz::ApiCatalog& catalog() {
    static const kz::ApiCatalog c = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
    return c;
}

kz::GeneratedTask task_of(const std::vector<std::string>& apis, int level, uint64_t seed = 1) {
    std::mt19937_64 rng(seed);
    return kz::generate_task(catalog(), kz::ApiSet{apis, level}, kz::SizeProfile::small, rng);
}

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST(GeneratorGraph, StepsAreTheForwardLinesAndReadEarlierValues) {
    std::mt19937_64 rng(11);
    for (int i = 0; i < 600; ++i) {
        kz::ApiSet set = kz::sample_api_set(catalog(), 1 + i % 2, rng);
        kz::GeneratedTask t = kz::generate_task(catalog(), set, kz::SizeProfile::small, rng);
        std::string body;
        std::set<std::string> known(t.inputs.begin(), t.inputs.end());
        std::vector<std::string> ops;
        for (const auto& s : t.steps) {
            body += "        " + s.output + " = " + s.expr + "\n";
            if (!s.is_op) {
                known.insert(s.output);
                continue;
            }
            ops.push_back(s.api);
            ASSERT_TRUE(s.operands.count("x") || s.operands.count("q") || s.kind == "diag_matmul") << s.api << " in\n"
                                                                                                   << t.source;
            for (const auto& [key, operand] : s.operands)
                EXPECT_TRUE(known.count(operand.name)) << s.api << " reads " << operand.name << " before it exists";
            known.insert(s.output);
        }
        EXPECT_NE(t.source.find(body + "        return " + t.result + "\n"), std::string::npos) << t.source;
        EXPECT_EQ(ops, t.apis);
    }
}

TEST(GeneratorGraph, OperandsCarryTheirDomain) {
    kz::GeneratedTask t = task_of({"div"}, 1);
    const kz::ForwardStep& s = t.steps.back();
    ASSERT_TRUE(s.is_op);
    EXPECT_EQ(s.operands.at("x").domain, "positive");
    EXPECT_EQ(s.operands.at("y").domain, "positive");
    EXPECT_EQ(s.operands.at("y").name, t.inputs.back());
}

TEST(Teacher, NaiveWritesAKernelPerOperatorAndFusedFusesAroundAnAnchor) {
    // linear -> relu -> softmax -> exp: naive 4 kernels; fused: linear+relu, softmax+exp.
    kz::GeneratedTask t = task_of({"linear", "relu", "softmax", "exp"}, 2);
    kz::TeacherCandidate naive = kz::teach_triton(t, kz::TeacherQuality::naive);
    kz::TeacherCandidate fused = kz::teach_triton(t, kz::TeacherQuality::fused);
    ASSERT_TRUE(naive.written && fused.written);
    EXPECT_EQ(naive.kernels, 4);
    EXPECT_EQ(fused.kernels, 2);
    EXPECT_EQ(count(fused.source, "_kernel[("), 2) << "launches in forward";
    EXPECT_NE(fused.source.find("class ModelNew(nn.Module)"), std::string::npos);
    EXPECT_NE(fused.source.find("self.m0 = nn.Linear("), std::string::npos) << "the reference's parameters by name";
}

TEST(Teacher, EachKernelAndItsLaunchNameTheModuleLinesTheyCompute) {
    // The comment above a kernel and above its launch in forward: the module's lines, verbatim.
    kz::GeneratedTask t = task_of({"linear", "relu", "softmax", "exp"}, 2);
    std::vector<std::string> op_lines;
    for (const auto& s : t.steps)
        if (s.is_op) op_lines.push_back("# " + s.output + " = " + s.expr);
    ASSERT_EQ(op_lines.size(), 4u);
    for (auto q : {kz::TeacherQuality::naive, kz::TeacherQuality::fused}) {
        kz::TeacherCandidate c = kz::teach_triton(t, q);
        ASSERT_TRUE(c.written);
        std::vector<std::string> above_kernels, in_forward, defs;
        std::istringstream in(c.source);
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        for (size_t i = 0; i < lines.size(); ++i) {
            const std::string& line = lines[i];
            if (line.rfind("# ", 0) == 0) above_kernels.push_back(line);
            if (line.rfind("        # ", 0) == 0) in_forward.push_back(line.substr(8));
            if (line.rfind("def ", 0) == 0 && line.find("_kernel(") != std::string::npos) {
                defs.push_back(line);
                ASSERT_GE(i, 2u);
                EXPECT_EQ(lines[i - 2].rfind("# ", 0), 0u) << "a kernel without its line:\n" << c.source;
            }
        }
        EXPECT_EQ(above_kernels, op_lines) << c.source;
        EXPECT_EQ(in_forward, op_lines) << c.source;
        if (q == kz::TeacherQuality::naive) {
            ASSERT_EQ(defs.size(), 4u);
            for (size_t i = 0; i < defs.size(); ++i) EXPECT_EQ(defs[i].rfind("def " + t.apis[i] + "_kernel(", 0), 0u);
        }
    }
}

TEST(Teacher, ModulesTakeTheirSizesAsConstructorArgumentsAsKernelBenchWritesThem) {
    // conv2d's line names its sizes with the module's constructor arguments, whose names each module
    // draws (as KernelBench's modules name them variously); the numbers are get_init_inputs' values.
    // The teacher's constructor is the module's, names included.
    const auto& names = kz::constructor_argument_names();
    const std::vector<std::string> keys = {"c_in", "c_out", "kernel", "stride", "padding"};
    std::set<std::string> signatures, values;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
        kz::GeneratedTask t = task_of({"conv2d", "relu"}, 2, seed);
        ASSERT_EQ(t.init.size(), 1u);
        const std::vector<std::string>& a = t.init_args;
        ASSERT_EQ(a.size(), keys.size()) << t.source;
        for (size_t i = 0; i < keys.size(); ++i) {
            const std::vector<std::string>& allowed = names.at(keys[i]);
            EXPECT_NE(std::find(allowed.begin(), allowed.end(), a[i]), allowed.end()) << keys[i] << ": " << a[i];
        }
        EXPECT_EQ(t.init[0], "self.m0 = nn.Conv2d(" + a[0] + ", " + a[1] + ", kernel_size=" + a[2] +
                                 ", stride=" + a[3] + ", padding=" + a[4] + ")");
        const std::string signature = "    def __init__(" + kz::init_signature(a) + "):\n";
        signatures.insert(signature);
        EXPECT_NE(t.source.find(signature), std::string::npos) << t.source;
        const size_t at = t.source.find("def get_init_inputs():\n    return [");
        ASSERT_NE(at, std::string::npos) << t.source;
        values.insert(t.source.substr(at, t.source.find(']', at) - at));
        kz::TeacherCandidate c = kz::teach_triton(t, kz::TeacherQuality::naive);
        ASSERT_TRUE(c.written);
        EXPECT_NE(c.source.find(signature + "        super().__init__()\n        " + t.init[0] + "\n"),
                  std::string::npos)
            << c.source;
    }
    EXPECT_GT(signatures.size(), 2u) << "the names vary between modules";
    EXPECT_GT(values.size(), 1u) << "the sizes still vary between draws";
    // No two keys share a name: they would merge into one argument.
    std::set<std::string> all;
    size_t n = 0;
    for (const auto& [key, list] : names) {
        EXPECT_EQ(list.front(), key);
        all.insert(list.begin(), list.end());
        n += list.size();
    }
    EXPECT_EQ(all.size(), n);
    // A dimension is an argument too, and the teacher's launcher names it.
    kz::GeneratedTask rows = task_of({"relu", "softmax"}, 1);
    ASSERT_EQ(rows.init_args.size(), 1u);
    const std::string& d = rows.init_args[0];
    const std::vector<std::string>& dims = names.at("dim");
    EXPECT_NE(std::find(dims.begin(), dims.end(), d), dims.end()) << d;
    EXPECT_NE(rows.source.find("    def __init__(self, " + d + "):\n        super().__init__()\n        self." + d +
                               " = " + d + "\n"),
              std::string::npos)
        << rows.source;
    EXPECT_NE(rows.source.find(", dim=self." + d + ")"), std::string::npos) << rows.source;
    kz::TeacherCandidate c = kz::teach_triton(rows, kz::TeacherQuality::fused);
    ASSERT_TRUE(c.written);
    const std::string attr = "self." + d;
    EXPECT_NE(
        c.source.find("x.shape[:" + attr + "].numel(), x.shape[" + attr + "], x.shape[" + attr + " + 1:].numel()"),
        std::string::npos)
        << c.source;
    // Without a module or a dimension, no arguments.
    EXPECT_TRUE(task_of({"relu", "exp"}, 1).init_args.empty());
    EXPECT_NE(task_of({"relu", "exp"}, 1).source.find("def __init__(self):"), std::string::npos);
}

TEST(Teacher, AConstructorArgumentTakenWithAnotherValueIsNumbered) {
    std::mt19937_64 rng(1);
    kz::symbolic::Builder b(kz::SizeProfile::small, rng);
    EXPECT_EQ(b.init_arg("kernel", "3"), "kernel");
    EXPECT_EQ(b.init_arg("kernel", "3"), "kernel") << "one argument for one value";
    EXPECT_EQ(b.init_arg("kernel", "5"), "kernel2");
    EXPECT_EQ(b.init_arg("stride", "1"), "stride");
    EXPECT_EQ(b.init_arg("kernel", "5"), "kernel2");
    EXPECT_EQ(b.init_arg("kernel", "7"), "kernel3");
    using Arg = std::pair<std::string, std::string>;
    EXPECT_EQ(b.init_args, (std::vector<Arg>{{"kernel", "3"}, {"kernel2", "5"}, {"stride", "1"}, {"kernel3", "7"}}));
}

TEST(Teacher, AConvolutionTakesItsEpilogue) {
    kz::GeneratedTask t = task_of({"conv2d", "relu", "add_scalar"}, 2);
    EXPECT_EQ(kz::teach_triton(t, kz::TeacherQuality::naive).kernels, 3);
    EXPECT_EQ(kz::teach_triton(t, kz::TeacherQuality::fused).kernels, 1);
}

TEST(Teacher, ElementwiseBeforeARowOperatorIsItsPrologue) {
    kz::GeneratedTask t = task_of({"abs", "neg", "softmax"}, 1);
    kz::TeacherCandidate fused = kz::teach_triton(t, kz::TeacherQuality::fused);
    ASSERT_TRUE(fused.written);
    EXPECT_EQ(fused.kernels, 1) << fused.source;
}

TEST(Teacher, NamesTheOperatorItCannotWrite) {
    kz::TeacherCandidate c = kz::teach_triton(task_of({"conv_transpose2d", "relu"}, 2), kz::TeacherQuality::fused);
    EXPECT_FALSE(c.written);
    EXPECT_EQ(c.unsupported, "conv_transpose2d");
    EXPECT_FALSE(kz::teacher_supports("max_pool2d"));
    EXPECT_TRUE(kz::teacher_supports("conv2d"));
    EXPECT_TRUE(kz::teacher_supports("layer_norm"));
    EXPECT_THROW(kz::parse_quality("best"), std::invalid_argument);
}

TEST(Teacher, DrawsFromItsSupportedSubsetAreAllWritten) {
    const kz::ApiCatalog supported =
        catalog().subset([](const kz::ApiSpec& a) { return kz::teacher_supports(a.name); });
    ASSERT_LT(supported.apis().size(), catalog().apis().size());
    EXPECT_TRUE(supported.in_category("loss").empty());  // level 2 draws then add no loss
    std::mt19937_64 rng(11);
    for (int i = 0; i < 200; ++i) {
        kz::ApiSet set = kz::sample_api_set(supported, 1 + i % 2, rng);
        kz::GeneratedTask t = kz::generate_task(supported, set, kz::SizeProfile::small, rng);
        kz::TeacherCandidate c = kz::teach_triton(t, kz::TeacherQuality::naive);
        // A layout operator alone (a level-1 flatten) moves no arithmetic: nothing to write.
        EXPECT_TRUE(c.written || c.unsupported == "no operator with arithmetic") << c.unsupported;
    }
    const kz::ApiCatalog none = catalog().subset([](const kz::ApiSpec& a) { return a.category == "activation"; });
    EXPECT_THROW(kz::sample_api_set(none, 2, rng), std::runtime_error);  // no heavy operator to draw
}
