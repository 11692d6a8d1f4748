// The interpreter's own contract beyond what jinja2 renders (tests/jinja/jinja_oracle_test.cpp): what it refuses and
// how it says so (file:line:column, the construct), raise_exception's message, the sandbox, and the bounds on a
// render (output size, loop iterations, macro recursion, nesting) that keep a downloaded template from hanging it.
#include "jinja/jinja.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_env.h"

namespace eaglet::jinja {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string render(const std::string& source, const RenderOptions& options = {}) {
  Dict vars;
  vars.set(Value("messages"),
           Value::from_json(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])")));
  return Template(source, "t.jinja").render(vars, options);
}

std::string error_of(const std::string& source, const RenderOptions& options = {}) {
  return test::error_of([&] { render(source, options); });
}

TEST(Jinja, RendersAChatTemplate) {
  EXPECT_EQ(render("{% for m in messages %}<{{ m.role }}>{{ m['content'] | upper }}{% endfor %}\n"), "<user>HI");
}

TEST(Jinja, RefusedConstructsNameTheirPlace) {
  EXPECT_EQ(error_of("ok\n  {% do x %}"), "t.jinja:2:6: unknown tag 'do'");
  EXPECT_EQ(error_of("{% include 'other.jinja' %}"),
            "t.jinja:1:4: the 'include' tag is not supported: a chat template is rendered on its own");
  EXPECT_EQ(error_of("{% extends 'base' %}"),
            "t.jinja:1:4: the 'extends' tag is not supported: a chat template is rendered on its own");
  EXPECT_EQ(error_of("{% for x in y recursive %}{% endfor %}"), "t.jinja:1:15: recursive for loops are not supported");
  EXPECT_EQ(error_of("{{ f(*args) }}"), "t.jinja:1:6: *args and **kwargs in calls are not supported");
  // Filters and tests are checked when the template is read, also in branches a conversation never takes.
  EXPECT_EQ(error_of("{% if false %}{{ x | frobnicate }}{% endif %}"), "t.jinja:1:22: no filter named 'frobnicate'");
  EXPECT_EQ(error_of("{% if false %}{{ x is prime }}{% endif %}"), "t.jinja:1:20: no test named 'prime'");
  EXPECT_EQ(error_of("{{ x | wordwrap(10) }}"), "t.jinja:1:8: no filter named 'wordwrap'");
  EXPECT_EQ(error_of("{{ 'a'.encode() }}"), "t.jinja:1:4: 'str object' has no attribute 'encode'");
  EXPECT_EQ(error_of("{{ '{:,}'.format(1000) }}"), "t.jinja:1:4: format(): unsupported format spec ','");
  EXPECT_EQ(error_of("{{ 'x' | upper }}{{ 'ǅ' | upper }}"),
            "t.jinja:1:27: upper(): case mapping of U+01C5 is not supported (ASCII, Latin-1, Latin Extended-A, "
            "Greek and Cyrillic letters are)");
}

TEST(Jinja, SyntaxErrorsNameWhatWasExpected) {
  EXPECT_EQ(error_of("{% if x %}never closed"), "t.jinja:1:23: unexpected end of template, expected {% endif %}");
  EXPECT_EQ(error_of("{% for x in y %}{% endif %}"), "t.jinja:1:20: unknown tag 'endif'");
  EXPECT_EQ(error_of("{{ 'open"), "t.jinja:1:4: the string is not closed");
  EXPECT_EQ(error_of("a\n{{ x"), "t.jinja:2:1: the tag is not closed (expected '}}')");
  EXPECT_EQ(error_of("{# note"), "t.jinja:1:1: the comment is not closed (expected '#}')");
  EXPECT_EQ(error_of("{{ x $ y }}"), "t.jinja:1:6: unexpected character '$' in a tag");
  EXPECT_EQ(error_of("{% break %}"), "t.jinja:1:4: 'break' outside of a for loop");
  EXPECT_EQ(error_of("{{ 1 + }}"), "t.jinja:1:8: unexpected '}}'");
  EXPECT_EQ(error_of("\xff{{ x }}"), "t.jinja: the template is not valid UTF-8");
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    render(
        "{% if messages[0].role != 'system' %}{{ raise_exception('System message first, got ' + "
        "messages[0].role + '!') }}{% endif %}");
    FAIL() << "no TemplateRaised";
  } catch (const TemplateRaised& e) {
    EXPECT_STREQ(e.what(), "System message first, got user!");
  }
}

