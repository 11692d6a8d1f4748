// eaglet serve: an OpenAI-compatible HTTP server (completions, chat, streaming, metrics), EAGLE-3 with -d DRAFTER.
#include "cli/args.h"
#include "cli/commands.h"
#include "server/server.h"
#include "util/log.h"

namespace eaglet::cli {

namespace {

struct ServeArgs {
  server::ServerOptions server;
  ModelArgs model;
  ThreadArgs threads;
  ContextArgs context;
};

int run_serve(ServeArgs& a) {
  server::EngineOptions& e = a.server.engine;
  e.model = a.model.dir;
  e.allow_unused_tensors = a.model.allow_unused_tensors;
  e.context = a.context.context;
  e.prefill_batch = a.context.batch;
  a.server.threads = a.threads.threads;
  a.server.on_loaded = [&a] {
    log_configuration("eaglet serve", {{"model", a.model.describe()},
                                       {"threads", a.threads.describe()},
                                       {"context", a.context.describe()},
                                       {"speculative", a.server.engine.spec.describe()},
                                       {"server", a.server.describe()}});
  };
  return server::serve(a.server);
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API (docs/serving.md)");
  auto a = std::make_shared<ServeArgs>();
  server::ServerOptions& o = a->server;
  a->model.add_to(*cmd, "-m,--model,--model-path");
  cmd->add_option("--host", o.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o.port, "Port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--served-model-name,--alias", o.served_model_name, "Model id in responses (default: the -m path)");
  cmd->add_option("--max-batch", o.engine.max_batch, "Sequences decoded together, one target forward per step")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--batch-row-budget", o.engine.batch_row_budget,
                  "Rows of a step's forward: one per running sequence, the rest shared as draft tokens (-1: no cap)")
      ->check(CLI::Range(-1, 65536));
  cmd->add_option("--max-queue", o.max_queue, "Requests that may wait beyond the running ones; more get 503")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-body-bytes", o.max_body_bytes, "Largest request body accepted")
      ->check(CLI::Range(1024, 1 << 30));
  a->context.add_to(*cmd, "Context per request in tokens (default: max_position_embeddings)");
  a->threads.add_to(*cmd);
  add_drafter_args(*cmd, o.engine.spec);
  add_round_args(*cmd, o.engine.spec);
  return [a] { return run_serve(*a); };
}

}  // namespace eaglet::cli
