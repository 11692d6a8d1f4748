#!/usr/bin/env python3
"""Chat template oracle: renders Jinja chat templates with Python's jinja2 in the environment that Hugging Face
transformers' apply_chat_template builds (utils/chat_template_utils.py: _compile_jinja_template and
render_jinja_template), so eaglet's C++ Jinja interpreter can be compared with it byte for byte.

Usage: python3 chat_template_oracle.py CASES.json OUT.json

CASES.json: a JSON list of {"name": str, "template": str, "messages": [...], "add_generation_prompt": bool,
"kwargs": {...}}. kwargs holds every other render variable: the special tokens (bos_token, eos_token, ...), tools,
documents, and chat_template_kwargs such as enable_thinking.
OUT.json: a list in the same order, each {"name", "ok": true, "text": rendered} or {"name", "ok": false,
"error_type": the exception's class name ("TemplateError" from raise_exception, "UndefinedError", "SecurityError",
"TemplateSyntaxError", or a Python one such as "TypeError"), "message": str(exception)}; syntax errors also carry
"line" (jinja2's line number). Written as UTF-8 with ensure_ascii=False, so "text" is the exact render.

The environment, as HF builds it:
- jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols extension
  (break/continue) and a {% generation %}...{% endgeneration %} block that renders its body (HF's AssistantTracker,
  which also records the body's offsets for assistant masks; the text is the same). Everything else is jinja2's
  default: autoescape off, Undefined (prints as "", fails on attribute access or calls), keep_trailing_newline off
  (one trailing newline of the template is dropped), newlines in the template normalised to "\\n".
- filter tojson replaced by json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...)
  (jinja2's own escapes <, >, &, ' for HTML and takes only indent).
- globals raise_exception(message) raising jinja2.exceptions.TemplateError(message), and strftime_now(format).
  HF's strftime_now formats datetime.now(); here it formats the FIXED time 2026-07-26 12:00:00 (a Sunday) so renders
  are deterministic: the interpreter under test must use the same clock when checked against this oracle.
- render variables: messages, tools (None when absent), documents (None when absent), add_generation_prompt, then
  every other kwarg (HF: the tokenizer's special_tokens_map overlaid with the call's kwargs).
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime.datetime(2026, 7, 26, 12, 0, 0)


class GenerationBlock(jinja2.ext.Extension):
    """{% generation %}body{% endgeneration %} renders body unchanged (HF marks it as assistant-generated text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, compiled, case):
    """Renders one case; compiled caches templates by text. Returns the OUT.json entry."""
    out = {"name": case["name"]}
    try:
        text = case["template"]
        if text not in compiled:
            try:
                compiled[text] = env.from_string(text)
            except jinja2.exceptions.TemplateSyntaxError as e:
                compiled[text] = e
        template = compiled[text]
        if isinstance(template, Exception):
            raise template
        kwargs = dict(case.get("kwargs") or {})
        tools = kwargs.pop("tools", None)
        documents = kwargs.pop("documents", None)
        out["text"] = template.render(messages=case["messages"], tools=tools, documents=documents,
                                      add_generation_prompt=case.get("add_generation_prompt", False), **kwargs)
        out["ok"] = True
    except Exception as e:  # every failure is an expected outcome to compare against
        out.pop("text", None)
        out.update(ok=False, error_type=type(e).__name__, message=str(e))
        if isinstance(e, jinja2.exceptions.TemplateSyntaxError):
            out["line"] = e.lineno
    return out


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: chat_template_oracle.py CASES.json OUT.json")
    with open(argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env, compiled = make_environment(), {}
    results = [render(env, compiled, case) for case in cases]
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False, indent=1)
        f.write("\n")
    failed = sum(not r["ok"] for r in results)
    print(f"chat_template_oracle: {len(results)} cases, {len(results) - failed} rendered, {failed} raised")


if __name__ == "__main__":
    main(sys.argv)
