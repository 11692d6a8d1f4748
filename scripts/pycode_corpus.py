#!/usr/bin/env python3
"""Training text for the default drafter of ../shared/models/pycode-llama-19m, as `eaglet extract` rows.

The target is a Python-code LM, so its training distribution is Python source: the .py files of Debian's Python
(/usr/lib/python3.11, /usr/lib/python3/dist-packages), test files excluded, and the files the dev prompts
(../shared/prompts/pycode-dev.jsonl) were cut from excluded too. Files are shuffled with --seed; each gives up to
--chunks-per-file random line-aligned chunks of at most --chunk-chars characters, until --chars are written.
Standard library only: writes JSONL rows {"prompt": chunk} (the default: `eaglet extract --regenerate` writes each
completion with the target, as served prompts are continued) or, with --text, {"text": chunk} to --out.
"""
import argparse
import json
import os
import random

ROOTS = ["/usr/lib/python3.11", "/usr/lib/python3/dist-packages"]
TEST_DIRS = {"test", "tests", "_tests", "testing", "unittests", "idle_test"}


def is_test(rel):
    parts = rel.lower().split("/")
    name = parts[-1]
    return (any(p in TEST_DIRS for p in parts[:-1]) or name.startswith("test_") or name.endswith("_test.py")
            or name in ("test.py", "tests.py", "conftest.py"))


def sources(excluded):
    files = []
    for root in ROOTS:
        for d, dirs, names in os.walk(root):
            dirs.sort()
            for n in sorted(names):
                p = os.path.join(d, n)
                rel = os.path.relpath(p, root)
                if n.endswith(".py") and not os.path.islink(p) and not is_test(rel) and rel not in excluded:
                    files.append(p)
    return files


def chunks(path, limit, min_chars=300):
    try:
        text = open(path, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        return []
    if "\x00" in text:
        return []
    out, cur = [], ""
    for line in text.splitlines(keepends=True):
        if len(line) > limit:  # minified or data lines
            return []
        if cur and len(cur) + len(line) > limit:
            out.append(cur)
            cur = ""
        cur += line
    if cur:
        out.append(cur)
    return [c for c in out if len(c) >= min_chars and c.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "prompts",
                                                      "pycode-dev.jsonl"))
    ap.add_argument("--chars", type=int, default=1_300_000, help="characters to write (about 3.1 per token)")
    ap.add_argument("--chunk-chars", type=int, default=1300)
    ap.add_argument("--chunks-per-file", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--text", action="store_true", help='write {"text": chunk} rows instead of {"prompt": chunk}')
    a = ap.parse_args()
    excluded = set()
    with open(a.prompts) as f:
        for line in f:
            src = json.loads(line)["source"]
            excluded.add(src[len("site-packages/"):] if src.startswith("site-packages/") else src)
    files = sources(excluded)
    rng = random.Random(a.seed)
    rng.shuffle(files)
    written = rows = 0
    with open(a.out, "w") as out:
        for p in files:
            if written >= a.chars:
                break
            c = chunks(p, a.chunk_chars)
            for j in sorted(rng.sample(range(len(c)), min(a.chunks_per_file, len(c)))):
                out.write(json.dumps({"text" if a.text else "prompt": c[j]}) + "\n")
                written += len(c[j])
                rows += 1
    print(f"pycode_corpus: {rows} rows, {written} characters from {len(files)} files ({len(excluded)} dev-prompt "
          f"sources excluded) -> {a.out}")


if __name__ == "__main__":
    main()
