#include "serve/server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/chat.h"
#include "engine/generate.h"
#include "openai/api.h"

namespace kz {

using json = nlohmann::json;

namespace {

int64_t now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// One HTTP request in flight: filled by the scheduler thread, read by the HTTP thread.
struct Pending {
    openai::CompletionRequest req;
    std::vector<int64_t> prompt_ids;
    std::string id;
    int64_t created = 0;

    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::vector<int64_t>> tokens;  // per choice, without the stop token
    std::vector<std::string> finish;           // per choice, "" while running
    std::vector<std::string> held;             // per choice: bytes of a character not yet complete
    std::deque<std::string> events;            // streaming: SSE lines not yet sent
    bool done = false;
    std::string error;
};

}  // namespace

struct PolicyServer::Impl {
    const Model& model;
    const Tokenizer& tok;
    ChatFormat chat;
    std::vector<int64_t> stops;
    std::set<int64_t> stop_set;
    ServeOptions opts;
    httplib::Server http;

    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Pending>> queue;
    bool stopping = false;
    std::thread scheduler;
    uint64_t next_id = 0, seed_counter = 0;

    Impl(const Model& m, const Tokenizer& t, std::vector<int64_t> s, ServeOptions o)
        : model(m),
          tok(t),
          chat(ChatFormat::from_template(t.chat_template())),
          stops(std::move(s)),
          stop_set(stops.begin(), stops.end()),
          opts(std::move(o)) {}

    void push_event(Pending& p, const json& j) {
        p.events.push_back("data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
    }

    // The scheduler: takes the oldest request and every queued one with the same sampling
    // settings (up to max_batch rows), decodes them as one batch, and hands each its choices.
    void schedule() {
        for (;;) {
            std::vector<std::shared_ptr<Pending>> batch;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return stopping || !queue.empty(); });
                if (stopping) return;
                auto first = queue.front();
                queue.pop_front();
                batch.push_back(first);
                int rows = first->req.n;
                // The batch's cache holds its longest prompt plus its largest budget: both must fit
                // the context together, not only each request's own.
                const int64_t limit = model.config().max_position_embeddings;
                auto longest = static_cast<int64_t>(first->prompt_ids.size());
                int64_t budget = first->req.max_tokens;
                for (auto it = queue.begin(); it != queue.end();) {
                    const auto& r = (*it)->req;
                    const int64_t l = std::max(longest, static_cast<int64_t>((*it)->prompt_ids.size()));
                    const int64_t m = std::max(budget, r.max_tokens);
                    if (r.temperature == first->req.temperature && r.top_p == first->req.top_p &&
                        r.top_k == first->req.top_k && rows + r.n <= opts.max_batch && l + m <= limit) {
                        rows += r.n;
                        longest = l;
                        budget = m;
                        batch.push_back(*it);
                        it = queue.erase(it);
                    } else {
                        ++it;
                    }
                }
            }
            run_batch(batch);
        }
    }

    void run_batch(const std::vector<std::shared_ptr<Pending>>& batch) {
        GenerateRequest g;
        g.max_new_tokens = 0;
        std::vector<std::pair<Pending*, int>> rows;  // row -> (request, choice)
        for (const auto& p : batch) {
            g.max_new_tokens = std::max(g.max_new_tokens, p->req.max_tokens);
            for (int c = 0; c < p->req.n; ++c) {
                g.prompts.push_back(p->prompt_ids);
                rows.emplace_back(p.get(), c);
            }
        }
        const auto& r0 = batch.front()->req;
        g.stop_ids = stops;
        g.sampling.temperature = r0.temperature;
        g.sampling.top_p = r0.top_p;
        g.sampling.top_k = r0.top_k;
        g.sampling.seed = r0.seed ? *r0.seed : 0x9e3779b97f4a7c15ULL * ++seed_counter;
        auto on_token = [&](size_t row, int64_t token) {
            auto [p, c] = rows[row];
            std::lock_guard lock(p->mu);
            if (!p->finish[c].empty()) return;
            if (stop_set.count(token)) {
                p->finish[c] = "stop";
            } else {
                p->tokens[c].push_back(token);
                if (p->req.stream) {
                    p->held[c] += tok.token_bytes(token);
                    const size_t n = complete_utf8_prefix(p->held[c]);
                    if (n > 0) {
                        push_event(*p, openai::chunk(p->req, p->id, opts.model_name, p->created, c,
                                                     p->held[c].substr(0, n), {}));
                        p->held[c].erase(0, n);
                    }
                }
                if (static_cast<int64_t>(p->tokens[c].size()) >= p->req.max_tokens) p->finish[c] = "length";
            }
            if (p->req.stream && !p->finish[c].empty()) {
                if (!p->held[c].empty())
                    push_event(*p, openai::chunk(p->req, p->id, opts.model_name, p->created, c, p->held[c], {}));
                push_event(*p, openai::chunk(p->req, p->id, opts.model_name, p->created, c, "", p->finish[c]));
            }
            p->cv.notify_all();
        };
        std::string error;
        try {
            generate(model, g, on_token);
        } catch (const std::exception& e) {
            error = e.what();
        }
        for (const auto& p : batch) {
            std::lock_guard lock(p->mu);
            for (int c = 0; c < p->req.n; ++c)
                if (p->finish[c].empty()) {
                    p->finish[c] = "length";  // generation ended for the batch (budget of a longer request)
                    if (p->req.stream && error.empty())
                        push_event(*p, openai::chunk(p->req, p->id, opts.model_name, p->created, c, "", p->finish[c]));
                }
            p->error = error;
            p->done = true;
            p->cv.notify_all();
        }
    }

    // Parses and queues a request; answers 4xx itself when the request is unusable.
    std::shared_ptr<Pending> admit(const httplib::Request& hreq, httplib::Response& res, bool chat) {
        auto fail = [&](int status, const std::string& msg, const std::string& type = "invalid_request_error") {
            res.status = status;
            res.set_content(openai::error(msg, type).dump(), "application/json");
            return nullptr;
        };
        json body = json::parse(hreq.body, nullptr, false);
        if (body.is_discarded()) return fail(400, "the request body is not JSON");
        auto p = std::make_shared<Pending>();
        try {
            p->req = openai::parse_request(body, chat);
        } catch (const std::invalid_argument& e) {
            return fail(400, e.what());
        }
        if (!p->req.model.empty() && p->req.model != opts.model_name)
            return fail(
                404, "model '" + p->req.model + "' is not served here (this server serves '" + opts.model_name + "')",
                "not_found_error");
        p->prompt_ids = chat ? tok.encode(this->chat.render(p->req.messages, true)) : tok.encode(p->req.prompt);
        if (p->prompt_ids.empty()) return fail(400, "the prompt is empty");
        const int64_t limit = model.config().max_position_embeddings;
        if (static_cast<int64_t>(p->prompt_ids.size()) + p->req.max_tokens > limit)
            return fail(400, "prompt (" + std::to_string(p->prompt_ids.size()) + " tokens) + max_tokens (" +
                                 std::to_string(p->req.max_tokens) + ") exceeds the model's context of " +
                                 std::to_string(limit));
        if (p->req.n > opts.max_batch)
            return fail(400, "'n' exceeds the server's batch of " + std::to_string(opts.max_batch));
        p->tokens.resize(p->req.n);
        p->finish.resize(p->req.n);
        p->held.resize(p->req.n);
        p->created = now_s();
        {
            std::lock_guard lock(mu);
            p->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id);
            queue.push_back(p);
        }
        cv.notify_all();
        return p;
    }

    void answer(const std::shared_ptr<Pending>& p, httplib::Response& res) {
        if (!p->req.stream) {
            std::unique_lock lock(p->mu);
            p->cv.wait(lock, [&] { return p->done; });
            if (!p->error.empty()) {
                res.status = 500;
                res.set_content(openai::error(p->error, "server_error").dump(), "application/json");
                return;
            }
            std::vector<openai::Choice> choices;
            int64_t completion_tokens = 0;
            for (int c = 0; c < p->req.n; ++c) {
                choices.push_back({tok.decode(p->tokens[c]), p->finish[c]});
                completion_tokens += static_cast<int64_t>(p->tokens[c].size());
            }
            res.set_content(openai::response(p->req, p->id, opts.model_name, p->created, choices,
                                             static_cast<int64_t>(p->prompt_ids.size()), completion_tokens)
                                .dump(-1, ' ', false, json::error_handler_t::replace),
                            "application/json");
            return;
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider("text/event-stream", [p](size_t, httplib::DataSink& sink) {
            std::deque<std::string> out;
            bool finished;
            {
                std::unique_lock lock(p->mu);
                p->cv.wait(lock, [&] { return p->done || !p->events.empty(); });
                out.swap(p->events);
                finished = p->done;
            }
            for (const auto& e : out)
                if (!sink.write(e.data(), e.size())) return false;  // the client went away
            if (finished) {
                std::string tail =
                    p->error.empty() ? "" : "data: " + openai::error(p->error, "server_error").dump() + "\n\n";
                tail += "data: [DONE]\n\n";
                sink.write(tail.data(), tail.size());
                sink.done();
            }
            return true;
        });
    }
};

