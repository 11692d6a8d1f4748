// Every template x conversation of tests/oracle/make_chat_template_cases.py rendered by eaglet's interpreter and by
// Python's jinja2 in Hugging Face's environment (tests/oracle/chat_template_oracle.py): the same bytes where jinja2
// renders, the same message where the template calls raise_exception, an error wherever jinja2 raises.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "jinja/jinja.h"
#include "test_env.h"

namespace eaglet::jinja {
namespace {

using json = nlohmann::ordered_json;

json load(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path << " is missing: the chat_template_oracle fixture makes it";
  return json::parse(in);
}

std::tm fixed_now() {  // the oracle's strftime_now clock: 2026-07-26 12:00:00, a Sunday
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 12;
  t.tm_wday = 0;
  t.tm_yday = 206;
  return t;
}

struct Outcome {
  bool ok = false, raised = false;
  std::string text;
};

Outcome render_case(const json& c) {
  Outcome out;
  try {
    const Template t(c["template"].get<std::string>(), c["name"].get<std::string>());
    Dict vars;
    vars.set("messages", Value::from_json(c["messages"]));
    json kwargs = c.value("kwargs", json::object());
    vars.set("tools", kwargs.contains("tools") ? Value::from_json(kwargs["tools"]) : Value::none());
    vars.set("documents", kwargs.contains("documents") ? Value::from_json(kwargs["documents"]) : Value::none());
    vars.set("add_generation_prompt", Value(c.value("add_generation_prompt", false)));
    for (const auto& [k, v] : kwargs.items())
      if (k != "tools" && k != "documents") vars.set(k, Value::from_json(v));
    RenderOptions options;
    options.now = fixed_now();
    out.text = t.render(vars, options);
    out.ok = true;
  } catch (const TemplateRaised& e) {
    out.raised = true;
    out.text = e.what();
  } catch (const Error& e) {
    out.text = e.what();
  }
  return out;
}

// The line where eaglet's render first differs from jinja2's, both shown.
std::string first_difference(const std::string& want, const Outcome& got) {
  if (!got.ok) return "eaglet failed: " + got.text;
  size_t at = 0;
  while (at < want.size() && at < got.text.size() && want[at] == got.text[at]) ++at;
  const size_t line = want.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t start = line == std::string::npos ? 0 : line + 1;
  auto line_of = [&](const std::string& s) { return s.substr(start, s.find('\n', at) - start); };
  return "first difference at byte " + std::to_string(at) + "\n  jinja2: " + line_of(want) +
         "\n  eaglet: " + line_of(got.text);
}

TEST(JinjaOracle, EveryCaseRendersAsJinja2Does) {
  const json cases = load(test::fixtures_dir() + "/chat_template_cases.json");
  const json expected = load(test::fixtures_dir() + "/chat_template_oracle.json");
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_GT(cases.size(), 500u);
  std::map<std::string, int> identical, differ;  // per template
  int rendered = 0, raised = 0, failed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    const json& want = expected[i];
    ASSERT_EQ(c["name"], want["name"]);
    const std::string name = c["name"].get<std::string>();
    const std::string template_name = name.substr(0, name.find('/'));
    const Outcome got = render_case(c);
    const bool first_of_template = differ.count(template_name) == 0;  // one report per template keeps it readable
    bool same;
    if (want["ok"].get<bool>()) {
      ++rendered;
      same = got.ok && got.text == want["text"].get<std::string>();
      EXPECT_TRUE(same || !first_of_template) << name << ": " << first_difference(want["text"].get<std::string>(), got);
    } else if (want["error_type"] == "TemplateError") {
      ++raised;
      same = got.raised && got.text == want["message"].get<std::string>();
      EXPECT_TRUE(same || !first_of_template)
          << name << ": jinja2 raised \"" << want["message"].get<std::string>() << "\", eaglet "
          << (got.ok       ? "rendered"
              : got.raised ? "raised"
                           : "failed")
          << ": " << got.text;
    } else {
      ++failed;
      same = !got.ok && !got.raised;
      EXPECT_TRUE(same || !first_of_template)
          << name << ": jinja2 failed (" << want["error_type"].get<std::string>() << ": "
          << want["message"].get<std::string>() << "), eaglet " << (got.ok ? "rendered:\n" : "raised: ") << got.text;
    }
    identical[template_name] += same;
    if (!same) differ[template_name]++;
  }
  for (const auto& [t, n] : identical)
    std::printf("%-40s %3d identical %3d differ\n", t.c_str(), n, differ.count(t) ? differ[t] : 0);
  std::printf("cases: %d rendered, %d raise_exception, %d other errors; templates: %zu\n", rendered, raised, failed,
              identical.size());
  int differing = 0;
  for (const auto& [t, n] : differ) differing += n;
  EXPECT_EQ(differing, 0) << "cases that differ from jinja2 (the first of each template is shown above)";
  EXPECT_GT(rendered, 400);
  EXPECT_GT(raised, 10);
}

}  // namespace
}  // namespace eaglet::jinja
