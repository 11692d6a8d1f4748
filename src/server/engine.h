#pragma once
// The models and the decoding of one job with the existing loops (generate/ for the target alone, speculative/ for
// EAGLE-3), batched across requests. Only the scheduler thread calls start/step/finish; tokenization is const and may
// run on any thread.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "drafter/speculation.h"
#include "model/transformer.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/sequence.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace eaglet::server {

struct EngineOptions {
  std::string model;
  SpecOptions spec;
  int64_t context = 0;  // 0: the model's max_position_embeddings
  int prefill_batch = 256;
  LoadOptions load;                // how the model's checkpoint is read
  int max_batch = 8;               // sequences decoded together (one target forward per step)
  int batch_row_budget = 8;        // rows of a step's forward: one per sequence, the rest drafts (< 0: no cap)
  std::string chat_template_file;  // --chat-template-file: replaces the model's chat template
  int64_t max_total_tokens = 0;    // tokens the KV pool holds (0: from the memory budget)
  double mem_fraction = 0.85;      // the budget: this fraction of the memory available after loading
  bool prefix_cache = true;        // sequences reuse the KV blocks of the token prefixes they share
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);  // loads the models (an Error on bad files)

  // The prompt's token ids: text encoded as `eaglet generate` does, chat rendered as `eaglet generate --chat`.
  std::vector<int32_t> prompt_tokens(const GenerationRequest& request) const;
  // `tools` (null: none) and `template_kwargs` (chat_template_kwargs) are render variables of the chat template.
  std::vector<int32_t> chat_tokens(const ChatJson& messages, const ChatJson& tools = ChatJson(),
                                   const ChatJson& template_kwargs = ChatJson::object()) const;
  // Batched decoding (speculative/batched.h). start makes a job's sequence; prefill_piece runs one forward of its
  // prompt (at most the prefill batch: chunked prefill, the scheduler runs the others' steps in between) and, after
  // the last, emits its first token; step advances every prefilled sequence in one target forward, with the draft
  // tokens the batch-draft policy gives each; finish flushes a sequence that is done and records its metrics; the
  // caller then finishes the job with the result.
  std::unique_ptr<Sequence> start(std::shared_ptr<Job> job, Metrics& metrics);
  void prefill_piece(Sequence& sequence, Metrics& metrics);
  void step(std::span<Sequence* const> running, Metrics& metrics);
  JobResult finish(Sequence& sequence, Metrics& metrics);
  int max_batch() const { return options_.max_batch; }

  // The paged KV memory every sequence's caches share (model/kv_pool.h). A job is admitted when the pool holds its
  // prompt; a sequence preempted for room gives its blocks back and is later resumed by recomputing its prompt and
  // the tokens it emitted (the same forwards: the same tokens follow).
  KVPool& kv_pool() { return *kv_pool_; }
  int64_t kv_blocks_to_admit(const Job& job) const;  // the blocks of its prompt (+ a token), target and drafter
  int64_t kv_blocks_to_resume(const Sequence& s) const;
  int64_t kv_blocks_for_next(const Sequence& s) const;  // its next prefill piece or step, at most
  void preempt(Sequence& s);
  void resume(Sequence& s);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t context() const { return context_; }
  const std::string& context_note() const { return context_note_; }
  int64_t vocab_size() const { return model_->config().vocab_size; }
  bool speculative() const { return speculation_ != nullptr; }

 private:
  EngineOptions options_;
  Tokenizer tokenizer_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Speculation> speculation_;
  std::optional<ChatTemplate> chat_template_;
  std::string no_chat_reason_;  // why chat requests are refused (no template)
  int64_t context_ = 0;
  std::string context_note_;  // why the context is below -c
  std::shared_ptr<KVPool> kv_pool_;
  RoundLog round_log_;  // every sequence's rounds, the zero-acceptance warning once per server

  void make_kv_pool();
  int64_t kv_blocks_to_hold(int64_t tokens, bool speculative) const;  // `tokens` and the next, target and drafter
  void observe_round(Sequence& s, Metrics& metrics);
  // Offers its KV blocks to the prefix cache; `ending`: its last blocks too (it gives them back next).
  void share_prefix(Sequence& s, bool ending);
  void push_tokens(Sequence& s, std::span<const int32_t> tokens);
  // `text`: what the token released into the answer; `bytes`: its own bytes.
  TokenLogprobText logprob_text(const TokenLogprob& logprob, std::string text, std::string bytes) const;
};

}  // namespace eaglet::server
