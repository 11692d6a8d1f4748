#!/usr/bin/python3
"""Make tiny EAGLE-3 drafter fixtures (every published checkpoint layout, plus broken copies) and their references.

    make_tiny_drafters.py --out DIR --targets TINY_DIR [--force]

TINY_DIR is the output of make_tiny_models.py (drafters of tiny/llama_fp32 read it). Writes (README.md, "Drafter
fixtures"):
    DIR/targets/{echo_fp32, nearecho_fp32, smallvocab_fp32}/   extra HF targets (bigram targets)
    DIR/<drafter>/{config.json, model.safetensors}              eagle_official, specforge, speculators,
                                                                speculators_2layer, vllm_bf16, exact_echo (and
                                                                exact_echo_{eagle,vllm,2layer}: the same exact
                                                                drafter in the other layouts), exact_smallvocab,
                                                                random_echo
    DIR/reference/<drafter>.safetensors                         eagle3_reference.py outputs (fp32)
    DIR/broken/<name>/ + DIR/broken/MANIFEST.json               one contract broken per copy
    DIR/MANIFEST.json                                           layouts, flags, aux layers, rates, generator hash
Deterministic (fixed seeds). Nothing is regenerated when DIR/MANIFEST.json records the same generator hash (these
scripts + the tiny target files they read) and every listed file exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tiny_models as mtm  # noqa: E402
import safetensors_np  # noqa: E402

GENERATOR_VERSION = 1
REF_LEN = 16
REF_SEED = 20260716
BASE_TARGET = "llama_fp32"          # in --targets (tiny/)
SPECIALS_384 = (0, 1, 2, 381, 382, 383)
SPECIALS_24 = (0, 1, 2)

# exact-drafter construction (README): attention sharpness s, and the minimum agreement rate we insist on
EXACT_QK_SCALE = 4.0
EXACT_MIN_RATE = 0.99
NEARECHO_GAIN = 0.3                 # o_proj/down_proj std = gain / sqrt(fan_in)
NEARECHO_RANGE = (0.60, 0.85)



def write_json(path, obj):
    mtm.write_json(path, obj)


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------------------------
# extra targets


def echo_config() -> dict:
    cfg = mtm.make_config(BASE_TARGET)          # vocab 384, hidden 64, 8 layers, 4/2 heads, llama3 rope
    return cfg


def smallvocab_config() -> dict:
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=24, hidden_size=32,
               intermediate_size=64, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
               rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None, max_position_embeddings=4096,
               hidden_act="silu", bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
               attention_bias=False, mlp_bias=False, initializer_range=0.02, torch_dtype="float32",
               use_cache=True, transformers_version="4.46.0")
    return dict(sorted(cfg.items()))


def _cycle_map(rng, ordinary, V, specials):
    """A single random cycle over the ordinary ids (far from the identity: no fixed points, no short cycles);
    special ids map to random ordinary ids."""
    perm = rng.permutation(np.asarray(ordinary))
    f = np.zeros(V, dtype=np.int64)
    f[perm] = np.roll(perm, -1)
    for s in specials:
        f[s] = int(rng.choice(ordinary))
    return f


def _normed(E, w, eps):
    return (w * (E / np.sqrt((E.astype(np.float64) ** 2).mean(1, keepdims=True) + eps))).astype(np.float32)


def make_echo(seed: int = 4242):
    """Bigram target: every o_proj/down_proj is zero, so the residual stream stays the token embedding and the
    next token is argmax lm_head(norm(embed(x))) = f(x). Embeddings live in dims 0..31 (two 16-dim slices of equal
    norm, zero elsewhere) so that a 2-kv-head, head_dim-16 drafter can carry them through its values (exact_echo);
    lm_head[f(x)] += c·norm(embed(x)) makes f(x) the argmax with a clear margin."""
    cfg = echo_config()
    rng = np.random.default_rng(seed)
    t = mtm.make_weights(cfg, seed)
    V, H = cfg["vocab_size"], cfg["hidden_size"]
    E = np.zeros((V, H), np.float32)
    for s in range(2):
        v = rng.standard_normal((V, 16))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        E[:, 16 * s:16 * (s + 1)] = 2.0 * v
    w = (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32)
    ordinary = np.arange(3, 381)
    f = _cycle_map(rng, ordinary, V, SPECIALS_384)
    n = _normed(E, w, cfg["rms_norm_eps"])
    W = np.zeros((V, H), np.float32)
    for x in range(V):
        W[f[x]] += 0.15 * n[x]
    t["model.embed_tokens.weight"] = E
    t["model.norm.weight"] = w
    t["lm_head.weight"] = W.astype(np.float32)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "self_attn.o_proj.weight"] = np.zeros_like(t[p + "self_attn.o_proj.weight"])
        t[p + "mlp.down_proj.weight"] = np.zeros_like(t[p + "mlp.down_proj.weight"])
    return cfg, t, f


def make_nearecho(echo_t: dict, cfg: dict, seed: int = 4343, gain: float = NEARECHO_GAIN):
    rng = np.random.default_rng(seed)
    t = {k: v.copy() for k, v in echo_t.items()}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        o = t[p + "self_attn.o_proj.weight"]
        d = t[p + "mlp.down_proj.weight"]
        t[p + "self_attn.o_proj.weight"] = (rng.standard_normal(o.shape) * gain / math.sqrt(o.shape[1])).astype(
            np.float32)
        t[p + "mlp.down_proj.weight"] = (rng.standard_normal(d.shape) * gain / math.sqrt(d.shape[1])).astype(
            np.float32)
    return t


def make_smallvocab(seed: int = 2424):
    """24-token bigram target with moderate logits. Embeddings are 24 random vectors in 32 dims (full row rank),
    so lm_head can be solved exactly for designed logits: per input x, 2.5 at f(x), 1.3 at g(x), 0.8 at h(x)
    (three different cycles), N(0, 0.3) noise elsewhere, -4 on <unk>/<s>/</s>."""
    cfg = smallvocab_config()
    V, H = cfg["vocab_size"], cfg["hidden_size"]
    for attempt in range(64):
        rng = np.random.default_rng(seed + attempt)
        ordinary = np.arange(3, V)
        maps = [_cycle_map(rng, ordinary, V, SPECIALS_24) for _ in range(3)]
        f, g, h = maps
        if np.any(f == g) or np.any(f == h) or np.any(g == h):
            continue
        Z = rng.standard_normal((V, V)) * 0.3
        Z[:, list(SPECIALS_24)] = -4.0
        Z[np.arange(V), f] = 2.5
        Z[np.arange(V), g] = 1.3
        Z[np.arange(V), h] = 0.8
        break
    else:
        raise RuntimeError("smallvocab: no seed gives three disjoint cycles")
    t = mtm.make_weights(cfg, seed)
    E = (rng.standard_normal((V, H)) * 0.5).astype(np.float32)
    w = (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32)
    n = _normed(E, w, cfg["rms_norm_eps"]).astype(np.float64)
    # logits[x, y] = W[y] · n[x] = Z[x, y]  ->  n Wᵀ = Z  ->  Wᵀ = pinv(n) Z (exact: n has full row rank 24)
    W = (np.linalg.pinv(n) @ Z).T.astype(np.float32)
    t["model.embed_tokens.weight"] = E
    t["model.norm.weight"] = w
    t["lm_head.weight"] = W
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "self_attn.o_proj.weight"] = np.zeros_like(t[p + "self_attn.o_proj.weight"])
        t[p + "mlp.down_proj.weight"] = np.zeros_like(t[p + "mlp.down_proj.weight"])
    return cfg, t, f


SMALLVOCAB_CHARS = ["\u2581", "a", "e", "h", "i", "n", "o", "r", "s", "t"]
SMALLVOCAB_MERGES = [("t", "h"), ("h", "e"), ("i", "n"), ("e", "r"), ("a", "n"), ("\u2581", "th"), ("\u2581th", "e"),
                     ("o", "n"), ("\u2581", "a"), ("r", "e"), ("s", "t")]


def smallvocab_tokenizer():
    """A SentencePiece-style (Llama-2 layout) BPE over 24 ids: 0 <unk>, 1 <s>, 2 </s>, 3..12 the characters
    ▁ a e h i n o r s t, 13..23 eleven merges. Other characters encode to <unk> (byte-level BPE needs 256 ids)."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for c in SMALLVOCAB_CHARS:
        vocab[c] = len(vocab)
    for a, b in SMALLVOCAB_MERGES:
        assert a in vocab and b in vocab
        vocab[a + b] = len(vocab)
    assert sorted(vocab.values()) == list(range(24))
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for s, i in list(vocab.items())[:3]]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "vocab": vocab,
                  "merges": [f"{a} {b}" for a, b in SMALLVOCAB_MERGES]},
    }
    tok_cfg = {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
        "additional_special_tokens": [], "bos_token": "<s>", "eos_token": "</s>", "pad_token": None,
        "unk_token": "<unk>", "clean_up_tokenization_spaces": False, "legacy": True, "model_max_length": 4096,
        "tokenizer_class": "LlamaTokenizer",
    }
    return tok, tok_cfg


