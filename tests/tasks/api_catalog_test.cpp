#include "tasks/api_catalog.h"
#include "tasks/symbolic.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

using json = nlohmann::json;

namespace {

kz::ApiCatalog shipped() { return kz::ApiCatalog::load(std::string(KZ_SOURCE_DIR) + "/tasks/api_catalog.json"); }

json minimal_api(const std::string& name) {
    return {{"name", name}, {"torch", "torch.relu"}, {"category", "activation"},     {"kind", "same"},
            {"arity", 1},   {"rank", {1, 5}},        {"template", "torch.relu({x})"}};
}

std::string load_error(json api) {
    try {
        kz::ApiCatalog::from_json({{"apis", {std::move(api)}}}, "cat.json");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(ApiCatalog, ShippedCatalogLoadsAndIsLargeEnough) {
    auto c = shipped();
    EXPECT_GE(c.apis().size(), 120u);
    for (const auto& cat : kz::ApiCatalog::categories()) EXPECT_FALSE(c.in_category(cat).empty()) << cat;
}

TEST(ApiCatalog, CoversKernelBenchOperatorFamilies) {
    auto c = shipped();
    // Level 1 and 2 families: matmul variants, 1-3D (transposed) convolutions, pooling, norms,
    // activations, reductions, softmax / log-softmax, scans, losses, attention.
    for (const char* n : {"matmul",
                          "bmm",
                          "matvec",
                          "mm_transposed_a",
                          "mm_transposed_b",
                          "tril_matmul",
                          "diag_matmul",
                          "linear",
                          "conv1d",
                          "conv2d",
                          "conv3d",
                          "conv2d_depthwise",
                          "conv2d_grouped",
                          "conv_transpose1d",
                          "conv_transpose2d",
                          "conv_transpose3d",
                          "max_pool1d",
                          "max_pool2d",
                          "max_pool3d",
                          "avg_pool1d",
                          "avg_pool2d",
                          "avg_pool3d",
                          "batch_norm2d",
                          "layer_norm",
                          "group_norm",
                          "instance_norm2d",
                          "rms_norm",
                          "frobenius_norm",
                          "l1_normalize",
                          "relu",
                          "gelu",
                          "sigmoid",
                          "tanh",
                          "softplus",
                          "hardtanh",
                          "elu",
                          "selu",
                          "silu",
                          "sum",
                          "mean",
                          "amax",
                          "amin",
                          "prod",
                          "argmax",
                          "argmin",
                          "softmax",
                          "log_softmax",
                          "cumsum",
                          "cumprod",
                          "reverse_cumsum",
                          "exclusive_cumsum",
                          "mse_loss",
                          "cross_entropy",
                          "smooth_l1_loss",
                          "kl_div",
                          "hinge_loss",
                          "triplet_margin_loss",
                          "cosine_similarity_loss",
                          "sdpa"}) {
        EXPECT_NE(c.find(n), nullptr) << n;
    }
}

TEST(ApiCatalog, EveryApiIsWellFormed) {
    auto c = shipped();
    std::set<std::string> names;
    for (const auto& a : c.apis()) {
        EXPECT_TRUE(names.insert(a.name).second) << a.name;
        EXPECT_EQ(a.torch_api.rfind("torch.", 0), 0u) << a.name;
        EXPECT_FALSE(a.tmpl.empty()) << a.name;
    }
}

TEST(ApiCatalog, BadEntriesAreNamed) {
    EXPECT_EQ(load_error(minimal_api("ok")), "");
    auto a = minimal_api("k");
    a["kind"] = "teleport";
    EXPECT_NE(load_error(a).find("api k: unknown kind teleport"), std::string::npos);
    a = minimal_api("ar");
    a["arity"] = 2;
    EXPECT_NE(load_error(a).find("api ar: template uses 1 operands, arity says 2"), std::string::npos);
    a = minimal_api("mod");
    a["module"] = "nn.ReLU()";
    EXPECT_NE(load_error(a).find("api mod: template and module disagree"), std::string::npos);
    a = minimal_api("cat");
    a["category"] = "magic";
    EXPECT_NE(load_error(a).find("unknown category magic"), std::string::npos);
    a = minimal_api("r");
    a["rank"] = {4, 2};
    EXPECT_NE(load_error(a).find("api r: rank"), std::string::npos);
    a = minimal_api("l");
    a["category"] = "loss";
    EXPECT_NE(load_error(a).find("scalar outputs"), std::string::npos);
    EXPECT_NE(load_error(json::object({{"torch", "torch.x"}})).find("(unnamed): no name"), std::string::npos);
    try {
        kz::ApiCatalog::from_json({{"apis", {minimal_api("d"), minimal_api("d")}}}, "cat.json");
        FAIL() << "duplicate accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("api d: duplicate name"), std::string::npos);
    }
}

TEST(ApiCatalog, TorchNamesResolveWhereUnambiguous) {
    auto c = shipped();
    EXPECT_EQ(c.resolve("relu").name, "relu");
    EXPECT_EQ(c.resolve("torch.relu").name, "relu");
    EXPECT_EQ(c.resolve("torch.nn.functional.silu").name, c.resolve("F.silu").name);
    EXPECT_EQ(c.resolve("nn.functional.silu").name, c.resolve("F.silu").name);
    EXPECT_EQ(c.resolve("nn.PReLU").torch_api, "torch.nn.PReLU");
    try {
        c.resolve("nn.Conv2d");  // several entries build a torch.nn.Conv2d
        FAIL() << "an ambiguous torch name resolved";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("torch.nn.Conv2d, which"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
    }
    EXPECT_EQ(c.torch_api_of("nn.Conv2d"), "torch.nn.Conv2d");  // all validation needs
    EXPECT_EQ(c.torch_api_of("conv2d"), c.resolve("conv2d").torch_api);
    EXPECT_THROW(c.torch_api_of("nn.Teleport"), std::invalid_argument);
    EXPECT_THROW(c.resolve("torch.teleport"), std::invalid_argument);
    EXPECT_THROW(c.resolve("F."), std::invalid_argument);
}

TEST(ApiSets, AKeyIgnoresOrderAndRepeatsAndAFileListsSets) {
    EXPECT_EQ(kz::api_set_key({"relu", "conv2d", "relu"}), "conv2d,relu");
    const auto path = std::filesystem::temp_directory_path() / "kz_api_sets_test.txt";
    {
        std::ofstream f(path);
        f << "softmax, conv2d\n\n  gelu \nrelu,conv2d,relu\r\n";
    }
    const std::set<std::string> sets = kz::read_api_sets(path.string());
    EXPECT_EQ(sets, (std::set<std::string>{"conv2d,softmax", "gelu", "conv2d,relu"}));
    std::filesystem::remove(path);
    EXPECT_THROW(kz::read_api_sets(path.string()), std::runtime_error);
}
