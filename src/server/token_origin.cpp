#include "server/token_origin.h"

namespace eaglet::server {

void TokenOrigins::token(const std::string& text, bool in_round) {
  if (!enabled_) return;
  if (in_round)
    held_.push_back(text);
  else
    job_.emit_pieces({{text, false}});
}

void TokenOrigins::round(int64_t accepted_drafts) {
  if (!enabled_) return;
  std::vector<TokenPiece> pieces;
  for (size_t i = 0; i < held_.size(); ++i)
    pieces.push_back({std::move(held_[i]), static_cast<int64_t>(i) < accepted_drafts});
  held_.clear();
  job_.emit_pieces(std::move(pieces));
}

void TokenOrigins::finish(const std::string& rest) {
  if (!enabled_) return;
  round(0);
  if (!rest.empty()) job_.emit_pieces({{rest, false}});
}

}  // namespace eaglet::server