def write_target(out_dir, cfg, tensors, tok_src=None, tok=None, eos=(2, 382)):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    write_json(os.path.join(out_dir, "config.json"), cfg)
    write_json(os.path.join(out_dir, "generation_config.json"),
               {"bos_token_id": 1, "eos_token_id": list(eos), "max_length": 4096, "transformers_version": "4.46.0"})
    safetensors_np.save(os.path.join(out_dir, "model.safetensors"), tensors, {k: "F32" for k in tensors},
                        {"format": "pt"})
    if tok_src:
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join(tok_src, fn), os.path.join(out_dir, fn))
    if tok:
        write_json(os.path.join(out_dir, "tokenizer.json"), tok[0])
        write_json(os.path.join(out_dir, "tokenizer_config.json"), tok[1])


# ---------------------------------------------------------------------------------------------------------------
# drafters


def _normal(rng, shape, std):
    return (rng.standard_normal(shape) * std).astype(np.float32)


def _norm_w(rng, n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def random_layer(rng, prefix, H, nh, nkv, D, I, first: bool) -> dict:
    inw = 2 * H if first else H
    t = {
        prefix + "input_layernorm.weight": _norm_w(rng, H),
        prefix + "self_attn.q_proj.weight": _normal(rng, (nh * D, inw), 1.4 / math.sqrt(inw)),
        prefix + "self_attn.k_proj.weight": _normal(rng, (nkv * D, inw), 1.4 / math.sqrt(inw)),
        prefix + "self_attn.v_proj.weight": _normal(rng, (nkv * D, inw), 1.0 / math.sqrt(inw)),
        prefix + "self_attn.o_proj.weight": _normal(rng, (H, nh * D), 0.7 / math.sqrt(nh * D)),
        prefix + "post_attention_layernorm.weight": _norm_w(rng, H),
        prefix + "mlp.gate_proj.weight": _normal(rng, (I, H), 1.0 / math.sqrt(H)),
        prefix + "mlp.up_proj.weight": _normal(rng, (I, H), 1.0 / math.sqrt(H)),
        prefix + "mlp.down_proj.weight": _normal(rng, (H, I), 0.7 / math.sqrt(I)),
    }
    if first:
        t[prefix + "hidden_norm.weight"] = _norm_w(rng, H)
    return t


def vocab_maps(rng, V, Vd):
    """d2t (offsets) and t2d for a reduced vocabulary: Vd random target ids, sorted (spec §2); identity maps
    (d2t = 0, t2d all true) when Vd == V."""
    if Vd == V:
        return np.zeros(V, np.int64), np.ones(V, bool)
    chosen = np.sort(rng.choice(np.arange(V), size=Vd, replace=False)).astype(np.int64)
    d2t = chosen - np.arange(Vd, dtype=np.int64)
    t2d = np.zeros(V, bool)
    t2d[chosen] = True
    return d2t, t2d


DIMS64 = dict(H=64, nh=4, nkv=2, D=16, I=128)


def flat_config(arch, V, Vd, extra=None, dims=DIMS64, torch_dtype="float32"):
    """The official/SpecForge/vLLM flat config (spec §3a), without rope keys unless `extra` adds them."""
    cfg = {"architectures": [arch], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
           "hidden_size": dims["H"], "initializer_range": 0.02, "intermediate_size": dims["I"],
           "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": dims["nh"],
           "num_key_value_heads": dims["nkv"], "num_hidden_layers": 1, "pad_token_id": 0, "rms_norm_eps": 1e-05,
           "tie_word_embeddings": False, "torch_dtype": torch_dtype, "transformers_version": "4.28.1",
           "use_cache": True, "vocab_size": V, "draft_vocab_size": Vd}
    cfg.update(extra or {})
    return cfg


def speculators_config(target_cfg, target_name, Vd, aux, flags, num_layers=1, dims=DIMS64):
    """vllm-project/speculators layout (spec §3b): transformer_layer_config is a LlamaConfig dict built from the
    verifier's config (rope included), resized to the drafter."""
    lc = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": target_cfg["vocab_size"],
          "hidden_size": dims["H"], "intermediate_size": dims["I"], "num_hidden_layers": num_layers,
          "num_attention_heads": dims["nh"], "num_key_value_heads": dims["nkv"], "head_dim": dims["D"],
          "rms_norm_eps": target_cfg["rms_norm_eps"], "rope_theta": target_cfg["rope_theta"],
          "rope_scaling": target_cfg.get("rope_scaling"),
          "max_position_embeddings": target_cfg["max_position_embeddings"], "hidden_act": "silu",
          "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "attention_bias": False,
          "mlp_bias": False, "torch_dtype": "float32"}
    cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.3.0",
           "speculators_config": {
               "algorithm": "eagle3",
               "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
               "default_proposal_method": "greedy",
               "verifier": {"name_or_path": target_name, "architectures": target_cfg["architectures"]}},
           "transformer_layer_config": lc, "draft_vocab_size": Vd, "target_hidden_size": target_cfg["hidden_size"],
           "eagle_aux_hidden_state_layer_ids": list(aux), "embed_requires_grad": False, "torch_dtype": "float32"}
    cfg.update(flags)
    return cfg


