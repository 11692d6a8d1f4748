#!/usr/bin/env python3
"""Independent oracle for eaglet's tiktoken (Kimi-K2) tokenizer.

No Kimi tokenizer files can be downloaded here, so this script makes its own: it learns a small byte-level BPE
(256 bytes + about 2000 merges) on a built-in multilingual corpus, pre-tokenized with the Kimi pattern, and writes
OUT/tiktoken/tiktoken.model (base64 token + rank per line) and OUT/tiktoken/tokenizer_config.json (Kimi's special
tokens at Kimi's offsets). Then it encodes varied texts the way Moonshot's tokenization_kimi.py + tiktoken do and
writes OUT/tiktoken_oracle.json, which tests/tokenizer/tiktoken_test.cpp compares eaglet against.

How it differs from eaglet's implementation (so that one's mistake is not the other's):
- the pre-tokenizer pattern is Kimi's pat_str verbatim, run by the `regex` module (python3-regex), whose V1 mode has
  class intersections natively (eaglet rewrites them into PCRE2 lookaheads);
- BPE is tiktoken's rule done naively on byte strings: scan all adjacent pairs, merge the leftmost one whose
  concatenation has the lowest rank, repeat (eaglet derives a merge table and runs a priority queue);
- special tokens are found by a leftmost-first alternation of the escaped names, as tiktoken does.

Before writing, it checks that the texts are sensitive to the mistakes an implementation could make (dropping the
Han intersection, Script_Extensions for \\p{Han}, PCRE2's \\s, no whole-token shortcut, no 25 000-run cut): each
must change the ids of at least one text, or the script fails.

Usage: tiktoken_oracle.py --out DIR [--texts tests/oracle/tokenizer_texts.json]
"""
import argparse
import base64
import json
import os
import random
import re
import sys
import unicodedata

try:
    import regex
except ImportError:
    sys.exit("tiktoken_oracle.py: the python3 'regex' module is missing: run scripts/deps.sh (Debian python3-regex)")

# tokenization_kimi.py's pat_str, verbatim (Rust regex syntax).
KIMI_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

NUM_SPECIAL = 256 + 2
WINDOW_CHARS = 400_000
MAX_RUN_CHARS = 25_000
TARGET_MERGES = 2000

# Kimi-K2's named special tokens, by offset from the first special id (163584 in the real vocabulary).
KIMI_SPECIALS = {
    0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>", 6: "<|start_header_id|>",
    7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>", 11: "<|tool_calls_section_begin|>",
    12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>", 14: "<|tool_call_argument_begin|>",
    15: "<|tool_call_end|>", 17: "<|im_middle|>", 254: "[UNK]", 255: "[PAD]",
}
RESERVED_OFFSET = 5  # an unnamed id: <|reserved_token_{base + 5}|>


def compile_pattern(pattern):
    return regex.compile(pattern, flags=regex.V1)


# ---- training corpus ----------------------------------------------------------------------------------------------

CORPUS_SENTENCES = [
    "The quick brown fox jumps over the lazy dog while the cat sleeps.",
    "It's what they'll say when we've finished, and I'd rather you're there.",
    "Speculative decoding drafts several tokens and the target verifies them in one pass.",
    "def train(model, data):\n    for batch in data:\n        loss = model(batch)\n        loss.backward()\n",
    "for (int i = 0; i < n; ++i) { total += values[i]; }\n",
    "The year 2024 had 366 days; 1234567 is a number, 3.14159 is pi.",
    "我们今天去北京参观博物馆，然后在餐厅吃饭。",
    "机器学习模型需要大量的数据进行训练和评估。",
    "中文分词是自然语言处理的基础任务之一。",
    "日本語の文章には漢字とひらがなとカタカナが混ざっています。",
    "東京は日本の首都です。",
    "한국어 문장도 토큰화 테스트에 포함됩니다.",
    "Привет, мир! Это тестовый текст на русском языке.",
    "Καλημέρα κόσμε, αυτό είναι ένα κείμενο.",
    "مرحبا بالعالم، هذا نص تجريبي باللغة العربية.",
    "שלום עולם, זה טקסט לבדיקה.",
    "नमस्ते दुनिया, यह एक परीक्षण पाठ है।",
    "สวัสดีชาวโลก นี่คือข้อความทดสอบ",
    "Ünïcödé àccénts ärë cömmön ïn Éurópéan längüägés: café, naïve, résumé.",
    "HTTPServer and XMLHttpRequest use camelCase and PascalCase identifiers.",
    "Emoji are fun 😀 🎉 👍 and so are symbols like © ® ™ € £.",
    "Kimi是一个由Moonshot AI开发的AI助手，支持中文和English。",
    "    indented line\n\tTabbed line\n\n\nBlank lines above.\n",
    "{\"name\": \"eaglet\", \"version\": 1, \"tags\": [\"cpu\", \"eagle\"]}",
]