PolicyServer::PolicyServer(const Model& model, const Tokenizer& tokenizer, std::vector<int64_t> stop_ids,
                           ServeOptions opts)
    : impl_(std::make_unique<Impl>(model, tokenizer, std::move(stop_ids), std::move(opts))) {}

PolicyServer::~PolicyServer() { stop(); }

void PolicyServer::run() {
    Impl& s = *impl_;
    s.http.new_task_queue = [n = s.opts.http_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
    for (bool chat : {true, false})
        s.http.Post(chat ? "/v1/chat/completions" : "/v1/completions",
                    [&s, chat](const httplib::Request& req, httplib::Response& res) {
                        if (auto p = s.admit(req, res, chat)) s.answer(p, res);
                    });
    s.http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
        res.set_content(openai::models(s.opts.model_name, now_s()).dump(), "application/json");
    });
    s.http.Get("/health",
               [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
    int port = s.opts.port;
    if (port == 0)
        port = s.http.bind_to_any_port(s.opts.host);
    else if (!s.http.bind_to_port(s.opts.host, port))
        port = -1;
    if (port < 0) throw std::runtime_error("cannot listen on " + s.opts.host + ":" + std::to_string(s.opts.port));
    s.scheduler = std::thread([&s] { s.schedule(); });
    std::printf("kernelzero serve: listening on http://%s:%d (model %s)\n", s.opts.host.c_str(), port,
                s.opts.model_name.c_str());
    std::fflush(stdout);
    s.http.listen_after_bind();
}

void PolicyServer::stop() {
    Impl& s = *impl_;
    std::deque<std::shared_ptr<Pending>> abandoned;
    {
        std::lock_guard lock(s.mu);
        if (s.stopping) return;
        s.stopping = true;
        abandoned.swap(s.queue);
    }
    for (auto& p : abandoned) {  // queued, never started: answered with an error, not left hanging
        std::lock_guard lock(p->mu);
        p->error = "the server is stopping";
        p->done = true;
        p->cv.notify_all();
    }
    s.cv.notify_all();
    s.http.stop();
    if (s.scheduler.joinable()) s.scheduler.join();
}

}  // namespace kz
