#!/usr/bin/python3
"""A learnable copy of a tiny DeepSeek-V3 / Kimi checkpoint, for the drafter pipeline test (tests/train/torch).

    make_bigram_target.py --src DIR --out DIR [--scale 0.3] [--seed 5]

A random tiny target says random things, which no drafter can learn. This copy keeps the source's layout, config,
tokenizer, storage formats and every tensor name (Kimi-K2.5's `language_model.` wrapping and vision tensors, FP8
blocks with weight_scale_inv, int4 groups with weight_scale), and changes what it computes:
  - lm_head is set so that argmax lm_head(norm(embed(x))) = f(x) for one random cycle f over the ordinary ids
    (make_tiny_drafters.py's bigram construction on the source's own embeddings and final norm);
  - every o_proj and down_proj (dense, shared and routed experts) is multiplied by --scale, through its scale
    tensor where it is quantized, so the residual stream stays near the token embedding and the target follows f,
    straying where its attention and experts outweigh the margin.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_np  # noqa: E402
from make_tiny_drafters import _cycle_map, _normed  # noqa: E402

HEAD_GAIN = 0.15


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    files = sorted(os.listdir(a.src))
    weights = [f for f in files if f.endswith(".safetensors")]
    if weights != ["model.safetensors"]:
        raise SystemExit(f"{a.src}: expected one model.safetensors, found {weights}")
    for f in files:
        if f not in weights and os.path.isfile(os.path.join(a.src, f)):
            shutil.copy(os.path.join(a.src, f), os.path.join(a.out, f))
    config = json.load(open(os.path.join(a.src, "config.json")))
    text = config.get("text_config", config)
    t = safetensors_np.load(os.path.join(a.src, "model.safetensors"))
    prefix = "language_model." if any(k.startswith("language_model.") for k in t) else ""
    V, eps = text["vocab_size"], text["rms_norm_eps"]
    rng = np.random.default_rng(a.seed)

    E = t[prefix + "model.embed_tokens.weight"].astype(np.float32)
    w = t[prefix + "model.norm.weight"].astype(np.float32)
    f = _cycle_map(rng, np.arange(3, V - 3), V, [0, 1, 2, V - 3, V - 2, V - 1])
    n = _normed(E, w, eps)
    head = np.zeros_like(E)
    for x in range(V):
        head[f[x]] += HEAD_GAIN * n[x]
    t[prefix + "lm_head.weight"] = head

    scaled = 0
    for k in list(t):
        if not (k.endswith("o_proj.weight") or k.endswith("down_proj.weight") or
                k.endswith("o_proj.weight_packed") or k.endswith("down_proj.weight_packed")):
            continue
        base = k.rsplit(".", 1)[0]
        if t.dtypes[k] == "F8_E4M3":
            t[base + ".weight_scale_inv"] = t[base + ".weight_scale_inv"] * np.float32(a.scale)
        elif k.endswith("weight_packed"):
            t[base + ".weight_scale"] = t[base + ".weight_scale"] * np.float32(a.scale)
        else:
            t[k] = t[k] * np.float32(a.scale)
        scaled += 1
    safetensors_np.save(os.path.join(a.out, "model.safetensors"), t, dict(t.dtypes), t.metadata)
    print(f"{a.out}: lm_head follows a {V - 6}-token cycle; {scaled} o_proj/down_proj scaled by {a.scale}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
