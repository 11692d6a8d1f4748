#pragma once
// Stop strings over streamed text: text is released only once no stop string can still begin in it, and generation
// ends at the first stop string (which is not part of the output).
#include <string>
#include <vector>

namespace eaglet::server {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds generated text; returns the text now safe to send. After a match, returns the text before it and then "".
  std::string push(const std::string& text);
  std::string finish();  // the held-back rest (nothing after a match)
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text not yet released: a suffix that may begin a stop string
  bool matched_ = false;
};

}  // namespace eaglet::server
