#pragma once
// A running job inside the engine: its decoder (plain or speculative, with its own KV caches and drafter state) and
// the path its tokens take to the client (detokenizer, stop strings, token origins, logprobs).
#include <memory>
#include <string>
#include <vector>

#include "generate/generation.h"
#include "server/job.h"
#include "server/stop_strings.h"
#include "server/token_origin.h"
#include "speculative/batched.h"
#include "speculative/proposer.h"
#include "speculative/speculative.h"
#include "tokenizer/tokenizer.h"

namespace eaglet::server {

struct Sequence {
  Sequence(std::shared_ptr<Job> job, const Tokenizer& tokenizer, GenerationLimits limits, bool speculative)
      : job(std::move(job)),
        limits(std::move(limits)),
        speculative(speculative),
        detok(tokenizer),
        stops(this->job->request.stop),
        origins(*this->job, this->job->request.token_origin),
        collector(this->limits, sink, tokens) {}
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  std::shared_ptr<Job> job;
  GenerationLimits limits;
  const bool speculative;
  std::unique_ptr<Proposer> proposer;  // speculative: this sequence's drafter state
  std::unique_ptr<BatchedSequence> decoder;
  SpeculativeDecoder* spec = nullptr;  // the decoder, when speculative
  StreamingDetokenizer detok;
  StopStrings stops;
  TokenOrigins origins;
  std::vector<int32_t> tokens;  // emitted (end-of-sequence ids excluded)
  TokenSink sink;               // set by the engine: text out, metrics, cancellation
  TokenCollector collector;
  const TokenLogprob* logprob = nullptr;  // the log-probability of the token being pushed, when asked for
  int64_t logprob_text_offset = 0;        // characters of the text released before the token being pushed
  int64_t accepted_before = 0, verifies_before = 0;
  Clock::time_point last;
  bool prefilling = true;     // the prompt is not through yet (Engine::prefill_piece)
  int preemptions = 0;        // times its KV blocks were taken back for others (Engine::preempt)
  int64_t cached_tokens = 0;  // prompt tokens its first prefill found in the prefix cache
  bool done = false;
  std::string error;
};

}  // namespace eaglet::server