def common_tensors(rng, H, Ht, num_aux, V, Vd, target_t, lm_head=None):
    d2t, t2d = vocab_maps(rng, V, Vd)
    t = {"fc.weight": _normal(rng, (H, num_aux * Ht), 1.0 / math.sqrt(num_aux * Ht)),
         "norm.weight": _norm_w(rng, H),
         "lm_head.weight": lm_head if lm_head is not None else _normal(rng, (Vd, H), 0.375),
         "d2t": d2t, "t2d": t2d}
    return t


def build_random_drafter(name, seed, targets):
    """Config + tensors for the random-weight drafters (spec §3 layouts)."""
    rng = np.random.default_rng(seed)
    d = DIMS64
    H, nh, nkv, D, I = d["H"], d["nh"], d["nkv"], d["D"], d["I"]
    if name == "eagle_official":
        tcfg, tt = targets[BASE_TARGET]
        V, Vd = 384, 256
        cfg = flat_config("LlamaForCausalLM", V, Vd)
        t = common_tensors(rng, H, 64, 3, V, Vd, tt)
        t.update(random_layer(rng, "midlayer.", H, nh, nkv, D, I, True))
        return cfg, t, BASE_TARGET
    if name == "specforge":
        tcfg, tt = targets[BASE_TARGET]
        V = Vd = 384
        cfg = flat_config("LlamaForCausalLMEagle3", V, Vd, {
            "head_dim": D, "fc_norm": True,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4], "use_aux_hidden_state": True}})
        t = common_tensors(rng, H, 64, 3, V, Vd, tt)
        t.update({f"fc_norm.{i}.weight": _norm_w(rng, 64) for i in range(3)})
        t.update(random_layer(rng, "midlayer.", H, nh, nkv, D, I, True))
        return cfg, t, BASE_TARGET
    if name in ("speculators", "speculators_2layer"):
        tcfg, tt = targets[BASE_TARGET]
        V, Vd = 384, 256
        two = name == "speculators_2layer"
        flags = {"norm_before_residual": True, "norm_before_fc": not two, "fc_norm": False, "norm_output": not two}
        aux = [1, 4, 7] if two else [2, 4, 5]
        cfg = speculators_config(tcfg, "tiny/" + BASE_TARGET, Vd, aux, flags, num_layers=2 if two else 1)
        d2t, t2d = vocab_maps(rng, V, Vd)
        # speculators initialises lm_head from the verifier's rows selected by t2d (and keeps it frozen, §7.4)
        lm = np.array(tt["lm_head.weight"][t2d], dtype=np.float32)
        t = common_tensors(rng, H, 64, 3, V, Vd, tt, lm_head=lm)
        t["d2t"], t["t2d"] = d2t, t2d
        if not two:
            t["input_norm.weight"] = _norm_w(rng, 3 * 64)
        t["embed_tokens.weight"] = np.array(tt["model.embed_tokens.weight"], dtype=np.float32)
        t.update(random_layer(rng, "layers.0.", H, nh, nkv, D, I, True))
        if two:
            t.update(random_layer(rng, "layers.1.", H, nh, nkv, D, I, False))
        return cfg, t, BASE_TARGET
    if name == "vllm_bf16":
        tcfg, tt = targets[BASE_TARGET]
        V, Vd = 384, 256
        cfg = flat_config("Eagle3LlamaForCausalLM", V, Vd, {
            "head_dim": D, "norm_before_residual": False, "rope_theta": 100000.0, "rope_scaling": None},
            torch_dtype="bfloat16")
        t = common_tensors(rng, H, 64, 3, V, Vd, tt)
        t.update(random_layer(rng, "midlayer.", H, nh, nkv, D, I, True))
        t = {k: (safetensors_np.round_bf16(v) if v.dtype == np.float32 else v) for k, v in t.items()}
        return cfg, t, BASE_TARGET
    if name == "random_echo":
        tcfg, tt = targets["echo_fp32"]
        V = Vd = 384
        flags = {"norm_before_residual": True, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
        cfg = speculators_config(tcfg, "drafters/targets/echo_fp32", Vd, [2, 4, 5], flags)
        t = common_tensors(rng, H, 64, 3, V, Vd, tt)
        t["embed_tokens.weight"] = np.array(tt["model.embed_tokens.weight"], dtype=np.float32)
        t.update(random_layer(rng, "layers.0.", H, nh, nkv, D, I, True))
        return cfg, t, "echo_fp32"
    raise KeyError(name)


def build_exact_drafter(name, targets, s=EXACT_QK_SCALE, seed=99):
    """A drafter that reproduces a bigram target (README, "exact drafters"). With norm_before_residual and
    hidden_norm = 0 the hidden input vanishes (residual and the hidden half of u are 0); fc = 0. Layer 0 then sees
    only a = input_layernorm(e) = the target's norm(embed(x)) (input_layernorm.weight = model.norm.weight).
    k = s·a (first nkv·D dims), and query head h = s·(the slice of its kv head), so each query attends (almost)
    only to keys of its own token; v = a (first nkv·D dims) and o_proj averages the query heads of each kv head
    back into place, so attn_out = a (the target embedding is zero beyond nkv·D dims). down_proj = 0, norm = 1,
    lm_head = the target's: draft logits = target logits / rms(a), the same argmax."""
    rng = np.random.default_rng(seed)
    tname = "echo_fp32" if name.startswith("exact_echo") else "smallvocab_fp32"
    tcfg, tt = targets[tname]
    H = tcfg["hidden_size"]
    V = tcfg["vocab_size"]
    dims = dict(DIMS64) if H == 64 else dict(H=32, nh=4, nkv=2, D=16, I=64)
    nh, nkv, D, I = dims["nh"], dims["nkv"], dims["D"], dims["I"]
    KV = nkv * D
    assert KV <= H
    E = tt["model.embed_tokens.weight"]
    assert np.all(E[:, KV:] == 0), "the bigram target's embeddings must be zero beyond the kv width"
    flags = {"norm_before_residual": True, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
    # The same construction in every layout; norm_before_residual keeps later steps' own hidden state out too.
    two = name == "exact_echo_2layer"
    p = "layers.0."
    if name == "exact_echo_eagle":
        cfg = flat_config("LlamaForCausalLM", V, V, {"head_dim": D, "rms_norm_eps": tcfg["rms_norm_eps"],
                                                     "rope_theta": tcfg["rope_theta"],
                                                     "norm_before_residual": True}, dims=dims)
        p = "midlayer."
    elif name == "exact_echo_vllm":
        cfg = flat_config("Eagle3LlamaForCausalLM", V, V, {"head_dim": D, "rms_norm_eps": tcfg["rms_norm_eps"],
                                                           "rope_theta": tcfg["rope_theta"], **flags}, dims=dims)
    else:
        cfg = speculators_config(tcfg, "drafters/targets/" + tname, V, [2, 4, 5], flags, num_layers=2 if two else 1,
                                 dims=dims)
    n_rep = nh // nkv
    q = np.zeros((nh * D, 2 * H), np.float32)
    for h in range(nh):
        g = h // n_rep
        q[h * D:(h + 1) * D, g * D:(g + 1) * D] = s * np.eye(D)
    k = np.zeros((KV, 2 * H), np.float32)
    k[:, :KV] = s * np.eye(KV)
    v = np.zeros((KV, 2 * H), np.float32)
    v[:, :KV] = np.eye(KV)
    o = np.zeros((H, nh * D), np.float32)
    for h in range(nh):
        g = h // n_rep
        o[g * D:(g + 1) * D, h * D:(h + 1) * D] = np.eye(D) / n_rep
    t = {
        "fc.weight": np.zeros((H, 3 * tcfg["hidden_size"]), np.float32),
        p + "input_layernorm.weight": np.array(tt["model.norm.weight"], dtype=np.float32),
        p + "hidden_norm.weight": np.zeros(H, np.float32),
        p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k, p + "self_attn.v_proj.weight": v,
        p + "self_attn.o_proj.weight": o,
        p + "post_attention_layernorm.weight": np.ones(H, np.float32),
        p + "mlp.gate_proj.weight": _normal(rng, (I, H), 1.0 / math.sqrt(H)),
        p + "mlp.up_proj.weight": _normal(rng, (I, H), 1.0 / math.sqrt(H)),
        p + "mlp.down_proj.weight": np.zeros((H, I), np.float32),
        "norm.weight": np.ones(H, np.float32),
        "lm_head.weight": np.array(tt["lm_head.weight"], dtype=np.float32),
        "embed_tokens.weight": np.array(E, dtype=np.float32),
        "d2t": np.zeros(V, np.int64), "t2d": np.ones(V, bool),
    }
    if two:  # a second, standard layer whose output projections are 0: the identity on the residual stream
        t.update(random_layer(rng, "layers.1.", H, nh, nkv, D, I, False))
        t["layers.1.self_attn.o_proj.weight"] = np.zeros((H, nh * D), np.float32)
        t["layers.1.mlp.down_proj.weight"] = np.zeros((H, I), np.float32)
    return cfg, t, tname


DRAFTERS = ["eagle_official", "specforge", "speculators", "speculators_2layer", "vllm_bf16", "exact_echo",
            "exact_echo_eagle", "exact_echo_vllm", "exact_echo_2layer", "exact_smallvocab", "random_echo"]
RANDOM_SEEDS = {n: zlib.crc32(n.encode()) % 100000 for n in DRAFTERS}
MIN_MARGIN = 0.05


def save_drafter(ddir, cfg, tensors):
    if os.path.isdir(ddir):
        shutil.rmtree(ddir)
    os.makedirs(ddir)
    write_json(os.path.join(ddir, "config.json"), cfg)
    bf16 = cfg.get("torch_dtype") == "bfloat16"
    dtypes = {}
    for k, v in tensors.items():
        if k == "d2t":
            dtypes[k] = "I64"
        elif k == "t2d":
            dtypes[k] = "BOOL"
        else:
            dtypes[k] = "BF16" if bf16 else "F32"
    safetensors_np.save(os.path.join(ddir, "model.safetensors"), tensors, dtypes, {"format": "pt"})
    return dtypes


# ---------------------------------------------------------------------------------------------------------------
# checks shared with test_drafter_selfcheck.py


def ref_input_ids(V: int) -> np.ndarray:
    rng = np.random.default_rng(REF_SEED)
    hi = 381 if V == 384 else V
    return np.concatenate([[1], rng.integers(3, hi, size=REF_LEN - 1)]).astype(np.int64)


def random_sequences(V, n, length, seed):
    rng = np.random.default_rng(seed)
    hi = 381 if V == 384 else V
    return [np.concatenate([[1], rng.integers(3, hi, size=length - 1)]).astype(np.int64) for _ in range(n)]


def draft_agreement(drafter, target, seqs, steps: int):
    """Agreement of the drafter's greedy predictions (mapped to target ids) with the target's argmax:
    (a) every row of the extend pass over ids[1:] + [next] (row t predicts the target's argmax at position t+1);
    (b) `steps` further draft steps feeding h_next back (each compared with the target's argmax after the drafted
    chain so far). Returns dict(extend=rate, chain=rate, all=rate, n_extend, n_chain) plus the KL(p||q) at T=1 of
    every extend row when the draft vocabulary is the full vocabulary."""
    import torch
    import eagle3_reference as er
    ext_hit = ext_n = ch_hit = ch_n = 0
    kls = []
    for ids in seqs:
        S = ids.size
        lt, hs = target.forward(ids)
        nxt = int(torch.argmax(lt[-1]))
        aux = er.aux_states(hs.numpy(), drafter.cfg.aux_layers)
        dids = np.concatenate([ids[1:], [nxt]])
        cache = drafter.new_cache()
        lg, hn = drafter.extend(dids, aux, np.arange(S), cache)
        pred = drafter.to_target(torch.argmax(lg, -1)).numpy()
        drafted = [int(pred[-1])]
        h = hn[-1:]
        for j in range(steps):
            lgs, h = drafter.step([drafted[-1]], h, [S + j], cache)
            drafted.append(int(drafter.to_target(int(torch.argmax(lgs[0])))))
        full = np.concatenate([ids, [nxt], drafted[:-1]]).astype(np.int64)
        lf, _ = target.forward(full)
        want = torch.argmax(lf, -1).numpy()
        ext_hit += int(np.sum(pred == want[1:S + 1]))
        ext_n += S
        ch_hit += int(np.sum(np.array(drafted[1:]) == want[S + 1:S + 1 + steps]))
        ch_n += steps
        if drafter.cfg.draft_vocab_size == drafter.cfg.vocab_size:
            p = torch.log_softmax(lf[1:S + 1], -1)
            q = torch.log_softmax(lg, -1)
            kls.append((p.exp() * (p - q)).sum(-1).numpy())
    res = {"extend": ext_hit / ext_n, "chain": ch_hit / ch_n, "all": (ext_hit + ch_hit) / (ext_n + ch_n),
           "n_extend": ext_n, "n_chain": ch_n}
    if kls:
        k = np.concatenate(kls)
        res["kl_mean"] = float(k.mean())
        res["kl_max"] = float(k.max())
    return res


def bigram_agreement(target, f, seqs):
    """Fraction of positions where the target's argmax equals the bigram map f(current token)."""
    import torch
    hit = n = 0
    for ids in seqs:
        lt, _ = target.forward(ids)
        hit += int(np.sum(torch.argmax(lt, -1).numpy() == f[ids]))
        n += ids.size
    return hit / n


def target_probs_summary(target, V):
    """For each input token x alone after BOS: the next-token distribution at T=1 (smallvocab sanity)."""
    import torch
    ps = []
    for x in range(V):
        lt, _ = target.forward(np.array([1, x], dtype=np.int64))
        ps.append(torch.softmax(lt[-1], -1).numpy())
    P = np.array(ps)
    return {"min_tokens_over_5pct": int((P > 0.05).sum(1).min()), "top_prob_min": float(P.max(1).min()),
            "top_prob_max": float(P.max(1).max()), "special_prob_max": float(P[:, list(SPECIALS_24)].max())}


# ---------------------------------------------------------------------------------------------------------------
# broken fixtures


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = prefix + k
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def tensor_diff(a: dict, ad: dict, b: dict, bd: dict) -> dict:
    """Names added/removed/changed (shape, dtype or values) from a to b."""
    added = sorted(set(b) - set(a))
    removed = sorted(set(a) - set(b))
    changed = sorted(n for n in set(a) & set(b)
                     if ad.get(n) != bd.get(n) or a[n].shape != b[n].shape or not np.array_equal(a[n], b[n]))
    return {"added": added, "removed": removed, "changed": changed}


def config_diff(a: dict, b: dict) -> list:
    fa, fb = _flat(a), _flat(b)
    return sorted(k for k in set(fa) | set(fb) if fa.get(k, "<absent>") != fb.get(k, "<absent>"))


# name -> (base drafter, short description, expect substrings)
BROKEN = {
    "both_layouts": ("eagle_official", "layers.0.* copies of every midlayer.* tensor", ["midlayer", "layers.0"]),
    "missing_tensor": ("eagle_official", "midlayer.mlp.up_proj.weight deleted", ["midlayer.mlp.up_proj.weight"]),
    "unknown_tensor": ("eagle_official", "extra midlayer.foo.weight [64]", ["midlayer.foo.weight"]),
    "fc_width": ("eagle_official", "fc.weight [64, 128] with 3 aux layers of 64", ["fc.weight", "192", "128"]),
    "attn_width": ("eagle_official", "midlayer.self_attn.q_proj.weight [64, 64] instead of [64, 128]",
                   ["midlayer.self_attn.q_proj.weight", "128", "64"]),
    "lm_head_rows": ("eagle_official", "lm_head.weight [200, 64] vs draft_vocab_size 256",
                     ["lm_head.weight", "256", "200"]),
    "d2t_len": ("eagle_official", "d2t [200] vs draft_vocab_size 256", ["d2t", "256", "200"]),
    "t2d_len": ("eagle_official", "t2d [300] vs target vocab 384", ["t2d", "384", "300"]),
    "embed_width": ("speculators", "embed_tokens.weight [384, 32] vs hidden 64", ["embed_tokens.weight", "64", "32"]),
    "vocab_mismatch": ("eagle_official", "config vocab_size 500 vs target 384", ["vocab_size", "500", "384"]),
    "aux_out_of_range": ("speculators", "eagle_aux_hidden_state_layer_ids [2, 4, 12] for an 8-layer target",
                         ["eagle_aux_hidden_state_layer_ids", "12"]),
    "target_hidden": ("speculators", "target_hidden_size 128 vs the target's 64", ["target_hidden_size", "128", "64"]),
    "d2t_float": ("eagle_official", "d2t stored as F32", ["d2t", "I64", "F32"]),
    "d2t_range": ("eagle_official", "last draft id maps to target id 390 >= 384", ["d2t", "390", "384"]),
    "d2t_not_increasing": ("eagle_official", "two adjacent target ids swapped (same set, t2d unchanged)",
                           ["d2t", "increasing"]),
    "d2t_absolute": ("eagle_official", "d2t holds absolute target ids instead of offsets", ["d2t", "absolute"]),
    "d2t_t2d_mismatch": ("eagle_official", "t2d: one selected id cleared, one unselected id set (count kept)",
                         ["d2t", "t2d"]),
    "reduced_vocab_no_d2t": ("eagle_official", "draft_vocab_size 256 with d2t and t2d deleted", ["d2t", "256"]),
    "unknown_architecture": ("eagle_official", "architectures [\"GPT2Model\"]", ["architectures", "GPT2Model"]),
    "norm_flags_conflict": ("speculators", "fc_norm true (with fc_norm.{0,1,2}.weight) next to norm_before_fc true",
                            ["norm_before_fc", "fc_norm"]),
}


def make_broken(name, base_dir, out_dir):
    """Copies base_dir to out_dir and breaks one contract. Returns the intended change set."""
    cfg = read_json(os.path.join(base_dir, "config.json"))
    t = safetensors_np.load(os.path.join(base_dir, "model.safetensors"))
    dt = dict(t.dtypes)
    t = dict(t)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "both_layouts":
        for k in [k for k in t if k.startswith("midlayer.")]:
            nk = "layers.0." + k[len("midlayer."):]
            t[nk], dt[nk] = t[k].copy(), dt[k]
    elif name == "missing_tensor":
        del t["midlayer.mlp.up_proj.weight"]
    elif name == "unknown_tensor":
        t["midlayer.foo.weight"], dt["midlayer.foo.weight"] = np.ones(64, np.float32), "F32"
    elif name == "fc_width":
        t["fc.weight"] = t["fc.weight"][:, :128].copy()
    elif name == "attn_width":
        t["midlayer.self_attn.q_proj.weight"] = t["midlayer.self_attn.q_proj.weight"][:, :64].copy()
    elif name == "lm_head_rows":
        t["lm_head.weight"] = t["lm_head.weight"][:200].copy()
    elif name == "d2t_len":
        t["d2t"] = t["d2t"][:200].copy()
    elif name == "t2d_len":
        t["t2d"] = t["t2d"][:300].copy()
    elif name == "embed_width":
        t["embed_tokens.weight"] = t["embed_tokens.weight"][:, :32].copy()
    elif name == "vocab_mismatch":
        cfg["vocab_size"] = 500
    elif name == "aux_out_of_range":
        cfg["eagle_aux_hidden_state_layer_ids"] = [2, 4, 12]
    elif name == "target_hidden":
        cfg["target_hidden_size"] = 128
    elif name == "d2t_float":
        dt["d2t"] = "F32"
    elif name == "d2t_range":
        d = t["d2t"].copy()
        Vd = d.size
        d[-1] = 390 - (Vd - 1)
        t["d2t"] = d
    elif name == "d2t_not_increasing":
        d = t["d2t"].copy()
        Vd = d.size
        tg = np.arange(Vd) + d
        i = Vd // 2
        while tg[i + 1] - tg[i] < 2 and i < Vd - 2:  # keep it a pure order swap: pick a pair with a gap
            i += 1
        tg[i], tg[i + 1] = tg[i + 1], tg[i]
        t["d2t"] = (tg - np.arange(Vd)).astype(np.int64)
    elif name == "d2t_absolute":
        t["d2t"] = (np.arange(t["d2t"].size) + t["d2t"]).astype(np.int64)
    elif name == "d2t_t2d_mismatch":
        m = t["t2d"].copy()
        on, off = np.nonzero(m)[0], np.nonzero(~m)[0]
        removed = int(on[len(on) // 3])
        added = int(off[off > removed][0])
        m[removed], m[added] = False, True
        t["t2d"] = m
    elif name == "reduced_vocab_no_d2t":
        del t["d2t"], t["t2d"]
    elif name == "unknown_architecture":
        cfg["architectures"] = ["GPT2Model"]
    elif name == "norm_flags_conflict":
        cfg["fc_norm"] = True
        for i in range(3):
            t[f"fc_norm.{i}.weight"], dt[f"fc_norm.{i}.weight"] = np.ones(64, np.float32), "F32"
    else:
        raise KeyError(name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    write_json(os.path.join(out_dir, "config.json"), cfg)
    dt = {k: v for k, v in dt.items() if k in t}
    safetensors_np.save(os.path.join(out_dir, "model.safetensors"), t, dt, {"format": "pt", "broken": name})
    base_t = safetensors_np.load(os.path.join(base_dir, "model.safetensors"))
    new_t = safetensors_np.load(os.path.join(out_dir, "model.safetensors"))
    return {"tensors": tensor_diff(base_t, base_t.dtypes, new_t, new_t.dtypes),
            "config": config_diff(read_json(os.path.join(base_dir, "config.json")), cfg)}


# ---------------------------------------------------------------------------------------------------------------
# generation


SCRIPTS = ("make_tiny_drafters.py", "eagle3_reference.py", "hf_reference.py", "safetensors_np.py",
           "make_tiny_models.py")


def script_hash(targets_dir: str) -> str:
    h = hashlib.sha256()
    for f in SCRIPTS:
        with open(os.path.join(HERE, f), "rb") as fh:
            h.update(f.encode() + b"\0" + fh.read() + b"\0")
    tdir = os.path.join(targets_dir, BASE_TARGET)
    for f in sorted(os.listdir(tdir)):
        with open(os.path.join(tdir, f), "rb") as fh:
            h.update(f.encode() + b"\0" + hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def manifest_files(man: dict) -> list:
    files = ["MANIFEST.json", "broken/MANIFEST.json"]
    for name, v in man["targets"].items():
        files += [f"targets/{name}/{f}" for f in v["files"]]
    for name, v in man["drafters"].items():
        files += [f"{name}/{f}" for f in v["files"]] + [v["reference"]]
    for name in man["broken"]:
        files += [f"broken/{name}/config.json", f"broken/{name}/model.safetensors"]
    return files


def up_to_date(out: str, digest: str):
    try:
        man = read_json(os.path.join(out, "MANIFEST.json"))
    except (OSError, ValueError):
        return None
    if man.get("generator_version") != GENERATOR_VERSION or man.get("generator_hash") != digest:
        return None
    if sorted(man.get("drafters", {})) != sorted(DRAFTERS) or sorted(man.get("broken", [])) != sorted(BROKEN):
        return None
    if not all(os.path.isfile(os.path.join(out, f)) for f in manifest_files(man)):
        return None
    return man


def margins(logits) -> np.ndarray:
    s = np.sort(np.asarray(logits), axis=-1)
    return s[:, -1] - s[:, -2]


def print_summary(man: dict) -> None:
    print(f"{'drafter':20} {'layout':12} {'target':28} {'Vd':>4} {'L':>2} {'aux':10} {'nbr':>3} {'nbf':>3} "
          f"{'fcn':>3} {'nout':>4} {'emb':7} {'min margin':>10}  agreement")
    for name, v in man["drafters"].items():
        fl = v["flags"]
        ag = v.get("agreement")
        ags = "" if not ag else f"extend {ag['extend']:.4f} chain {ag['chain']:.4f}" + (
            f" KL {ag['kl_mean']:.2e}" if "kl_mean" in ag else "")
        print(f"{name:20} {v['layout']:12} {v['target']:28} {v['draft_vocab_size']:>4} {v['num_layers']:>2} "
              f"{','.join(map(str, v['aux_layers'])):10} {int(fl['norm_before_residual']):>3} "
              f"{int(fl['norm_before_fc']):>3} {int(fl['fc_norm']):>3} {int(fl['norm_output']):>4} "
              f"{v['embed_source']:7} {v['margin_min']:10.4f}  {ags}")
    for name, v in man["targets"].items():
        extra = {k: v[k] for k in ("bigram_agreement", "bigram_min_margin", "next_token_probs") if k in v}
        print(f"target {name}: {json.dumps(extra)}")
    print(f"broken fixtures: {len(man['broken'])} ({', '.join(man['broken'])})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="make tiny EAGLE-3 drafter fixtures and reference outputs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", required=True, help="make_tiny_models.py output (holds llama_fp32)")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.time()
    out = os.path.abspath(args.out)
    tiny = os.path.abspath(args.targets)
    if not os.path.isfile(os.path.join(tiny, BASE_TARGET, "config.json")):
        print(f"error: {tiny}/{BASE_TARGET}/config.json not found (run make_tiny_models.py first)", file=sys.stderr)
        return 2
    digest = script_hash(tiny)
    if not args.force:
        man = up_to_date(out, digest)
        if man is not None:
            print(f"{out}: up to date (generator {digest[:12]}), nothing to do")
            print_summary(man)
            return 0

    import torch
    torch.set_num_threads(1)
    import hf_reference as hf
    import eagle3_reference as er

    os.makedirs(os.path.join(out, "reference"), exist_ok=True)
    if os.path.exists(os.path.join(out, "MANIFEST.json")):
        os.remove(os.path.join(out, "MANIFEST.json"))
    fixtures_root = os.path.dirname(out)

    def rel(path):
        return os.path.relpath(path, fixtures_root)

    man = {"generator": "tests/oracle/make_tiny_drafters.py", "generator_version": GENERATOR_VERSION,
           "generator_hash": digest, "reference_len": REF_LEN, "targets": {}, "drafters": {}, "broken": {}}

    # -- targets
    target_dirs = {BASE_TARGET: os.path.join(tiny, BASE_TARGET)}
    targets = {BASE_TARGET: (read_json(os.path.join(tiny, BASE_TARGET, "config.json")),
                             safetensors_np.load_model_dir(os.path.join(tiny, BASE_TARGET)))}
    ecfg, et, f_echo = make_echo()
    net = make_nearecho(et, ecfg)
    scfg, st_, f_small = make_smallvocab()
    tdir = os.path.join(out, "targets")
    os.makedirs(tdir, exist_ok=True)
    tok_src = os.path.join(tiny, BASE_TARGET)
    for name, cfg, t, f, tok in (("echo_fp32", ecfg, et, f_echo, None), ("nearecho_fp32", ecfg, net, f_echo, None),
                                 ("smallvocab_fp32", scfg, st_, f_small, smallvocab_tokenizer())):
        d = os.path.join(tdir, name)
        write_target(d, cfg, t, tok_src=None if tok else tok_src, tok=tok,
                     eos=(2,) if name == "smallvocab_fp32" else (2, 382))
        target_dirs[name] = d
        targets[name] = (cfg, safetensors_np.load_model_dir(d))
        model = hf.Model.from_dir(d, "fp32")
        seqs = random_sequences(cfg["vocab_size"], 4, 64, 555)
        info = {"dir": rel(d), "vocab_size": cfg["vocab_size"], "hidden_size": cfg["hidden_size"],
                "bigram_map": [int(v) for v in f], "bigram_agreement": round(bigram_agreement(model, f, seqs), 4),
                "files": sorted(os.listdir(d))}
        if name != "nearecho_fp32":
            logits_all = [model.forward(np.array([x], dtype=np.int64))[0][0].numpy() for x in range(cfg["vocab_size"])]
            info["bigram_min_margin"] = round(float(margins(np.array(logits_all)).min()), 4)
        if name == "smallvocab_fp32":
            info["next_token_probs"] = target_probs_summary(model, cfg["vocab_size"])
            info["tokenizer"] = "Llama-2-style BPE (Prepend/Replace normalizer, <unk> for other characters)"
        if name == "nearecho_fp32":
            info["o_down_gain"] = NEARECHO_GAIN
            lo, hi = NEARECHO_RANGE
            if not lo <= info["bigram_agreement"] <= hi:
                print(f"note: nearecho bigram agreement {info['bigram_agreement']} outside {NEARECHO_RANGE}",
                      file=sys.stderr)
        elif info["bigram_agreement"] != 1.0:
            raise RuntimeError(f"{name}: argmax does not follow the bigram map ({info['bigram_agreement']})")
        man["targets"][name] = info

    # -- drafters
    for name in DRAFTERS:
        ddir = os.path.join(out, name)
        best = None
        tries = 0
        for attempt in range(32 if not name.startswith("exact") else 1):
            tries += 1
            if name.startswith("exact"):
                cfg, t, tname = build_exact_drafter(name, targets)
            else:
                cfg, t, tname = build_random_drafter(name, RANDOM_SEEDS[name] + attempt, targets)
            save_drafter(ddir, cfg, t)
            drafter = er.Drafter.from_dir(ddir, target_dirs[tname])
            target = hf.Model.from_dir(target_dirs[tname], "fp32")
            ref = er.reference_run(drafter, target, ref_input_ids(drafter.cfg.vocab_size))
            mg = float(min(margins(ref["logits"]).min(), margins(ref["step_logits"]).min()))
            if best is None or mg > best[0]:
                best = (mg, cfg, t, tname, attempt)
            if mg >= MIN_MARGIN:
                break
        mg, cfg, t, tname, attempt = best
        dtypes = save_drafter(ddir, cfg, t)
        drafter = er.Drafter.from_dir(ddir, target_dirs[tname])
        target = hf.Model.from_dir(target_dirs[tname], "fp32")
        ref = er.reference_run(drafter, target, ref_input_ids(drafter.cfg.vocab_size))
        c = drafter.cfg
        meta = {"drafter": name, "layout": c.layout, "architecture": c.architecture,
                "target": rel(target_dirs[tname]), "compute": "fp32",
                "aux_layers": ",".join(map(str, c.aux_layers)), "draft_vocab_size": str(c.draft_vocab_size),
                "num_layers": str(c.num_layers), "embed_source": drafter.embed_source,
                "rope_theta": repr(c.rope_theta), "rope_scaling": json.dumps(c.rope_scaling),
                **{k: str(v).lower() for k, v in c.flags().items()}}
        safetensors_np.save(os.path.join(out, "reference", f"{name}.safetensors"), ref, er.REFERENCE_DTYPES, meta)
        info = {"layout": c.layout, "architecture": c.architecture, "target": rel(target_dirs[tname]),
                "flags": c.flags(), "aux_layers": c.aux_layers, "aux_layers_config": c.aux_layers_config,
                "aux_layers_key": c.aux_layers_key, "aux_convention": c.aux_convention,
                "draft_vocab_size": c.draft_vocab_size, "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
                "target_hidden_size": c.target_hidden_size, "num_layers": c.num_layers, "num_heads": c.num_heads,
                "num_kv_heads": c.num_kv_heads, "head_dim": c.head_dim, "intermediate_size": c.intermediate_size,
                "rope_theta": c.rope_theta, "rope_scaling": c.rope_scaling, "embed_source": drafter.embed_source,
                "layer0_prefix": drafter.layer0_prefix.rstrip("."),
                "weight_dtype": sorted(set(v for k, v in dtypes.items() if k not in ("d2t", "t2d")))[0],
                "seed_tries": tries, "margin_min": round(mg, 4),
                "reference": f"reference/{name}.safetensors", "reference_tensors": sorted(ref),
                "files": sorted(os.listdir(ddir))}
        if name.startswith("exact") or name == "random_echo":
            seqs = random_sequences(c.vocab_size, 8, 24, 777)
            ag = draft_agreement(drafter, target, seqs, steps=6)
            info["agreement"] = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in ag.items()}
            if name.startswith("exact") and ag["all"] < EXACT_MIN_RATE:
                raise RuntimeError(f"{name}: agreement {ag} below {EXACT_MIN_RATE}")
        man["drafters"][name] = info

    # -- broken
    bman = {}
    for name, (base, desc, expect) in BROKEN.items():
        changes = make_broken(name, os.path.join(out, base), os.path.join(out, "broken", name))
        bman[name] = {"base": base, "target": man["drafters"][base]["target"], "expect": expect,
                      "description": desc, "changes": changes}
    write_json(os.path.join(out, "broken", "MANIFEST.json"), bman)
    man["broken"] = sorted(bman)
    man["seconds"] = round(time.time() - t0, 2)
    write_json(os.path.join(out, "MANIFEST.json"), man)
    print_summary(man)
    print(f"wrote {out} in {man['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