def training_corpus():
    rng = random.Random(1234)
    words = []
    for sentence in CORPUS_SENTENCES:
        words.extend(sentence.split(" "))
    # Pseudo-words in several scripts, so that the merges do not run out before TARGET_MERGES.
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + [c + v for c in "бвгдклмнпрст" for v in "аеиоу"]
    han = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后"
    for _ in range(1500):
        kind = rng.random()
        if kind < 0.6:
            words.append("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
        elif kind < 0.8:
            words.append("".join(rng.choice(han) for _ in range(rng.randint(1, 4))))
        else:
            words.append("".join(chr(rng.randint(0xAC00, 0xAC00 + 400)) for _ in range(rng.randint(1, 3))))
    text = list(CORPUS_SENTENCES) * 3
    for _ in range(1500):
        text.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))))
    return "\n".join(text)


def train_ranks(corpus, pattern):
    """Byte-level BPE training: ranks 0..255 are the bytes, then the most frequent adjacent pair of each round."""
    counts = {}
    for piece in pattern.findall(corpus):
        key = tuple(bytes([b]) for b in piece.encode("utf-8"))
        counts[key] = counts.get(key, 0) + 1
    ranks = {bytes([b]): b for b in range(256)}
    words = dict(counts)
    while len(ranks) < 256 + TARGET_MERGES:
        pairs = {}
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], ranks[p[0]], ranks[p[1]]))
        merged = best[0] + best[1]
        if merged not in ranks:
            ranks[merged] = len(ranks)
        new_words = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    # Whole tokens that no merge sequence reaches (their halves are not tokens): only a pre-token that is itself a
    # token becomes it, as tiktoken looks a whole piece up before merging.
    for extra in ["zqxj", " Qzv", "ƺƻ", "\u180e!"]:
        token = extra.encode("utf-8")
        if token not in ranks:
            ranks[token] = len(ranks)
    return ranks


# ---- the reference encoder ----------------------------------------------------------------------------------------

def bpe(piece, ranks, whole_token_shortcut=True):
    if whole_token_shortcut and piece in ranks:
        return [ranks[piece]]
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = i, rank
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return [ranks[p] for p in parts]


def python_runs(s, max_run):
    """tokenization_kimi.py's cut: no run of str.isspace() / other characters longer than max_run."""
    out, start, run, run_space = [], 0, 0, None
    for i, ch in enumerate(s):
        space = ch.isspace()
        if run_space is None or space != run_space:
            run, run_space = 1, space
        else:
            run += 1
            if run > max_run:
                out.append(s[start:i])
                start, run = i, 1
    out.append(s[start:])
    return out


class Reference:
    def __init__(self, ranks, specials, pattern=KIMI_PATTERN, whole_token_shortcut=True, max_run=MAX_RUN_CHARS):
        self.ranks = ranks
        self.specials = specials  # name -> id
        self.pattern = compile_pattern(pattern)
        names = sorted(specials, key=lambda name: specials[name])
        self.special_re = re.compile("|".join(re.escape(name) for name in names))
        self.whole = whole_token_shortcut
        self.max_run = max_run
        self.cache = {}

    def encode_ordinary(self, text, out):
        for piece in self.pattern.findall(text):
            ids = self.cache.get(piece)
            if ids is None:
                ids = self.cache[piece] = bpe(piece.encode("utf-8"), self.ranks, self.whole)
            out.extend(ids)

    def encode_chunk(self, text, out):
        pos = 0
        for m in self.special_re.finditer(text):
            self.encode_ordinary(text[pos:m.start()], out)
            out.append(self.specials[m.group(0)])
            pos = m.end()
        self.encode_ordinary(text[pos:], out)

    def encode(self, text):
        out = []
        for w in range(0, len(text), WINDOW_CHARS):
            for chunk in python_runs(text[w:w + WINDOW_CHARS], self.max_run):
                self.encode_chunk(chunk, out)
        return out

    def decode(self, ids):
        by_id = {rank: token for token, rank in self.ranks.items()}
        by_id.update({i: name.encode("utf-8") for name, i in self.specials.items()})
        return b"".join(by_id.get(i, b"") for i in ids).decode("utf-8", "replace")


# ---- test texts ---------------------------------------------------------------------------------------------------

