// eaglet serve: an OpenAI-compatible HTTP server (completions, chat, streaming, metrics), EAGLE-3 with -d DRAFTER.
#include "cli/commands.h"
#include "cli/spec_flags.h"
#include "server/server.h"

namespace eaglet::cli {

Command add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API (see README: serve)");
  auto o = std::make_shared<server::ServerOptions>();
  cmd->add_option("-m,--model,--model-path", o->engine.model,
                  "Hugging Face model folder (config.json, tokenizer.json, *.safetensors)")
      ->required();
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--served-model-name,--alias", o->served_model_name, "Model id in responses (default: the -m path)");
  cmd->add_option("--max-batch", o->engine.max_batch, "Sequences decoded together, one target forward per step")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--batch-row-budget", o->engine.batch_row_budget,
                  "Rows of a step's forward: one per running sequence, the rest shared as draft tokens (-1: no cap)")
      ->check(CLI::Range(-1, 65536));
  cmd->add_option("--max-queue", o->max_queue, "Requests that may wait beyond the running ones; more get 503")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body accepted")
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("-c,--ctx", o->engine.context, "Context per request in tokens (default: max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch", o->engine.prefill_batch, "Prompt tokens per prefill forward")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)");
  cmd->add_flag("--allow-unused-tensors", o->engine.allow_unused_tensors,
                "Load even if the checkpoint holds tensors the model does not use (listed on stderr)");
  add_spec_flags(*cmd, o->engine.spec);
  return [o] { return server::serve(*o); };
}

}  // namespace eaglet::cli
