#include "speculative/draft_params.h"

#include "util/error.h"
#include "util/int_list.h"

namespace eaglet {

DraftParams DraftParams::resolved(std::string* note) const {
  DraftParams p = *this;
  if (topk == 1 && num_draft_tokens != num_steps + 1) {
    p.num_draft_tokens = num_steps + 1;
    if (note != nullptr)
      *note =
          "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = " + std::to_string(num_steps + 1) +
          " because speculative_eagle_topk is 1 (a chain)";
  }
  return p;
}

std::string DraftParams::setting() const {
  return std::to_string(num_steps) + "," + std::to_string(topk) + "," + std::to_string(num_draft_tokens);
}

std::string DraftParams::label() const {
  return (topk == 1 ? "chain " : "tree ") + std::to_string(num_steps) + "/" + std::to_string(topk) + "/" +
         std::to_string(num_draft_tokens);
}

DraftParams parse_draft_setting(const std::string& text, const std::string& what) {
  const auto v = parse_int_list(text, what);
  if (v.size() != 3 || v[0] < 1 || v[0] > 64 || v[1] < 1 || v[1] > 64 || v[2] < 2 || v[2] > kMaxDraftTokens)
    fail(what, " '", text,
         "': expected steps,topk,draft_tokens with steps and topk in [1, 64] and draft tokens in "
         "[2, ",
         kMaxDraftTokens, "] (as generate's flags)");
  return DraftParams{v[0], v[1], v[2]}.resolved();
}

}  // namespace eaglet
