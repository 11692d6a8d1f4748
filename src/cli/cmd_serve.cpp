// eaglet serve: an OpenAI-compatible HTTP server (completions, chat, streaming, metrics), EAGLE-3 with -d DRAFTER.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "server/server.h"
#include "util/log.h"

namespace eaglet::cli {

Command add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API (docs/serving.md)");
  auto o = std::make_shared<server::ServerOptions>();
  server::EngineOptions& e = o->engine;
  add_model_args(*cmd, e.model, e.load, "-m,--model,--model-path");
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--served-model-name,--alias", o->served_model_name, "Model id in responses (default: the -m path)");
  cmd->add_option("--max-batch", e.max_batch, "Sequences decoded together, one target forward per step")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--batch-row-budget", e.batch_row_budget,
                  "Rows of a step's forward: one per running sequence, the rest shared as draft tokens (-1: no cap)")
      ->check(CLI::Range(-1, 65536));
  cmd->add_option("--max-queue", o->max_queue, "Requests that may wait beyond the running ones; more get 503")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body accepted")
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-connections", o->max_connections,
                  "Open connections at most (being read or answered); one more is answered 503 at once")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--read-timeout", o->read_timeout_s,
                  "Seconds from a connection's accept to its whole request; a slower one is answered 408")
      ->check(CLI::Range(0.1, 3600.0));
  add_context_args(*cmd, e.context, e.prefill_batch,
                   "Context per request in tokens (default: max_position_embeddings)");
  cmd->add_option("--chunked-prefill-size", e.prefill_batch,
                  "Prompt tokens per prefill forward, as -b: one such forward runs between two decode steps")
      ->check(CLI::Range(1, 1 << 20))
      ->excludes("-b");  // the same setting: given both, neither silently wins
  cmd->add_option("--max-total-tokens", e.max_total_tokens,
                  "Tokens the paged KV pool holds for all sequences (SGLang's name; default: --mem-fraction-static "
                  "of the memory available after loading, at most --max-batch x context)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--mem-fraction-static", e.mem_fraction,
                  "Fraction of the available memory the KV pool may take when --max-total-tokens is not given")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_flag_callback(
      "--disable-radix-cache,--no-enable-prefix-caching", [o] { o->engine.prefix_cache = false; },
      "Turn the prefix cache off (SGLang's and vLLM's names): every prompt is prefilled from its first token");
  add_threads_option(*cmd, o->threads);
  add_chat_template_args(*cmd, e.chat_template_file);
  add_drafter_args(*cmd, e.spec);
  add_round_args(*cmd, e.spec);
  return [o] {
    const server::ServerOptions* self = o.get();  // not the shared_ptr: it would own itself
    o->on_loaded = [self] {
      const server::EngineOptions& e = self->engine;
      log_configuration("eaglet serve", {{"model", describe_model(e.model, e.load)},
                                         {"threads", describe_threads()},
                                         {"context", describe_context(e.context, e.prefill_batch)},
                                         {"speculative", e.spec.describe()},
                                         {"server", self->describe()}});
    };
    return server::serve(*o);
  };
}

}  // namespace eaglet::cli
