// Test driver for the golden tests (tests/engine/test_engine_hf.py): reads one JSON request on stdin,
// runs the engine, prints one JSON reply. Ops:
//   {"op": "prefill_logits", "model", "prompts": [[id...]...]}         -> {"logits": [row][pos][V]}
//   {"op": "decode_logits", "model", "prompts", "forced": [[id...]...]} -> {"logits": [row][step][V]}
//      step 0 is the prompt's last position; step i+1 follows forced[row][i] through the KV cache
//   {"op": "generate", "model", "prompts", "max_new_tokens", "temperature", "top_p", "top_k", "seed",
//    "stop_ids", "cuda_graph"}                                          -> {"completions": [{tokens, logprobs,
//    stopped}]}
//   {"op": "score", "model", "prompt": [id...], "completion": [id...]}  -> {"logprobs": [...]}
//   {"op": "train_step", "model", "ids", "valid", "weights", "full": bool, "lr", "max_grad_norm",
//    "weight_decay", "recompute": bool, "chunk", "micro_batches": n, "report": [names],
//    "save_adapter": dir, "save_merged": dir, "steps": n, "save_state": file, "load_state": file}
//                                                                       -> {"loss", "grad_norm", "grads",
//                                                                       "params_after"}
// Optional "device" (default cpu), "dtype" (default float32), "adapter" (a peft directory to load),
// "lora_enabled" (default true) and "fused" (the engine's CUDA kernels where usable, default true).
// Every reply also says "fused" (whether generation ran on them) and "fused_built".
#include <iostream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/fused_ops.h"
#include "engine/generate.h"
#include "engine/hf_checkpoint.h"
#include "engine/lora.h"
#include "engine/training.h"
#include "engine/model.h"

using json = nlohmann::json;

static json to_json(const torch::Tensor& t) {  // nested lists of a CPU float tensor
    auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
    if (c.dim() == 1) return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    json out = json::array();
    for (int64_t i = 0; i < c.size(0); ++i) out.push_back(to_json(c[i]));
    return out;
}