def kimi_texts(base):
    reserved = f"<|reserved_token_{base + RESERVED_OFFSET}|>"
    texts = [
        # Han, Han punctuation (Script Common, Script_Extensions Han), Han next to other scripts and marks
        "中文分词测试，我们今天去北京。", "你好、世界。「引用」『書名』", "々〆〇〻 人々 〆切 〇号",
        "㈠㈡ ㇀㇁ ㆒㆓ ⺀⻳ ⼀⼁", "Kimi是一个AI助手", "abc中文def中\u0301文x", "中文ABC中文abc", "漢字かなカナ한글",
        "日本語のテキストです。カタカナ・ひらがな、ー", "𠀀𠀁 𪜀 CJK ext B", "中'S 中's 文'LL",
        # contractions and case
        "I'm sure they'll say it's fine, we've done what we'd planned.", "DON'T WE'VE HE'S I'D YOU'RE",
        "O'Neil's rock'n'roll 'twas 'S 'Ll", "It'ſ the Kelvin K and ſ long s", "Élan's naïve ÇA'S", "'s'S's",
        "ǅungla ǈubav ǋenan", "ʰello ʷorld Mʰ", "HTTPServer XMLHttpRequest iPhone eBay", "ΑΒΓ αβγ ΣΊΣΥΦΟΣ σίσυφος",
        "Привет, МИР! ПриВЕТ", "नमस्ते दुनिया", "ภาษาไทย", "مرحبا بالعالم", "שָׁלוֹם",
        # digits
        "1234567890", "3.14159 -42 1e-10 0x1F", "２０２４年１２月", "١٢٣٤٥ ۱۲۳", "Ⅻ ⅻ ½ ² ①②③", "x=12345y",
        # whitespace
        "a    b", "\n\n\n", "line1\r\nline2\r\n", "  \t  \n  x", "trailing   ", " " * 40 + "x", "\t\t\tx",
        "x" + " " * 300 + "y", "\n" * 100 + "z", "nbsp\u00a0x\u00a0\u00a0y", "ideo\u3000\u3000space",
        "nel\u0085line", "mongolian\u180eseparator \u180e x", "a\u180e! b\u180e!", "zero\u200bwidth", "para\u2028sep\u2029x",
        "fs\u001cgs\u001drs\u001eus\u001f", "   \n   \n", "a \n b", " \r\n\r\n ", "x  \ny",
        # emoji and symbols
        "👍🏽 emoji 🎉🎉", "👨\u200d👩\u200d👧\u200d👦 family", "🇯🇵🇫🇷 flags", "Hello!!! ...??? (test) [x] {y}",
        "---> <<<>>> C++ && Rust || Go", "© ® ™ € £ ¥ § ¶ • … — – « » “q” ‘s’", "∀x∈ℝ, x² ≥ 0",
        # special tokens inside text
        "<|im_user|>user<|im_middle|>hi<|im_end|>", "[BOS]text[EOS]", reserved + "x" + reserved,
        "<|im_end", "<|im_end|", "[EOS][EOS]", "a<|im_middle|>中文", "<|reserved_token_99999|>", "[eos] [EOS ]",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get:0<|tool_call_argument_begin|>{\"a\": 1}"
        "<|tool_call_end|><|tool_calls_section_end|>", "x[UNK]y[PAD]z", "<|im_system|>system<|im_middle|>Be brief."
        "<|im_end|><|im_user|>user<|im_middle|>2+2?<|im_end|><|im_assistant|>assistant<|im_middle|>",
        # whole tokens no merge reaches
        "zqxj zqxjzqxj Qzv Qzv ƺƻ",
        # code
        "def f(x):\n    return x**2  # square\n", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    ]
    # Runs longer than 25 000 characters are cut before tiktoken sees them: a special token across the cut is text.
    texts.append("a." * 12498 + "[EOS]" + " tail")     # run of exactly 25 001 non-space characters
    texts.append("a." * 12497 + "x[EOS]" + " tail")    # 25 000: no cut
    texts.append(" " * 25003 + "x")
    # A 400 000-character window boundary inside a special token.
    texts.append("ab " * 133332 + "xy" + "[EOS] tail")
    return texts


def random_texts(count, seed):
    """Random strings of assigned code points (Unicode 14, Python's unicodedata) from varied blocks."""
    rng = random.Random(seed)
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x2100, 0x22FF),
              (0x2E80, 0x2FDF), (0x3000, 0x30FF), (0x3100, 0x31FF), (0x3200, 0x33FF), (0x4E00, 0x4FFF),
              (0xAC00, 0xAD00), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F), (0x20000, 0x20100), (0x1D400, 0x1D4FF)]
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.25:
                chars.append(rng.choice(" \n\t'sS中a1.,"))
                continue
            lo, hi = rng.choice(blocks)
            while True:
                cp = rng.randint(lo, hi)
                if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co"):
                    break
            chars.append(chr(cp))
        texts.append("".join(chars))
    return texts


