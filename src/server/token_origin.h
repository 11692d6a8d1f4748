#pragma once
// Marks the tokens of a speculative generation by origin for "return_token_origin". The loop hands tokens over one
// by one and reports each verify round afterwards: the round's tokens are its accepted drafts followed by the
// target's own token, so a round's tokens are held until its report and then marked.
#include <cstdint>
#include <string>
#include <vector>

#include "server/job.h"

namespace eaglet::server {

class TokenOrigins {
 public:
  TokenOrigins(Job& job, bool enabled) : job_(job), enabled_(enabled) {}
  // A token's text. Tokens before the first round (the prefill's) and all of the target alone are the target's.
  void token(const std::string& text, bool in_round);
  void round(int64_t accepted_drafts);   // marks and sends the held tokens
  void finish(const std::string& rest);  // the detokenizer's remainder, and anything still held, as the target's

 private:
  Job& job_;
  bool enabled_;
  std::vector<std::string> held_;
};

}  // namespace eaglet::server