int main() {
    try {
        json req = json::parse(std::string(std::istreambuf_iterator<char>(std::cin), {}));
        torch::Device dev(req.value("device", std::string("cpu")));
        kz::Model model = kz::Model::load(req.at("model").get<std::string>(), dev,
                                          kz::dtype_from_name(req.value("dtype", std::string("float32"))));
        kz::LoraConfig lora;
        if (req.contains("adapter")) lora = kz::load_peft_adapter(model, req["adapter"].get<std::string>());
        model.lora_enabled = req.value("lora_enabled", true);
        model.lora_in_base_dtype = req.value("lora_in_base_dtype", false);
        model.use_fused_kernels = req.value("fused", true);
        const std::string op = req.at("op");
        json reply;
        if (op == "prefill_logits" || op == "decode_logits") {
            auto prompts = req.at("prompts").get<std::vector<std::vector<int64_t>>>();
            std::vector<std::vector<int64_t>> forced;
            if (op == "decode_logits") forced = req.at("forced").get<std::vector<std::vector<int64_t>>>();
            int64_t steps = forced.empty() ? 0 : static_cast<int64_t>(forced[0].size());
            kz::BatchDecoder dec(model, prompts, steps);
            json rows = json::array();
            if (op == "prefill_logits") {
                auto logits = dec.prefill(/*all_positions=*/true);  // (B, P, V), right-padded
                for (size_t b = 0; b < prompts.size(); ++b)
                    rows.push_back(to_json(logits[b].slice(0, 0, static_cast<int64_t>(prompts[b].size()))));
            } else {
                std::vector<torch::Tensor> per_step = {dec.prefill()};  // (B, V)
                for (int64_t s = 0; s < steps; ++s) {
                    std::vector<int64_t> col;
                    for (const auto& f : forced) col.push_back(f.at(s));
                    per_step.push_back(dec.step(torch::tensor(col, torch::kInt64).to(dev)));
                }
                auto all = torch::stack(per_step, 1);  // (B, steps+1, V)
                for (int64_t b = 0; b < all.size(0); ++b) rows.push_back(to_json(all[b]));
            }
            reply["logits"] = rows;
        } else if (op == "generate") {
            kz::GenerateRequest g;
            g.prompts = req.at("prompts").get<std::vector<std::vector<int64_t>>>();
            g.max_new_tokens = req.value("max_new_tokens", int64_t{32});
            g.stop_ids = req.value("stop_ids", std::vector<int64_t>{});
            g.sampling.temperature = req.value("temperature", 0.0);
            g.sampling.top_p = req.value("top_p", 1.0);
            g.sampling.top_k = req.value("top_k", int64_t{0});
            g.sampling.seed = req.value("seed", uint64_t{0});
            g.cuda_graph = req.value("cuda_graph", true);
            json cs = json::array();
            for (const auto& c : kz::generate(model, g))
                cs.push_back({{"tokens", c.tokens}, {"logprobs", c.logprobs}, {"stopped", c.stopped}});
            reply["completions"] = cs;
        } else if (op == "score") {
            reply["logprobs"] = kz::score(model, req.at("prompt").get<std::vector<int64_t>>(),
                                          req.at("completion").get<std::vector<int64_t>>());
        } else if (op == "train_step") {
            auto ids = req.at("ids").get<std::vector<std::vector<int64_t>>>();
            auto valid = req.at("valid").get<std::vector<std::vector<int64_t>>>();
            auto weights = req.at("weights").get<std::vector<std::vector<double>>>();
            const int64_t B = static_cast<int64_t>(ids.size()), T = static_cast<int64_t>(ids[0].size());
            auto flat = [&](auto& rows, torch::ScalarType t) {
                std::vector<double> v;
                for (auto& r : rows) v.insert(v.end(), r.begin(), r.end());
                return torch::tensor(v, torch::kFloat64).view({B, T}).to(t);
            };
            kz::TrainBatch batch{flat(ids, torch::kInt64), flat(valid, torch::kBool), flat(weights, torch::kFloat32)};
            auto params = req.value("full", false) ? kz::full_parameters(model) : kz::lora_parameters(model);
            kz::OptimConfig oc;
            oc.lr = req.value("lr", 1e-3);
            oc.max_grad_norm = req.value("max_grad_norm", 1.0);
            oc.weight_decay = req.value("weight_decay", 0.0);
            kz::PolicyOptimizer opt(params, oc);
            if (req.contains("load_state")) opt.load_state(req["load_state"].get<std::string>());
            model.recompute_layers = req.value("recompute", false);
            const int64_t micro = req.value("micro_batches", int64_t{1}), chunk = req.value("chunk", int64_t{1024});
            const auto rows =
                req.value("scored", std::string("all")) == "weighted" ? kz::ScoredRows::weighted : kz::ScoredRows::all;
            std::set<std::string> report;
            for (const auto& n : req.value("report", std::vector<std::string>{})) report.insert(n);
            json grads, after;
            double loss = 0;
            for (int64_t step = 0, steps = req.value("steps", int64_t{1}); step < steps; ++step) {
                loss = 0;
                for (int64_t m = 0; m < micro; ++m) {
                    int64_t s0 = B * m / micro, s1 = B * (m + 1) / micro;
                    kz::TrainBatch mb{batch.ids.slice(0, s0, s1), batch.valid.slice(0, s0, s1),
                                      batch.weights.slice(0, s0, s1)};
                    loss +=
                        kz::accumulate(model, mb, kz::weighted_nll, micro, chunk, rows) / static_cast<double>(micro);
                }
                for (auto& [name, p] : opt.params())
                    if (report.empty() || report.count(name)) grads[name] = to_json(p.grad().reshape(-1));
                reply["grad_norm"] = opt.step();
            }
            if (req.contains("save_state")) opt.save_state(req["save_state"].get<std::string>());
            reply["optimizer_steps"] = opt.steps();
            for (auto& [name, p] : opt.params())
                if (report.empty() || report.count(name)) after[name] = to_json(p.detach().reshape(-1));
            reply["loss"] = loss;
            reply["grads"] = grads;
            reply["params_after"] = after;
            if (req.contains("save_adapter"))
                kz::save_peft_adapter(model, lora, req["save_adapter"].get<std::string>());
            if (req.contains("save_merged")) {
                kz::merge_lora(model);
                kz::save_hf_model(model, req["save_merged"].get<std::string>(), torch::kFloat32);
            }
        } else {
            throw std::runtime_error("unknown op " + op);
        }
        reply["fused"] = model.fused_generation();
        reply["fused_built"] = kz::fused::available();
        std::cout << reply.dump() << "\n";
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "engine_probe: " << e.what() << "\n";
        return 2;
    }
}
