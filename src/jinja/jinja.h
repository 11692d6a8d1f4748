#pragma once
// A Jinja interpreter for chat templates, rendering as Hugging Face's apply_chat_template does with Python's jinja2:
// an immutable sandbox with trim_blocks, lstrip_blocks and loop controls, HF's `tojson`, `raise_exception` and
// `strftime_now`, and the `{% generation %}` tag. What it does not know (a tag, filter, test or method) is an error
// naming the template's line and column, never a silent wrong render; docs/chat-templates.md lists what it covers.
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "jinja/ast.h"
#include "jinja/value.h"
#include "util/error.h"

namespace eaglet::jinja {

// A template is input from a downloaded folder: every render is bounded.
struct Limits {
  size_t max_output_bytes = size_t(64) << 20;  // the rendered text, and any string built on the way
  int64_t max_loop_iterations = 1'000'000;     // over all loops of one render
  int max_call_depth = 64;                     // macro calls inside macro calls
  int64_t max_work = int64_t(64) << 20;        // bytes and items built by operators, filters and loops
};

struct RenderOptions {
  Limits limits;
  std::optional<std::tm> now;  // what strftime_now formats; the local time when absent
};

// The template called raise_exception(message): what() is the message exactly, as jinja2's TemplateError carries it.
class TemplateRaised : public Error {
 public:
  using Error::Error;
};

class Template {
 public:
  // Parses `source`; `name` (a file name) prefixes every error as NAME:LINE:COLUMN. Throws eaglet::Error.
  Template(const std::string& source, std::string name);
  // Renders with `variables` as the globals (messages, add_generation_prompt, bos_token, ...). Throws
  // TemplateRaised for raise_exception, eaglet::Error for anything else (an undefined value used, a limit, ...).
  std::string render(const Dict& variables, const RenderOptions& options = {}) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace eaglet::jinja