TEST(Jinja, UndefinedValuesFailOnlyWhenUsed) {
  EXPECT_EQ(render("[{{ missing }}][{{ messages[0].name }}][{{ missing | length }}]"), "[][][0]");
  EXPECT_EQ(error_of("{{ messages[0].name.first }}"), "t.jinja:1:4: 'dict object' has no attribute 'name'");
  EXPECT_EQ(error_of("{{ missing + 1 }}"), "t.jinja:1:4: 'missing' is undefined");
  EXPECT_EQ(error_of("{{ nothing() }}"), "t.jinja:1:4: 'nothing' is undefined");
}

TEST(Jinja, SandboxRefusesMutation) {
  EXPECT_EQ(error_of("{% set l = [] %}{{ l.append(1) }}"),
            "t.jinja:1:20: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{{ messages[0].update({'role': 'x'}) }}"),
            "t.jinja:1:4: access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(render("{{ ''.__class__ }}|"), "|");  // prints as undefined, as jinja2's sandbox does
}

TEST(Jinja, RendersAreBounded) {
  RenderOptions small;
  small.limits.max_output_bytes = 1000;
  EXPECT_EQ(error_of("{% for i in range(100) %}{{ 'x' * 20 }}{% endfor %}", small),
            "t.jinja:1:26: the rendered text is larger than 1000 bytes");
  EXPECT_EQ(error_of("{{ 'x' * 2000 }}", small),
            "t.jinja:1:4: string repetition: the result is larger than the output limit");
  small.limits.max_loop_iterations = 50;
  EXPECT_EQ(error_of("{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}", small),
            "t.jinja:1:28: loops ran more than 50 iterations");
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "t.jinja:1:4: macro calls nest deeper than 64");
  EXPECT_EQ(error_of("{{ range(1000000) | length }}"),
            "t.jinja:1:4: range() of 1000000 items is larger than 100000 (the sandbox's limit)");
  EXPECT_EQ(error_of("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
            "t.jinja:1:103: the template nests deeper than 200 levels");
  RenderOptions little_work;
  little_work.limits.max_work = 1 << 20;  // a list grown by copying: quadratic work
  EXPECT_EQ(error_of("{% set ns = namespace(l=[]) %}{% for i in range(20000) %}{% set ns.l = ns.l + [i] %}"
                     "{% endfor %}",
                     little_work),
            "t.jinja:1:72: the template built more than 1048576 bytes and items (strings and lists) in one render");
  EXPECT_EQ(error_of("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                     "{{ ns.x }}"),
            "t.jinja:1:91: a value nests lists and dicts deeper than 256 levels");
  EXPECT_EQ(error_of("{{ '' * 4000000000000000000 }}|{{ 'ab' * 4611686018427387904 }}"),
            "t.jinja:1:35: string repetition: the result is larger than the output limit");
  EXPECT_EQ(error_of("{{ 2 ** 64 }}"), "t.jinja:1:4: integer overflow (the template engine's integers are 64-bit)");
  EXPECT_EQ(render("{{ 1 ** 4000000000000000000 }} {{ (-1) ** 4000000000000000001 }}"), "1 -1");
}

TEST(Jinja, StrftimeNowUsesTheGivenClock) {
  RenderOptions options;
  options.now = std::tm{};
  options.now->tm_year = 2024 - 1900;
  options.now->tm_mon = 0;
  options.now->tm_mday = 5;
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}", options), "05 Jan 2024");
  EXPECT_THAT(render("{{ strftime_now('%Y') }}"), StartsWith("20"));  // the machine's clock otherwise
}

}  // namespace
}  // namespace eaglet::jinja
