#pragma once
// One request's sequence as the scheduler sees it: its prompt and limits in, its text out. The scheduler thread
// produces (emit, finish); the HTTP thread that owns the request consumes (wait). Either side may cancel.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/request.h"
#include "speculative/stats.h"

namespace eaglet::server {

using Clock = std::chrono::steady_clock;

struct JobResult {
  std::string finish_reason;  // stop, length, abort
  std::string error;          // set when the generation failed (a server error)
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens found in the prefix cache
  bool speculative = false;
  SpecStats stats;
};

// A generated token's text and where it came from: a draft token the target accepted, or the target's own.
struct TokenPiece {
  std::string text;
  bool draft = false;
};

// A generated token's log-probability under the target and its most likely alternatives ("logprobs"). `token` is the
// text the token released into the answer, so the tokens concatenated are the text; `bytes` are the token's own
// bytes (a character split across tokens: each token's part of it).
struct TokenLogprobText {
  struct Alternative {
    std::string token, bytes;  // decoded after other text (its leading space kept)
    float logprob = 0;
  };
  std::string token, bytes;
  float logprob = 0;
  std::vector<Alternative> top;
  int64_t text_offset = 0;  // characters (code points) of the text before this token (completions' text_offset)
};

class Job {
 public:
  Job(uint64_t id, GenerationRequest request, std::vector<int32_t> prompt, int max_tokens)
      : id(id), request(std::move(request)), prompt(std::move(prompt)), max_tokens(max_tokens) {}

  const uint64_t id;
  const GenerationRequest request;
  const std::vector<int32_t> prompt;
  const int max_tokens;
  const Clock::time_point arrival = Clock::now();

  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  void emit(const std::string& text);
  void emit_pieces(std::vector<TokenPiece> pieces);  // with "return_token_origin"; beside the text
  void emit_logprob(TokenLogprobText logprob);       // with "logprobs"; before the token's text
  void finish(JobResult result);

  struct Update {
    std::string text;  // new text since the last wait
    std::vector<TokenPiece> pieces;
    std::vector<TokenLogprobText> logprobs;
    bool finished = false;
  };
  // Waits up to `timeout` for new text or the end; takes the new text.
  Update wait(std::chrono::milliseconds timeout);
  Update wait_finished();                                   // all text once the job ends
  bool finished_within(std::chrono::milliseconds timeout);  // waits at most `timeout` for its end
  JobResult result() const;                                 // valid once wait reported finished

 private:
  Update take();  // holds mutex_

  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string pending_;
  std::vector<TokenPiece> pending_pieces_;
  std::vector<TokenLogprobText> pending_logprobs_;
  bool finished_ = false;
  JobResult result_;
};

}  // namespace eaglet::server
