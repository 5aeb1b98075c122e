// The kernelzero binary as a user drives it: usage errors, single verdicts, batches that are resumed,
// killed with SIGKILL and interrupted with SIGINT without losing or duplicating a finished result.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "common/files.h"
#include "tasks/validation.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kBin = KZ_BINARY;
const std::string kSrc = KZ_SOURCE_DIR;

struct Run {
    int code = -1;
    pid_t pid = -1;
    std::string out, err;
};

// Runs the binary to completion (or until `kill_when` returns true, then sends `sig`).
Run run(std::vector<std::string> args, const std::string& dir, std::function<bool()> kill_when = nullptr,
        int sig = SIGKILL) {
    std::string out_path = dir + "/stdout.txt", err_path = dir + "/stderr.txt";
    pid_t pid = fork();
    if (pid == 0) {
        freopen(out_path.c_str(), "w", stdout);
        freopen(err_path.c_str(), "w", stderr);
        std::vector<char*> argv;
        std::string bin = kBin;
        argv.push_back(bin.data());
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(kBin.c_str(), argv.data());
        _exit(127);
    }
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (kill_when && kill_when()) {
            kill(pid, sig);
            kill_when = nullptr;
        }
        std::this_thread::sleep_for(50ms);
    }
    Run res;
    res.pid = pid;
    res.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    res.out = kz::read_file(out_path);
    res.err = kz::read_file(err_path);
    return res;
}

std::vector<json> results(const std::string& path) {
    std::vector<json> v;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) v.push_back(json::parse(line));  // throws on a partial line
    return v;
}

struct CliTest : ::testing::Test {
    std::string dir = kz::make_temp_dir(fs::temp_directory_path().string(), "kz-cli-test-");
    std::string cache = dir + "/cache";
    ~CliTest() override { fs::remove_all(dir); }

    std::string task(const std::string& name) { return kSrc + "/tests/verify/adversarial/tasks/" + name; }
    std::string good() { return kSrc + "/examples/known_good/triton/relu.py"; }
    std::string good_task() { return kSrc + "/examples/known_good/tasks/relu.py"; }

    // A jobs file: two quick verdicts, one hang (timeout), two more quick ones.
    std::string jobs_file() {
        std::string p = dir + "/jobs.jsonl";
        std::ofstream f(p);
        auto line = [&](const std::string& id, const std::string& t, const std::string& c, double timeout) {
            f << json{{"id", id}, {"task", t}, {"candidate", c}, {"backend", "triton"}, {"timeout", timeout}}.dump()
              << "\n";
        };
        line("good-1", good_task(), good(), 60);
        line("zero", task("relu.py"), kSrc + "/tests/verify/adversarial/zero_output_triton.py", 60);
        line("hang", task("relu.py"), kSrc + "/tests/verify/adversarial/hang_triton.py", 4);
        line("good-2", good_task(), good(), 60);
        f << "this line is not json\n";
        line("missing", task("relu.py"), dir + "/no-such-candidate.py", 60);
        return p;
    }
    // A tiny random model in Hugging Face format (init-model), for the bench tests.
    std::string tiny_model(const std::string& arch);
    // A task directory named `name` holding these known-good tasks.
    std::string task_dir(const std::string& name, const std::vector<std::string>& files) {
        const std::string d = dir + "/" + name;
        fs::create_directories(d);
        for (const auto& f : files) fs::copy_file(kSrc + "/examples/known_good/tasks/" + f, d + "/" + f);
        return d;
    }
    std::vector<std::string> batch_args(const std::string& jobs, const std::string& out) {
        return {"verify", "--jobs",         jobs, "--out",       out,   "--device",
                "cpu",    "--timing-iters", "3",  "--cache-dir", cache, "--no-progress"};
    }
};

std::string CliTest::tiny_model(const std::string& arch) {
    const std::string model = dir + "/tiny-" + arch;
    auto init = run({"init-model", "--arch", arch, "--preset", "tiny", "--tokenizer", kSrc + "/data/qwen2.5-tokenizer",
                     "--out", model},
                    dir);
    EXPECT_EQ(init.code, 0) << init.err;
    return model;
}

}  // namespace

TEST_F(CliTest, UsageErrorsAreOneLineAndExitTwo) {
    auto r = run({"verify", "--task", task("relu.py")}, dir);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("needs --task, --candidate and --backend"), std::string::npos) << r.err;
    r = run({"verify", "--task", dir + "/nope.py", "--candidate", good(), "--backend", "triton", "--device", "cpu"},
            dir);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("file not found"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    r = run({"verify", "--task", good_task(), "--candidate", good(), "--backend", "cuda", "--device", "cpu"}, dir);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("needs a GPU"), std::string::npos) << r.err;
    r = run({"verify", "--task", good_task(), "--candidate", good(), "--backend", "metal"}, dir);
    EXPECT_EQ(r.code, 2);
    r = run({"verify", "--jobs", dir + "/none.jsonl"}, dir);
    EXPECT_EQ(r.code, 2);
}

TEST_F(CliTest, SingleVerdictIsJsonOnTheLastLine) {
    auto r = run({"verify", "--task", good_task(), "--candidate", good(), "--backend", "triton", "--device", "cpu",
                  "--timing-iters", "3", "--cache-dir", cache, "--json"},
                 dir);
    ASSERT_EQ(r.code, 0) << r.err;
    auto last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
    json v = json::parse(last);
    EXPECT_EQ(v["status"], "correct") << v.dump();
    EXPECT_EQ(v["timing_source"], "cpu_interpreter");
    EXPECT_EQ(v["trials"]["run"], 5);
    EXPECT_TRUE(v["runtime_ms"].is_object());
    // A verdict that says "incorrect" is still exit code 0.
    r = run(
        {"verify", "--task", task("relu.py"), "--candidate", kSrc + "/tests/verify/adversarial/zero_output_triton.py",
         "--backend", "triton", "--device", "cpu", "--timing-iters", "3", "--cache-dir", cache, "--json"},
        dir);
    EXPECT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("\"status\":\"incorrect\""), std::string::npos);
}

