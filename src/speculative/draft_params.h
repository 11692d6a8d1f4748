#pragma once
// A round's draft shape (SGLang's --speculative-num-steps / -eagle-topk / -num-draft-tokens), its parsing and its
// names; the tree algorithm that uses it is draft_tree.h.
#include <string>

namespace eaglet {

// The most nodes one round verifies (num_draft_tokens, root included): a verify batch must stay within the rows a
// forward computes exactly as one token at a time (kMaxVerifyRows, model/block.h; speculative.cpp asserts it).
constexpr int kMaxDraftTokens = 128;

struct DraftParams {
  int num_steps = 5;         // maximum depth
  int topk = 4;              // children per expanded node
  int num_draft_tokens = 8;  // nodes verified, root included

  // SGLang's rule: with topk 1 (a chain) num_draft_tokens is num_steps + 1. Returns the adjusted params; `note`, if
  // given, receives a line saying so when it changed anything.
  DraftParams resolved(std::string* note = nullptr) const;
  std::string setting() const;  // "5,4,8": the form parse_draft_setting reads (bench, train-draft --eval-settings)
  std::string label() const;    // "tree 5/4/8" or "chain 5/1/6": how reports name it
  bool operator==(const DraftParams&) const = default;
};

// "steps,topk,draft_tokens", resolved; out of range is an Error naming `what`.
DraftParams parse_draft_setting(const std::string& text, const std::string& what);

}  // namespace eaglet
