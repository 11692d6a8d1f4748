#include "server/routes.h"

#include "server/api_error.h"
#include "server/http_front.h"
#include "server/page.h"
#include "server/peer_watch.h"
#include "server/request.h"
#include "server/responses.h"
#include "server/sse.h"
#include "util/error.h"

namespace eaglet::server {

using httplib::Request;
using httplib::Response;
using nlohmann::json;

namespace {

void send_json(Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.body(), e.status);
}

// Every handler answers its failures as OpenAI error objects; none escapes to the HTTP library.
template <typename F>
httplib::Server::Handler guarded(F f) {
  return [f](const Request& req, Response& res) {
    try {
      f(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, ApiError(400, "invalid_request_error", e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "server_error", e.what()));
    }
  };
}

// Checks the prompt and the tokens asked for against the context; returns max_tokens.
int checked_max_tokens(const GenerationRequest& r, size_t prompt_tokens, int64_t ctx, const std::string& ctx_note) {
  const int64_t p = static_cast<int64_t>(prompt_tokens);
  const int64_t m = r.max_tokens ? *r.max_tokens : r.endpoint == Endpoint::Chat ? ctx - p : 16;
  if (p + std::max<int64_t>(m, 1) <= ctx) return static_cast<int>(m);
  ApiError e(400, "invalid_request_error",
             "this server's context is " + std::to_string(ctx) + " tokens (-c" + ctx_note + "); the prompt has " +
                 std::to_string(p) + " tokens and max_tokens asks for " + std::to_string(m) + " more (" +
                 std::to_string(p + m) + " > " + std::to_string(ctx) + "): shorten the prompt or lower max_tokens",
             r.max_tokens                   ? "max_tokens"
             : r.endpoint == Endpoint::Chat ? "messages"
                                            : "prompt");
  e.extra = {{"n_prompt_tokens", p}, {"n_ctx", ctx}};
  throw e;
}

void generation(RouteContext& c, const Request& req, Response& res, Endpoint endpoint) {
  GenerationRequest r = parse_generation_request(req.body, endpoint, c.engine.vocab_size());
  std::vector<int32_t> prompt = c.engine.prompt_tokens(r);
  if (prompt.empty()) bad_request("prompt", "the prompt is empty after tokenization");
  const int max_tokens = checked_max_tokens(r, prompt.size(), c.engine.context(), c.engine.context_note());
  auto job = std::make_shared<Job>(c.next_id++, std::move(r), std::move(prompt), max_tokens);
  if (c.stopping) throw ApiError(503, "unavailable_error", "the server is shutting down");
  const bool stream = job->request.stream;
  if (stream) ++c.open_streams;  // counted before the job can finish, so that shutdown waits for its end
  switch (c.scheduler.submit(job)) {
    case Scheduler::Admit::Queued: break;
    case Scheduler::Admit::Full:
      if (stream) --c.open_streams;
      throw ApiError(503, "unavailable_error", "the request queue is full (--max-queue); retry later");
    case Scheduler::Admit::ShuttingDown:
      if (stream) --c.open_streams;
      throw ApiError(503, "unavailable_error", "the server is shutting down");
  }
  const ResponseIds ids = response_ids(*job, c.served_model);
  if (stream) {
    stream_job(res, job, ids, [&c] { --c.open_streams; });
    return;
  }
  // A client that leaves before its answer cancels the job: it ends within one step, as "abort".
  const PeerWatch client(HttpFront::answering_socket(), req.remote_addr, req.remote_port);
  while (!job->finished_within(std::chrono::milliseconds(50)))
    if (!job->cancelled() && client.gone()) job->cancel();
  const Job::Update all = job->wait_finished();
  const JobResult result = job->result();
  if (!result.error.empty()) throw ApiError(500, "server_error", "generation failed: " + result.error);
  send_json(res, completion_json(*job, ids, all.text, result, all.logprobs));
}

void tokenize(RouteContext& c, const Request& req, Response& res) {
  const json j = parse_json_object(req.body);
  std::vector<int32_t> ids;
  if (j.contains("messages") && !j["messages"].is_null()) {
    const ChatJson ordered = ChatJson::parse(req.body);
    const ChatJson messages = chat_messages(ordered["messages"], "messages");  // depth checked before any copy
    try {
      check_chat_json_depth(ordered, "the request body");
    } catch (const Error& e) {
      bad_request("", e.what());
    }
    ChatJson kwargs = ordered.contains("chat_template_kwargs") ? ordered["chat_template_kwargs"] : ChatJson::object();
    if (!kwargs.is_object()) bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    ids = c.engine.chat_tokens(messages, ordered.contains("tools") ? ordered["tools"] : ChatJson(), kwargs);
  } else {
    std::optional<std::string> text = opt_string(j, "prompt");
    if (!text) text = opt_string(j, "content");
    if (!text) bad_request("prompt", "'prompt' (or 'content' or 'messages') is required");
    std::optional<bool> special = opt_bool(j, "add_special_tokens");
    if (!special) special = opt_bool(j, "add_special");
    ids = c.engine.tokenizer().encode(*text, special.value_or(true));
  }
  send_json(res, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", c.engine.context()}});
}

void detokenize(RouteContext& c, const Request& req, Response& res) {
  const json j = parse_json_object(req.body);
  if (!j.contains("tokens") || j["tokens"].is_null()) bad_request("tokens", "'tokens' is required");
  const std::string text = c.engine.tokenizer().decode(token_ids(j["tokens"], "tokens", c.engine.vocab_size()));
  send_json(res, {{"prompt", text}, {"content", text}});
}

json models(const RouteContext& c) {
  return {{"object", "list"},
          {"data", json::array({{{"id", c.served_model},
                                 {"object", "model"},
                                 {"created", c.started},
                                 {"owned_by", "eaglet"},
                                 {"root", c.model_path},
                                 {"max_model_len", c.engine.context()}}})}};
}

// Equal strings, in a time that depends on the length of `given` only: how long a wrong key takes to refuse says
// nothing of where it first differs from the key.
bool same_secret(const std::string& given, const std::string& key) {
  unsigned char differ = given.size() != key.size();
  for (size_t i = 0; i < given.size(); ++i)
    differ |= static_cast<unsigned char>(given[i] ^ (i < key.size() ? key[i] : 0));
  return differ == 0;
}

// One Content-Length, a decimal byte count: the HTTP library would read the first of two, and a negative one as a
// huge count.
void check_content_length(const Request& req) {
  const size_t count = req.get_header_value_count("Content-Length");
  if (count > 1)
    throw ApiError(400, "invalid_request_error",
                   "the request has " + std::to_string(count) + " Content-Length headers; send one", "Content-Length");
  if (count == 0) return;
  const std::string v = req.get_header_value("Content-Length");
  if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
    throw ApiError(400, "invalid_request_error",
                   "Content-Length must be a byte count (decimal digits), found '" + v.substr(0, 32) + "'",
                   "Content-Length");
}

}  // namespace

void add_routes(httplib::Server& s, RouteContext& c) {
  s.set_payload_max_length(c.max_body_bytes);
  // Runs before the body is read; a refused request's body is never read (each connection closes after its one
  // answer, server.cpp).
  s.set_pre_routing_handler([&c](const Request& req, Response& res) {
    try {
      check_content_length(req);
    } catch (const ApiError& e) {
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool open = req.path == "/health" || req.path == "/v1/health" || req.path == "/";  // the page has no data
    if (c.api_key.empty() || open || same_secret(req.get_header_value("Authorization"), "Bearer " + c.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "authentication_error",
                             "missing or wrong API key: send the header 'Authorization: Bearer KEY' (--api-key)"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Answers the library produces itself (no route, a body over the limit) get an error object too.
  s.set_error_handler([&c](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, ApiError(400, "invalid_request_error",
                               "the request body is larger than " + std::to_string(c.max_body_bytes) + " bytes"));
    else if (res.status == 404)
      send_error(res, ApiError(404, "not_found_error", "no route " + req.method + " " + req.path));
    else
      send_error(res, ApiError(res.status, "invalid_request_error", "the request could not be read"));
  });
  s.set_logger([&c](const Request&, const Response& res) { c.metrics.http_response(res.status); });

  s.Get("/",
        [](const Request&, Response& res) { res.set_content(std::string(index_page()), "text/html; charset=utf-8"); });
  auto health = guarded([&c](const Request&, Response& res) {
    if (c.stopping) throw ApiError(503, "unavailable_error", "the server is shutting down");
    send_json(res, {{"status", "ok"}});
  });
  s.Get("/health", health);
  s.Get("/v1/health", health);
  auto list_models = guarded([&c](const Request&, Response& res) { send_json(res, models(c)); });
  s.Get("/v1/models", list_models);
  s.Get("/models", list_models);
  s.Get("/metrics", guarded([&c](const Request&, Response& res) {
          res.set_content(c.metrics.render(), "text/plain; version=0.0.4");
        }));
  // SGLang's /flush_cache: the prefix cache forgets what no running request holds (bench serve flushes before each
  // run).
  auto flush = guarded([&c](const Request&, Response& res) {
    if (!c.engine.kv_pool().caches_prefixes()) {
      res.set_content("No prefix cache to flush (--disable-radix-cache).\n", "text/plain");
      return;
    }
    const int64_t blocks = c.engine.kv_pool().drop_idle_cached();
    c.scheduler.publish_kv();
    res.set_content(
        "Cache flushed: " + std::to_string(blocks) + " blocks freed (blocks that running requests hold stay cached).\n",
        "text/plain");
  });
  s.Get("/flush_cache", flush);
  s.Post("/flush_cache", flush);
  s.Post("/v1/completions",
         guarded([&c](const Request& req, Response& res) { generation(c, req, res, Endpoint::Completions); }));
  s.Post("/v1/chat/completions",
         guarded([&c](const Request& req, Response& res) { generation(c, req, res, Endpoint::Chat); }));
  auto tok = guarded([&c](const Request& req, Response& res) { tokenize(c, req, res); });
  s.Post("/tokenize", tok);
  s.Post("/v1/tokenize", tok);
  auto detok = guarded([&c](const Request& req, Response& res) { detokenize(c, req, res); });
  s.Post("/detokenize", detok);
  s.Post("/v1/detokenize", detok);
}

}  // namespace eaglet::server