TEST_F(CliTest, BatchWritesEveryJobOnceAndResumeSkipsFinished) {
    std::string out = dir + "/results.jsonl";
    auto r = run(batch_args(jobs_file(), out), dir);
    ASSERT_EQ(r.code, 0) << r.err;
    auto res = results(out);
    std::map<std::string, std::string> status;
    for (auto& j : res) status[j["id"]] = j["status"];
    EXPECT_EQ(res.size(), 6u);
    EXPECT_EQ(status["good-1"], "correct");
    EXPECT_EQ(status["good-2"], "correct");
    EXPECT_EQ(status["zero"], "incorrect");
    EXPECT_EQ(status["hang"], "timeout");
    EXPECT_EQ(status["line-5"], "format_error");
    EXPECT_EQ(status["missing"], "format_error");
    // The start is reported apart from the batch, part by part.
    EXPECT_NE(r.out.find("verifier started in "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("probe "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("warm_up "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" verdicts per minute"), std::string::npos) << r.out;
    auto again = run(batch_args(dir + "/jobs.jsonl", out), dir);
    EXPECT_EQ(again.code, 0);
    EXPECT_EQ(results(out).size(), 6u);
    EXPECT_NE(again.out.find("verified 0 of 0 jobs (6 already"), std::string::npos) << again.out;
    // A job whose candidate changed under the same id is verified again, and its old line goes.
    std::string jobs = kz::read_file(dir + "/jobs.jsonl");
    const std::string zero = kSrc + "/tests/verify/adversarial/zero_output_triton.py";
    jobs.replace(jobs.find(zero), zero.size(), good());
    kz::write_file_atomic(dir + "/jobs.jsonl", jobs);
    auto changed = run(batch_args(dir + "/jobs.jsonl", out), dir);
    EXPECT_EQ(changed.code, 0) << changed.err;
    EXPECT_NE(changed.out.find("verified 1 of 1 jobs (5 already"), std::string::npos) << changed.out;
    std::map<std::string, int> lines;
    for (auto& j : results(out)) ++lines[j["id"]], status[j["id"]] = j["status"];
    EXPECT_EQ(lines.size(), 6u);
    for (const auto& [id, n] : lines) EXPECT_EQ(n, 1) << id;
    EXPECT_EQ(status["zero"], "correct");
}

TEST_F(CliTest, KillNineMidBatchLosesAndDuplicatesNothing) {
    std::string out = dir + "/results.jsonl";
    std::string jobs = jobs_file();
    // Kill the controller while the hang is running, after the first results are on disk.
    auto r = run(batch_args(jobs, out), dir, [&] {
        std::error_code ec;
        return fs::exists(out, ec) && results(out).size() >= 2;
    });
    EXPECT_EQ(r.code, 128 + SIGKILL);
    auto partial = results(out);  // every line parses: nothing half-written
    EXPECT_GE(partial.size(), 2u);
    std::this_thread::sleep_for(2500ms);  // orphaned workers notice and exit
    auto resumed = run(batch_args(jobs, out), dir);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    auto all = results(out);
    std::multiset<std::string> ids;
    for (auto& j : all) ids.insert(j["id"].get<std::string>());
    for (const char* id : {"good-1", "zero", "hang", "good-2", "line-5", "missing"}) EXPECT_EQ(ids.count(id), 1u) << id;
    EXPECT_EQ(all.size(), 6u);
    // The killed controller's scratch directory was removed by the next verifier to start. (Only its
    // own: tests running beside this one kill processes of theirs, whose directories wait for the
    // next verifier after them.)
    for (auto& e : fs::directory_iterator(fs::temp_directory_path())) {
        if (e.path().filename().string().rfind("kernelzero-", 0) != 0) continue;
        std::ifstream f(e.path() / "owner.pid");
        long pid = 0;
        if (f >> pid) {
            EXPECT_NE(pid, static_cast<long>(r.pid)) << "abandoned " << e.path();
        }
    }
}

TEST_F(CliTest, CtrlCStopsAndKeepsFinishedResults) {
    std::string out = dir + "/results.jsonl";
    std::string jobs = jobs_file();
    auto r = run(
        batch_args(jobs, out), dir,
        [&] {
            std::error_code ec;
            return fs::exists(out, ec) && results(out).size() >= 1;
        },
        SIGINT);
    EXPECT_EQ(r.code, 130) << r.err << r.out;
    EXPECT_NE(r.out.find("interrupted"), std::string::npos);
    auto kept = results(out);
    EXPECT_GE(kept.size(), 1u);
    for (auto& j : kept) EXPECT_NE(j["status"], "infra_error") << j.dump();  // no artefact of the interruption
    auto resumed = run(batch_args(jobs, out), dir);
    EXPECT_EQ(resumed.code, 0);
    EXPECT_EQ(results(out).size(), 6u);
}

// tasks validate: a KernelBench task is valid with its APIs; a module that exits at import takes the
// validation worker down and is invalid ("runs"); usage errors exit 2 with one line.
TEST_F(CliTest, TasksValidateReportsEveryCheck) {
    auto last_json = [](const ::Run& r) {
        std::string s = r.out;
        while (!s.empty() && s.back() == '\n') s.pop_back();
        return json::parse(s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1));
    };
    auto r =
        run({"tasks", "validate", kSrc + "/examples/known_good/tasks/softmax.py", "--apis", "softmax", "--json"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    json v = last_json(r);
    EXPECT_TRUE(v["valid"].get<bool>()) << v.dump();
    EXPECT_EQ(v["checks"].size(), kz::validation_checks().size());
    EXPECT_EQ(v["checks"]["uses_api_set"], "pass");
    EXPECT_EQ(v["checks"]["well_conditioned"], "pass");

    std::string exits = dir + "/exits.py";
    kz::write_file_atomic(
        exits,
        "import os\nimport torch\n\n\nclass Model(torch.nn.Module):\n    pass\n\n\n"
        "def get_inputs():\n    return []\n\n\ndef get_init_inputs():\n    return []\n\n\nos._exit(3)\n");
    r = run({"tasks", "validate", exits, "--json"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    v = last_json(r);
    EXPECT_FALSE(v["valid"].get<bool>());
    EXPECT_EQ(v["checks"]["runs"], "fail") << v.dump();

    // Torch names the catalog records are accepted as well as its own, even where entries share them.
    r = run({"tasks", "validate", kSrc + "/examples/known_good/tasks/softmax.py", "--apis", "torch.softmax", "--json"},
            dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(last_json(r)["checks"]["uses_api_set"], "pass") << r.out;

    r = run({"tasks", "validate", exits, "--apis", "teleport"}, dir);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("\"teleport\" is not in the catalog"), std::string::npos) << r.err;
}

// propose: the symbolic generator fills a store that list / stats / export / import read back; the
// LLM path (a tiny random model) runs end to end and records its parse failures with reasons.
TEST_F(CliTest, ProposeFillsTheStore) {
    std::string db = dir + "/tasks.db";
    auto r = run({"propose", "--symbolic", "--n", "4", "--store", db, "--seed", "2", "--json"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    json s = json::parse(r.out);  // with --json the summary is the only line
    EXPECT_EQ(s["proposed"], 4);
    EXPECT_GE(s["valid"].get<int>(), 3);
    r = run({"tasks", "stats", "--store", db, "--json"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    json st = json::parse(r.out);
    EXPECT_EQ(st["tasks"], 4);
    EXPECT_EQ(st["by_origin"]["symbolic"], 4);
    r = run({"tasks", "export", "--store", db, "--out", dir + "/kb"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run({"tasks", "import", "--store", dir + "/copy.db", dir + "/kb", "--no-validate"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run({"tasks", "stats", "--store", dir + "/copy.db", "--json"}, dir);
    EXPECT_EQ(json::parse(r.out)["tasks"], 4);

    r = run({"init-model", "--preset", "tiny", "--tokenizer", kSrc + "/data/qwen2.5-tokenizer", "--out", dir + "/tiny"},
            dir);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run({"propose", "--model", dir + "/tiny", "--n", "2", "--store", dir + "/llm.db", "--max-new-tokens", "24"},
            dir);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run({"tasks", "list", "--store", dir + "/llm.db", "--json"}, dir);
    int n = 0;
    for (size_t i = 0, j; (j = r.out.find('\n', i)) != std::string::npos; i = j + 1) {
        json t = json::parse(r.out.substr(i, j - i));
        EXPECT_EQ(t["origin"], "proposer");
        if (!t["valid"].get<bool>()) {
            EXPECT_FALSE(t["reason"].get<std::string>().empty());
        }
        ++n;
    }
    EXPECT_EQ(n, 2);
}

// propose --catalog: the API sets are drawn from the given catalog (the learning experiment's is the
// teacher's families, corpus/catalog.json), and an API outside it is refused by name.
TEST_F(CliTest, ProposeDrawsFromTheGivenCatalog) {
    json catalog = json::parse(kz::read_file(kSrc + "/tasks/api_catalog.json"));
    json kept = json::array();
    for (const json& api : catalog["apis"])
        if (api["name"] == "relu" || api["name"] == "tanh") kept.push_back(api);
    ASSERT_EQ(kept.size(), 2u);
    catalog["apis"] = kept;
    std::ofstream(dir + "/two.json") << catalog.dump();
    std::string db = dir + "/two.db";
    auto r = run({"propose", "--symbolic", "--catalog", dir + "/two.json", "--level", "1", "--n", "6", "--store", db,
                  "--seed", "3", "--json"},
                 dir);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run({"tasks", "list", "--store", db, "--json"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    std::set<std::string> drawn;
    for (size_t i = 0, j; (j = r.out.find('\n', i)) != std::string::npos; i = j + 1) {
        const json task = json::parse(r.out.substr(i, j - i));
        for (const json& api : task["apis"]) drawn.insert(api.get<std::string>());
    }
    EXPECT_FALSE(drawn.empty()) << r.out;
    for (const auto& api : drawn) EXPECT_TRUE(api == "relu" || api == "tanh") << api;

    r = run({"propose", "--symbolic", "--catalog", dir + "/two.json", "--apis", "conv2d", "--n", "1", "--store", db},
            dir);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("conv2d"), std::string::npos) << r.err;
}

// The checks that need the store, the benchmarks or torch.compile, each caught on a planted module:
// a task proposed twice is not novel; a task equal to a registered benchmark file is contaminated;
// a module that computes something else under torch.compile fails "compile" and nothing else.
TEST_F(CliTest, NoveltyContaminationAndCompileChecks) {
    std::string db = dir + "/t.db";
    auto r = run({"propose", "--symbolic", "--apis", "conv2d,relu", "--n", "1", "--store", db, "--seed", "5", "--json"},
                 dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["valid"], 1) << r.out;
    r = run({"propose", "--symbolic", "--apis", "conv2d,relu", "--n", "1", "--store", db, "--seed", "5", "--json"},
            dir);
    ASSERT_EQ(r.code, 0) << r.err;
    json s = json::parse(r.out);
    EXPECT_EQ(s["valid"], 0);
    EXPECT_EQ(s["failed_checks"]["novel"], 1) << r.out;

    r = run({"tasks", "export", "--store", db, "--out", dir + "/bench"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    r = run({"propose", "--symbolic", "--apis", "conv2d,relu", "--n", "1", "--store", dir + "/fresh.db", "--seed", "5",
             "--benchmark", dir + "/bench", "--json"},
            dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["failed_checks"]["decontaminated"], 1) << r.out;

    std::string planted = dir + "/no_compile.py";
    kz::write_file_atomic(
        planted,
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        if torch.compiler.is_compiling():\n            return torch.relu(x) * 2\n"
        "        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(8, 32)]\n\n\n"
        "def get_init_inputs():\n    return []\n");
    r = run({"tasks", "validate", planted, "--apis", "relu", "--compile", "--json"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    json v = json::parse(out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1));
    EXPECT_EQ(v["checks"]["compile"], "fail") << v.dump();
    for (auto it = v["checks"].begin(); it != v["checks"].end(); ++it)
        if (it.key() != "compile") {
            EXPECT_NE(it.value(), "fail") << it.key();
        }
}

namespace {

int count_lines(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    int n = 0;
    while (std::getline(f, line)) ++n;
    return n;
}

TEST_F(CliTest, BenchReferenceSelfTestIsAllCorrectAndResumes) {
    const std::string out = dir + "/run";
    std::vector<std::string> args = {"bench",
                                     "--tasks",
                                     kSrc + "/examples/known_good/tasks",
                                     "--backend",
                                     "triton",
                                     "--model",
                                     "reference",
                                     "--device",
                                     "cpu",
                                     "--out",
                                     out,
                                     "--workers",
                                     "2",
                                     "--cache-dir",
                                     cache,
                                     "--json",
                                     "--no-progress"};
    auto r = run(args, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    json m = json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(m["overall"]["tasks"], 17);
    EXPECT_EQ(m["overall"]["samples"], 17);
    EXPECT_DOUBLE_EQ(m["overall"]["fast_p_eager"]["0"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(m["overall"]["pass_at_k"]["pass@1"].get<double>(), 1.0);
    for (const char* f :
         {"run.json", "jobs.jsonl", "verdicts.jsonl", "samples.jsonl", "metrics.json", "report.md", "report.html"})
        EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
    EXPECT_EQ(count_lines(out + "/samples.jsonl"), 17);
    const std::string html = kz::read_file(out + "/report.html");
    EXPECT_NE(html.find("<svg"), std::string::npos);
    EXPECT_NE(html.find("tasks/softmax"), std::string::npos);
    EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, static

    // The same directory again: refused without --resume; with it, nothing is verified twice.
    auto again = run(args, dir);
    EXPECT_EQ(again.code, 2);
    EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;
    args.push_back("--resume");
    auto resumed = run(args, dir);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_EQ(count_lines(out + "/verdicts.jsonl"), 17);
    // A resumed run must be the same run.
    args.insert(args.end(), {"--samples", "2"});
    auto other = run(args, dir);
    EXPECT_EQ(other.code, 2);
    EXPECT_NE(other.err.find("samples differs"), std::string::npos) << other.err;
}

TEST_F(CliTest, BenchTinyModelRecordsFormatErrors) {
    // A random tiny model writes no code: every sample is a format_error with its reason, and the
    // run still reports.
    const std::string model = tiny_model("qwen2"), tasks = task_dir("level1", {"relu.py", "softmax.py"}),
                      out = dir + "/run";
    std::vector<std::string> args = {"bench", "--tasks",          tasks,          "--backend", "triton", "--model",
                                     model,   "--device",         "cpu",          "--samples", "2",      "--k",
                                     "1,2",   "--max-new-tokens", "12",           "--out",     out,      "--cache-dir",
                                     cache,   "--json",           "--no-progress"};
    auto r = run(args, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(count_lines(out + "/completions.jsonl"), 4);
    auto verdicts = results(out + "/verdicts.jsonl");
    ASSERT_EQ(verdicts.size(), 4u);
    for (const auto& v : verdicts) {
        EXPECT_EQ(v["status"], "format_error");
        EXPECT_FALSE(v["reason"].get<std::string>().empty());
    }
    json m = json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(m["overall"]["samples"], 4);
    EXPECT_DOUBLE_EQ(m["overall"]["pass_at_k"]["pass@2"].get<double>(), 0.0);
    json run_json = json::parse(kz::read_file(out + "/run.json"));
    EXPECT_EQ(run_json["prompt_version"], "coder-v1");
    EXPECT_EQ(run_json["settings"]["temperature"], 1.0);  // several samples: sampled, not greedy

    // Resumed with every completion recorded, the run is checked against run.json but the weights are
    // never loaded: without them it still reports, and other settings are still refused.
    for (const auto& e : fs::directory_iterator(model))
        if (e.path().extension() == ".safetensors") fs::remove(e.path());
    args.push_back("--resume");
    auto resumed = run(args, dir);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_EQ(count_lines(out + "/completions.jsonl"), 4);
    EXPECT_EQ(count_lines(out + "/verdicts.jsonl"), 4);
    args[std::find(args.begin(), args.end(), "--max-new-tokens") - args.begin() + 1] = "13";
    auto other = run(args, dir);
    EXPECT_EQ(other.code, 2);
    EXPECT_NE(other.err.find("settings differs"), std::string::npos) << other.err;
    // A missing adapter is refused before anything is written.
    auto no_adapter = run({"bench", "--tasks", tasks, "--backend", "triton", "--model", model, "--adapter",
                           dir + "/no-adapter", "--device", "cpu", "--out", dir + "/run2", "--no-progress"},
                          dir);
    EXPECT_EQ(no_adapter.code, 2);
    EXPECT_NE(no_adapter.err.find("no adapter_config.json"), std::string::npos) << no_adapter.err;
    EXPECT_FALSE(fs::exists(dir + "/run2/run.json"));
}

}  // namespace

namespace {

TEST_F(CliTest, BenchAgainstServeOnLoopback) {
    // kernelzero serve with a tiny random model on a free port; bench speaks OpenAI's API to it,
    // four requests in flight; every sample is a format_error (a random model writes no code).
    const std::string model = tiny_model("qwen3"), tasks = task_dir("level2", {"relu.py", "softmax.py", "gelu.py"});
    const std::string out = dir + "/run";
    const std::string serve_out = dir + "/serve.txt";
    pid_t server = fork();
    if (server == 0) {
        freopen(serve_out.c_str(), "w", stdout);
        freopen((dir + "/serve.err").c_str(), "w", stderr);
        execl(kBin.c_str(), kBin.c_str(), "serve", "--model", model.c_str(), "--port", "0", "--device", "cpu",
              "--served-model-name", "tiny-coder", static_cast<char*>(nullptr));
        _exit(127);
    }
    std::string url;
    for (int i = 0; i < 600 && url.empty(); ++i) {
        std::this_thread::sleep_for(50ms);
        std::string text = fs::exists(serve_out) ? kz::read_file(serve_out) : "";
        if (auto p = text.find("http://"); p != std::string::npos && text.find(" (model", p) != std::string::npos)
            url = text.substr(p, text.find(' ', p) - p);
    }
    ASSERT_FALSE(url.empty()) << "serve did not start: " << kz::read_file(dir + "/serve.err");
    auto r = run(
        {"bench",        "--tasks",       tasks, "--backend", "triton", "--endpoint",  url + "/v1", "--served-model",
         "tiny-coder",   "--device",      "cpu", "--samples", "2",      "--k",         "1,2",       "--max-new-tokens",
         "10",           "--concurrency", "4",   "--out",     out,      "--cache-dir", cache,       "--json",
         "--no-progress"},
        dir);
    // A wrong model name is the server's clear 404, not a retry loop.
    auto wrong = run({"bench", "--tasks", tasks, "--backend", "triton", "--endpoint", url, "--served-model", "nope",
                      "--device", "cpu", "--out", dir + "/run2", "--cache-dir", cache, "--no-progress"},
                     dir);
    kill(server, SIGINT);
    int status = 0;
    waitpid(server, &status, 0);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "serve did not stop cleanly on SIGINT";
    EXPECT_EQ(count_lines(out + "/completions.jsonl"), 6);
    auto verdicts = results(out + "/verdicts.jsonl");
    ASSERT_EQ(verdicts.size(), 6u);
    for (const auto& v : verdicts) EXPECT_EQ(v["status"], "format_error");
    json m = json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(m["overall"]["samples"], 6);
    EXPECT_TRUE(fs::exists(out + "/report.html"));
    EXPECT_EQ(wrong.code, 2);
    EXPECT_NE(wrong.err.find("404"), std::string::npos) << wrong.err;
    EXPECT_NE(wrong.err.find("tiny-coder"), std::string::npos) << wrong.err;
}

// ---- The trainer: kernelzero train / sft / report ----

struct TrainTest : CliTest {
    TrainTest() { setenv("KZ_CACHE_DIR", cache.c_str(), 1); }
    // Every rollout record of a run, by key; fails the test on a duplicated key.
    std::map<std::string, json> records(const std::string& run_dir) {
        std::map<std::string, json> out;
        for (const auto& r : results(run_dir + "/rollouts.jsonl")) {
            std::string key = std::to_string(r["iteration"].get<int>()) + "/" + r["role"].get<std::string>() + "/" +
                              r["task_hash"].get<std::string>() + "/" + std::to_string(r["sample"].get<int>());
            EXPECT_FALSE(out.count(key)) << "duplicated record " << key;
            out[key] = r;
        }
        return out;
    }
    std::vector<int> metric_iterations(const std::string& run_dir) {
        std::vector<int> its;
        for (const auto& m : results(run_dir + "/metrics.jsonl")) its.push_back(m["iteration"].get<int>());
        return its;
    }
};

TEST_F(TrainTest, TinyCpuRunsTwoIterationsAndReports) {
    const std::string out = dir + "/run";
    auto r = run({"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "2"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2}));
    for (const char* stage : {"propose", "refresh_pool", "coder", "eval", "checkpoint"})
        EXPECT_NE(r.err.find(std::string("iter 2: ") + stage), std::string::npos) << stage << "\n" << r.err;
    auto m = results(out + "/metrics.jsonl").back();
    EXPECT_TRUE(m["stage_s"].contains("coder")) << m.dump();
    EXPECT_EQ(m["eval"]["tasks"].get<int>(), 17) << m.dump();
    EXPECT_GT(m["propose"]["modules_measured"].get<int>(), 0) << m.dump();  // the symbolic fallback fed it
    auto recs = records(out);
    std::set<std::string> roles;
    for (const auto& [k, v] : recs) roles.insert(v["role"].get<std::string>());
    EXPECT_EQ(roles, (std::set<std::string>{"coder", "probe", "proposer"}));
    EXPECT_TRUE(fs::is_regular_file(out + "/checkpoints/iter-000002/coder/adapter/adapter_model.safetensors"));
    EXPECT_TRUE(fs::is_regular_file(out + "/checkpoints/iter-000002/proposer/optimizer.pt"));
    EXPECT_TRUE(fs::is_regular_file(out + "/run.sqlite"));
    EXPECT_TRUE(fs::is_regular_file(out + "/eval/iter-000002/report.html"));

    // Done is done: a resume with nothing left to run changes nothing; a second run in the same
    // directory without --resume is refused.
    auto again = run({"train", "--preset", "tiny-cpu", "--out", out, "--resume", "--iterations", "2"}, dir);
    EXPECT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2}));
    // A deadline that the next iteration would miss: it is not started, and the run says so as an
    // interrupted one does.
    const auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto late = run({"train", "--preset", "tiny-cpu", "--out", out, "--resume", "--iterations", "3", "--deadline",
                     std::to_string(now)},
                    dir);
    EXPECT_EQ(late.code, 130) << late.err;
    EXPECT_NE(late.err.find("iteration 3 not started"), std::string::npos) << late.err;
    EXPECT_NE(late.err.find("stopped for --deadline after iteration 2; --resume continues"), std::string::npos)
        << late.err;
    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2}));
    auto twice = run({"train", "--preset", "tiny-cpu", "--out", out}, dir);
    EXPECT_EQ(twice.code, 2);
    EXPECT_NE(twice.err.find("--resume"), std::string::npos) << twice.err;
    {
        // A directory another trainer holds is refused, and what it holds is left as it was.
        const kz::FileLock held(out + "/run.lock", "the test");
        auto busy = run({"train", "--preset", "tiny-cpu", "--out", out, "--resume", "--iterations", "3"}, dir);
        EXPECT_EQ(busy.code, 2);
        EXPECT_NE(busy.err.find("in use by another trainer"), std::string::npos) << busy.err;
        EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2}));
    }

    auto rep = run({"report", out}, dir);
    ASSERT_EQ(rep.code, 0) << rep.err;
    std::string html = kz::read_file(out + "/report.html");
    for (const char* part : {"Training curves", "speed-only share", "Capability map", "Stage times", "<svg", "propose"})
        EXPECT_NE(html.find(part), std::string::npos) << part;
    // The chart's speed-only series reads what every Coder step records, as the learning table reads
    // the log-prob gap and the gradient's norms.
    const std::string metrics = kz::read_file(out + "/metrics.jsonl");
    for (const char* key :
         {"\"speed_only_share\":", "\"logprob_gap\":", "\"logprob_gap_max\":", "\"grad_norm_max\":", "\"grad_scale\":"})
        EXPECT_NE(metrics.find(key), std::string::npos) << key;
    EXPECT_EQ(html.find("<script"), std::string::npos);
}

// A budget ends a run at the iteration that spends it, evaluated as the last; a resume counts what
// the recorded iterations spent, and may raise the budget.
TEST_F(TrainTest, ATokenBudgetEndsTheRunAndAResumeCountsWhatWasSpent) {
    const std::string out = dir + "/budget";
    auto printed = run({"train", "--preset", "tiny-cpu", "--print-config"}, dir);
    ASSERT_EQ(printed.code, 0) << printed.err;
    auto config = [&](int64_t budget) {
        std::string c = std::regex_replace(printed.out, std::regex("\"data/qwen2.5-tokenizer\""),
                                           "\"" + kSrc + "/data/qwen2.5-tokenizer\"");
        c = std::regex_replace(c, std::regex("\"examples/known_good/tasks\""),
                               "\"" + kSrc + "/examples/known_good/tasks\"");
        c = std::regex_replace(c, std::regex("(^|\n)iterations = 2\n"),
                               "$1iterations = 4\ntoken_budget = " + std::to_string(budget) + "\n");
        c = std::regex_replace(c, std::regex("\nevery = 1\n"), "\nevery = 3\n");
        std::ofstream(dir + "/budget.toml") << c;
        return dir + "/budget.toml";
    };
    auto first = run({"train", "--config", config(1), "--out", out}, dir);
    ASSERT_EQ(first.code, 0) << first.err;
    EXPECT_NE(first.err.find("budget spent after iteration 1"), std::string::npos) << first.err;
    auto m = results(out + "/metrics.jsonl");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_TRUE(m[0].contains("eval")) << "the last iteration is evaluated: " << m[0].dump();
    const int64_t spent = m[0]["tokens_sampled"].get<int64_t>();
    ASSERT_GT(spent, 0);
    // Exactly what iteration 1 spent: nothing is left to run.
    auto none = run({"train", "--config", config(spent), "--out", out, "--resume"}, dir);
    ASSERT_EQ(none.code, 0) << none.err;
    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1}));
    // One token more: iteration 2 runs, and is the last.
    auto more = run({"train", "--config", config(spent + 1), "--out", out, "--resume"}, dir);
    ASSERT_EQ(more.code, 0) << more.err;
    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2}));
    EXPECT_TRUE(results(out + "/metrics.jsonl").back().contains("eval"));
}

TEST_F(TrainTest, KilledMidStageResumesWithNoLostOrDuplicatedRecord) {
    const std::string ref = dir + "/reference", out = dir + "/killed";
    auto r = run({"train", "--preset", "tiny-cpu", "--out", ref, "--iterations", "2"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    // SIGKILL in the middle of a stage, twice: in iteration 1 while the Proposer's modules are being
    // validated or measured (no checkpoint yet), then in iteration 2's Coder phase.
    auto stderr_has = [&](const std::string& text) {
        std::ifstream f(dir + "/stderr.txt");
        std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        return all.find(text) != std::string::npos;
    };
    auto after = [&](const std::string& text, std::chrono::milliseconds delay) {
        auto seen = std::make_shared<std::optional<std::chrono::steady_clock::time_point>>();
        return [=]() {
            if (!*seen && stderr_has(text)) *seen = std::chrono::steady_clock::now();
            return *seen && std::chrono::steady_clock::now() - **seen >= delay;
        };
    };
    auto k1 = run({"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "2"}, dir,
                  after("proposer: sampling", 1500ms));
    EXPECT_EQ(k1.code, 128 + SIGKILL) << k1.err;
    auto k2 = run({"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "2", "--resume"}, dir,
                  after("iter 2: coder ...", 300ms));
    EXPECT_EQ(k2.code, 128 + SIGKILL) << k2.err;
    auto done = run({"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "2", "--resume"}, dir);
    ASSERT_EQ(done.code, 0) << done.err;
    EXPECT_NE(done.err.find("resumed after iteration 1"), std::string::npos) << done.err;

    auto want = records(ref), got = records(out);
    EXPECT_EQ(got.size(), want.size());
    for (const auto& [key, rec] : want) {
        ASSERT_TRUE(got.count(key)) << "lost record " << key;
        EXPECT_EQ(got[key]["completion"], rec["completion"]) << key;
        EXPECT_EQ(got[key]["completion_tokens"], rec["completion_tokens"]) << key;
        EXPECT_EQ(got[key]["reward"], rec["reward"]) << key;
    }
    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2}));
    // What the killed runs spent is in the resumed run's metrics as in the reference's: a step read
    // back from its records counts its samples, tokens and verifications once.
    auto want_m = results(ref + "/metrics.jsonl"), got_m = results(out + "/metrics.jsonl");
    ASSERT_EQ(got_m.size(), want_m.size());
    for (size_t i = 0; i < want_m.size(); ++i)
        for (const char* k : {"samples", "tokens_sampled", "verified"})
            EXPECT_EQ(got_m[i][k], want_m[i][k]) << "iteration " << i + 1 << ": " << k;
    // Both runs end with the same policies.
    for (const char* f : {"coder/adapter/adapter_model.safetensors", "proposer/adapter/adapter_model.safetensors"})
        EXPECT_EQ(kz::read_file(out + "/checkpoints/iter-000002/" + f),
                  kz::read_file(ref + "/checkpoints/iter-000002/" + f))
            << f;
}

// Data parallelism (issue 7): two ranks (gloo) share one run directory; a run killed at world size 2
// resumes at 1 and then at 2 again, with no record lost or written twice.
TEST_F(TrainTest, DataParallelRanksShareOneRunAndResumeAtAnyWorldSize) {
    const std::string out = dir + "/dp";
    auto stderr_has = [&](const std::string& text) {
        std::ifstream f(dir + "/stderr.txt");
        std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        return all.find(text) != std::string::npos;
    };
    auto k = run({"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "2", "--nproc-per-node", "2"}, dir,
                 [&, seen = std::optional<std::chrono::steady_clock::time_point>()]() mutable {
                     if (!seen && stderr_has("iter 2: coder ...")) seen = std::chrono::steady_clock::now();
                     return seen && std::chrono::steady_clock::now() - *seen >= 300ms;
                 });
    EXPECT_EQ(k.code, 128 + SIGKILL) << k.err;
    EXPECT_NE(k.err.find("on 2 ranks"), std::string::npos) << k.err;
    // The killed launcher took its ranks with it: the run directory's lock is free again.
    auto one = run({"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "2", "--resume"}, dir);
    ASSERT_EQ(one.code, 0) << one.err;
    EXPECT_NE(one.err.find("resumed after iteration 1"), std::string::npos) << one.err;
    auto two = run(
        {"train", "--preset", "tiny-cpu", "--out", out, "--iterations", "3", "--resume", "--nproc-per-node", "2"}, dir);
    ASSERT_EQ(two.code, 0) << two.err;
    EXPECT_NE(two.err.find("resumed after iteration 2"), std::string::npos) << two.err;
    EXPECT_EQ(two.out.find("finished iteration 3"), two.out.rfind("finished iteration 3"))
        << "one line, from rank 0: " << two.out;

    EXPECT_EQ(metric_iterations(out), (std::vector<int>{1, 2, 3}));
    auto metrics = results(out + "/metrics.jsonl");
    EXPECT_EQ(metrics[0]["world_size"], 2);
    EXPECT_EQ(metrics[1]["world_size"], 1);
    EXPECT_EQ(metrics[2]["world_size"], 2);
    // Every iteration's records are complete, whichever world size sampled them: 2 API sets x 2
    // proposals, G = 2 per measured module, one Coder step of 2 tasks x 4.
    auto recs = records(out);
    std::map<std::pair<int, std::string>, int> count;
    for (const auto& [key, r] : recs) ++count[{r["iteration"].get<int>(), r["role"].get<std::string>()}];
    for (int it = 1; it <= 3; ++it) {
        const auto& m = metrics[static_cast<size_t>(it - 1)];
        EXPECT_EQ((count[{it, "proposer"}]), 4) << it;
        EXPECT_EQ((count[{it, "probe"}]), 2 * m["propose"]["modules_measured"].get<int>()) << it;
        EXPECT_EQ((count[{it, "coder"}]), 8) << it;
    }
    EXPECT_EQ(metrics[2]["samples"].get<int>(), (4 + count[{3, "probe"}] + 8)) << metrics[2].dump();
    EXPECT_TRUE(fs::is_regular_file(out + "/checkpoints/iter-000003/coder/adapter/adapter_model.safetensors"));

    // A rank that fails takes the launch down with its exit code and its message.
    {
        std::ofstream(dir + "/gpu1.toml") << "iterations = 1\ndevice = \"cuda:1\"\nverify_device = \"cpu\"\n[coder]\n"
                                             "model = \"init:tiny\"\ntokenizer = \"" +
                                                 kSrc + "/data/qwen2.5-tokenizer\"\n";
        auto bad = run({"train", "--config", dir + "/gpu1.toml", "--out", dir + "/gpu1", "--nproc-per-node", "2"}, dir);
        EXPECT_EQ(bad.code, 2) << bad.err;
        EXPECT_NE(bad.err.find("each rank uses its own GPU"), std::string::npos) << bad.err;
    }
    // A launched rank cannot launch ranks of its own.
    setenv("WORLD_SIZE", "2", 1);
    auto nested = run({"train", "--preset", "tiny-cpu", "--out", dir + "/nested", "--nproc-per-node", "2"}, dir);
    unsetenv("WORLD_SIZE");
    EXPECT_EQ(nested.code, 2);
    EXPECT_NE(nested.err.find("WORLD_SIZE"), std::string::npos) << nested.err;
}

TEST_F(TrainTest, BadConfigurationsAreClearErrors) {
    auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir + "/" + name) << text;
        return dir + "/" + name;
    };
    auto unknown = run({"train", "--config", write("a.toml", "iterations = 1\n[coder_phase]\ngroup_sise = 4\n")}, dir);
    EXPECT_EQ(unknown.code, 2);
    EXPECT_NE(unknown.err.find("coder_phase.group_sise"), std::string::npos) << unknown.err;
    auto type = run({"train", "--config", write("b.toml", "iterations = \"two\"\n")}, dir);
    EXPECT_EQ(type.code, 2);
    EXPECT_NE(type.err.find("'iterations' must be an integer"), std::string::npos) << type.err;
    auto syntax = run({"train", "--config", write("c.toml", "iterations = \n")}, dir);
    EXPECT_EQ(syntax.code, 2);
    EXPECT_NE(syntax.err.find("line 1"), std::string::npos) << syntax.err;
    auto range =
        run({"train", "--config", write("d.toml", "[coder_phase]\ngroup_size = 1\n[coder]\ntokenizer = \"x\"\n")}, dir);
    EXPECT_EQ(range.code, 2);
    EXPECT_NE(range.err.find("group_size"), std::string::npos) << range.err;
    auto compute =
        run({"train", "--config", write("e.toml", "[coder]\ntokenizer = \"x\"\nlora_compute = \"bf16\"\n")}, dir);
    EXPECT_EQ(compute.code, 2);
    EXPECT_NE(compute.err.find("'coder.lora_compute' must be adapter or base"), std::string::npos) << compute.err;
    auto kl =
        run({"train", "--config",
             write("f.toml", "[coder]\ntokenizer = \"x\"\nfull_finetune = true\n[coder_phase]\nkl_beta = 0.04\n")},
            dir);
    EXPECT_EQ(kl.code, 2);
    EXPECT_NE(kl.err.find("'coder_phase.kl_beta' needs a LoRA Coder"), std::string::npos) << kl.err;
    auto warmup = run({"train", "--config", write("w.toml", "[coder]\ntokenizer = \"x\"\nwarmup_steps = -1\n")}, dir);
    EXPECT_EQ(warmup.code, 2);
    EXPECT_NE(warmup.err.find("'coder.warmup_steps' must be >= 0"), std::string::npos) << warmup.err;
    auto lr = run({"train", "--config", write("l.toml", "[coder]\ntokenizer = \"x\"\nlr = -1e-4\n")}, dir);
    EXPECT_EQ(lr.code, 2);
    EXPECT_NE(lr.err.find("'coder.lr' must be >= 0"), std::string::npos) << lr.err;
    // Greedy RL samples: a group would be one completion, and the update scores at this temperature.
    for (const std::string section : {"coder_phase", "propose"}) {
        const std::string toml = "[coder]\ntokenizer = \"x\"\n[" + section + "]\ntemperature = 0\n";
        auto greedy = run({"train", "--config", write("t.toml", toml)}, dir);
        EXPECT_EQ(greedy.code, 2);
        EXPECT_NE(greedy.err.find(section + ".temperature' must be > 0"), std::string::npos) << greedy.err;
    }
    auto estimator = run(
        {"train", "--config", write("g.toml", "[coder]\ntokenizer = \"x\"\n[coder_phase]\nkl_estimator = \"k2\"\n")},
        dir);
    EXPECT_EQ(estimator.code, 2);
    EXPECT_NE(estimator.err.find("coder_phase: kl_estimator must be k3, k3_clamped or k3+, not 'k2'"),
              std::string::npos)
        << estimator.err;
    // A launcher's environment with more ranks on this host than in the world: named, before any
    // rank connects.
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "3", 1);
    auto local = run({"train", "--preset", "tiny-cpu", "--out", dir + "/local"}, dir);
    unsetenv("LOCAL_WORLD_SIZE");
    unsetenv("WORLD_SIZE");
    EXPECT_EQ(local.code, 2);
    EXPECT_NE(local.err.find("LOCAL_WORLD_SIZE must be in 1..WORLD_SIZE"), std::string::npos) << local.err;
    auto preset = run({"train", "--preset", "huge"}, dir);
    EXPECT_EQ(preset.code, 2);
    EXPECT_NE(preset.err.find("tiny-cpu"), std::string::npos) << preset.err;
    auto missing = run({"train", "--config", dir + "/none.toml"}, dir);
    EXPECT_EQ(missing.code, 2);
    EXPECT_NE(missing.err.find("none.toml"), std::string::npos) << missing.err;
    auto nothing = run({"train", "--preset", "tiny-cpu", "--out", dir + "/empty", "--resume"}, dir);
    EXPECT_EQ(nothing.code, 2);
    EXPECT_NE(nothing.err.find("no run to resume"), std::string::npos) << nothing.err;
    auto printed = run({"train", "--preset", "qwen2.5-coder-7b", "--print-config"}, dir);
    EXPECT_EQ(printed.code, 0);
    EXPECT_NE(printed.out.find("lora_rank = 64"), std::string::npos) << printed.out;
    EXPECT_NE(printed.out.find("recompute = true"), std::string::npos) << printed.out;
    auto report = run({"report", dir + "/empty"}, dir);
    EXPECT_EQ(report.code, 2);
}

TEST_F(TrainTest, SftLowersTheCompletionLossAndWritesAnAdapter) {
    std::ofstream(dir + "/pairs.jsonl")
        << json({{"prompt", "Write relu."}, {"completion", "```python\nclass ModelNew: pass\n```"}}).dump() << "\n"
        << json({{"prompt", json::array({json{{"role", "system"}, {"content", "Be brief."}},
                                         json{{"role", "user"}, {"content", "Write gelu."}}})},
                 {"completion", "```python\nimport torch\n```"}})
               .dump()
        << "\n";
    std::ofstream(dir + "/sft.toml")
        << "seed = 1\n[coder]\nmodel = \"init:tiny\"\ntokenizer = \"" << kSrc
        << "/data/qwen2.5-tokenizer\"\nlora_rank = 8\nlr = 0.01\n[sft]\ndata = \"pairs.jsonl\"\n"
           "epochs = 15\nbatch_size = 2\nout = \"sft-out\"\n";
    auto r = run({"sft", "--config", dir + "/sft.toml"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    json res = json::parse(r.out.substr(r.out.rfind('{')));
    EXPECT_EQ(res["pairs"].get<int>(), 2);
    EXPECT_EQ(res["steps"].get<int>(), 15);
    // A random tiny model starts near ln(vocabulary) = 11.9; LoRA on two layers cannot move tied random
    // embeddings far (about a nat at most), so "learns" means a clear drop, not a small loss.
    EXPECT_LT(res["last_loss"].get<double>(), res["first_loss"].get<double>() - 0.5) << res.dump();
    EXPECT_TRUE(fs::is_regular_file(dir + "/sft-out/adapter/adapter_config.json"));
    // A finished run keeps no checkpoint; what a resume must match is recorded.
    EXPECT_FALSE(fs::exists(dir + "/sft-out/checkpoints"));
    EXPECT_EQ(json::parse(kz::read_file(dir + "/sft-out/sft.json"))["pairs"].get<int>(), 2);
    auto nothing = run({"sft", "--config", dir + "/sft.toml", "--resume"}, dir);
    EXPECT_EQ(nothing.code, 2);
    EXPECT_NE(nothing.err.find("no interrupted SFT run"), std::string::npos) << nothing.err;
    // An interrupted run (a checkpoint in its directory) is neither started over nor resumed otherwise.
    fs::create_directories(dir + "/sft-out/checkpoints/step-000003");
    auto again = run({"sft", "--config", dir + "/sft.toml"}, dir);
    EXPECT_EQ(again.code, 2);
    EXPECT_NE(again.err.find("pass --resume"), std::string::npos) << again.err;
    auto other = run({"sft", "--config", dir + "/sft.toml", "--resume", "--epochs", "16"}, dir);
    EXPECT_EQ(other.code, 2);
    EXPECT_NE(other.err.find("differs in: sft"), std::string::npos) << other.err;
    {
        // A directory another SFT run holds is refused, whatever it holds.
        const kz::FileLock held(dir + "/sft-out/sft.lock", "the test");
        auto busy = run({"sft", "--config", dir + "/sft.toml", "--resume"}, dir);
        EXPECT_EQ(busy.code, 2);
        EXPECT_NE(busy.err.find("in use by another SFT run"), std::string::npos) << busy.err;
    }
    fs::remove_all(dir + "/sft-out/checkpoints");

    // Pairs from a task directory and a candidate directory (a task without a candidate is no pair),
    // and SFT as the trainer's warm start.
    const std::string tasks = task_dir("warm-tasks", {"relu.py", "gelu.py", "softmax.py"});
    fs::create_directories(dir + "/warm-cands");
    for (const char* f : {"relu.py", "gelu.py"})
        fs::copy_file(kSrc + "/examples/known_good/triton/" + f, dir + "/warm-cands/" + f);
    std::ofstream(dir + "/warm.toml") << "seed = 1\niterations = 1\nwarm_start = true\n[coder]\nmodel = \"init:tiny\"\n"
                                      << "tokenizer = \"" << kSrc
                                      << "/data/qwen2.5-tokenizer\"\n[propose]\nenabled = false\n"
                                      << "[coder_phase]\nsteps = 0\n[sft]\ntasks = \"" << tasks << "\"\ncandidates = \""
                                      << dir << "/warm-cands\"\nepochs = 2\nbatch_size = 2\nlr = 0.01\n";
    auto warm = run({"train", "--config", dir + "/warm.toml", "--out", dir + "/warm-run"}, dir);
    ASSERT_EQ(warm.code, 0) << warm.err;
    json m = results(dir + "/warm-run/metrics.jsonl").at(0);
    EXPECT_EQ(m["warm_start"]["pairs"].get<int>(), 2) << m.dump();
    EXPECT_EQ(m["warm_start"]["steps"].get<int>(), 2) << m.dump();
    EXPECT_TRUE(m["stage_s"].contains("warm_start")) << m.dump();

    std::ofstream(dir + "/bad.jsonl") << "{\"prompt\": \"x\"}\n";
    auto bad = run({"sft", "--config", dir + "/sft.toml", "--data", dir + "/bad.jsonl"}, dir);
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("bad.jsonl:1"), std::string::npos) << bad.err;
}

}  // namespace