# ---- sensitivity of the texts to known mistakes -------------------------------------------------------------------

def mutations(ranks, specials):
    no_intersection = KIMI_PATTERN.replace("&&[^\\p{Han}]", "")
    script_extensions = KIMI_PATTERN.replace("\\p{Han}", "\\p{scx=Han}")
    pcre_space = (KIMI_PATTERN.replace("[^\\s", "\0").replace("\\s", "[\\s\u180e]")
                  .replace("\\S", "[^\\s\u180e]").replace("\0", "[^\\s\u180e"))
    return {
        "class intersection dropped": Reference(ranks, specials, no_intersection),
        "\\p{Han} as Script_Extensions": Reference(ranks, specials, script_extensions),
        "\\s with U+180E (PCRE2)": Reference(ranks, specials, pcre_space),
        "no whole-token shortcut": Reference(ranks, specials, whole_token_shortcut=False),
        "no 25 000-character run cut": Reference(ranks, specials, max_run=10 ** 9),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--texts", default=os.path.join(os.path.dirname(__file__), "tokenizer_texts.json"))
    args = parser.parse_args()

    pattern = compile_pattern(KIMI_PATTERN)
    ranks = train_ranks(training_corpus(), pattern)
    base = len(ranks)
    specials = {f"<|reserved_token_{base + i}|>": base + i for i in range(NUM_SPECIAL)}
    for offset, name in KIMI_SPECIALS.items():
        del specials[f"<|reserved_token_{base + offset}|>"]
        specials[name] = base + offset

    model_dir = os.path.join(args.out, "tiktoken")
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "tiktoken.model"), "w") as f:
        for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
            f.write(f"{base64.b64encode(token).decode('ascii')} {rank}\n")
    config = {
        "added_tokens_decoder": {
            str(base + offset): {"content": name, "lstrip": False, "normalized": False, "rstrip": False,
                                 "single_word": False, "special": True}
            for offset, name in KIMI_SPECIALS.items()
        },
        "bos_token": "[BOS]", "eos_token": "[EOS]", "unk_token": "[UNK]", "pad_token": "[PAD]",
        "tokenizer_class": "TikTokenTokenizer",
        "chat_template": "{%- for message in messages -%}{%- if message['role'] == 'user' -%}<|im_user|>user"
                         "<|im_middle|>{%- endif -%}{{ message['content'] }}<|im_end|>{%- endfor -%}",
    }
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1, ensure_ascii=False)

    with open(args.texts) as f:
        shared_texts = json.load(f)
    texts = kimi_texts(base) + shared_texts + random_texts(300, seed=7)
    reference = Reference(ranks, specials)
    cases = []
    for text in texts:
        ids = reference.encode(text)
        cases.append({"text": text, "ids": ids, "decoded": reference.decode(ids)})

    failures = []
    for name, mutant in mutations(ranks, specials).items():
        # The long texts only test the run cut; the other mutants skip them (time).
        relevant = [c for c in cases if (len(c["text"]) > 20_000) == name.startswith("no 25 000")]
        differing = sum(1 for case in relevant if mutant.encode(case["text"]) != case["ids"])
        print(f"tiktoken_oracle: mistake '{name}' changes the ids of {differing}/{len(relevant)} texts")
        if differing == 0:
            failures.append(name)
    if failures:
        sys.exit(f"tiktoken_oracle: no text detects: {', '.join(failures)} (add a text that does)")

    # Decoding arbitrary ids: cut UTF-8 sequences, special and reserved ids, ids past the vocabulary.
    rng = random.Random(11)
    decode_cases = [[0xE4, 0xB8, ord("a")], [0xE4, 0xB8], [0xF0, 0x9F, base + 2, 0x98, 0x80], [base + RESERVED_OFFSET, 65],
                    [0xC3, 0xA9, 0xC3], [base + NUM_SPECIAL + 5, 66]]
    for _ in range(50):
        decode_cases.append([rng.randrange(base + NUM_SPECIAL) for _ in range(rng.randint(1, 12))])
    decodes = [{"ids": ids, "text": reference.decode(ids)} for ids in decode_cases]

    with open(os.path.join(args.out, "tiktoken_oracle.json"), "w") as f:
        json.dump({"dir": model_dir, "ranks": base, "vocab_size": base + NUM_SPECIAL, "eos": specials["[EOS]"],
                   "cases": cases, "decodes": decodes}, f, ensure_ascii=False)
    print(f"tiktoken_oracle: {base} ranks, {len(cases)} texts, {len(decodes)} decode cases -> {args.out}")


if __name__ == "__main__":
    main()
