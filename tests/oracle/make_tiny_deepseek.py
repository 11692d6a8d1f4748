#!/usr/bin/python3
"""Tiny random DeepSeek-V3 / Kimi-K2 / Kimi-K2.5 checkpoints, reference logits from deepseek_reference.py, and an
EAGLE-3 drafter in SpecForge's Kimi layout (scaled down) for a DeepSeek-style bigram target.

    make_tiny_deepseek.py --out DIR --tiny TINY_DIR [--force]

TINY_DIR is make_tiny_models.py's output (its tokenizer files are copied). Writes DIR/<variant>/ (HF layout),
DIR/reference/<variant>.safetensors (input_ids I64 [S], logits F32 [S, V] compute fp32, hidden_states F32 [L+1, S, H],
logits_hf F32 compute hf = bf16 arithmetic; quantized weights dequantized, then as bf16 ones; int4 variants also
logits_int8_activations F32, compute fp32_a8) and DIR/MANIFEST.json; skips work when the generator hash matches.

Variants (all vocab 384, hidden 64, 4 heads, bf16 weights unless stated):
  deepseek_v3_bf16          V3-like: q LoRA, yarn factor 40 (mscale_all_dim 1, orig 64), n_group 4 / topk_group 2,
                            8 experts top-2, 1 shared, 1 dense layer + 3 MoE, an MTP layer (declared unused)
  kimi_k2_bf16              Kimi-like: n_group 1, 12 experts top-3, rope_theta 50000, yarn factor 32, betas 1/1
  deepseek_v3_noqlora_bf16  q_lora_rank null (plain q_proj), no rope_scaling, n_group 2 / topk_group 1, 2 shared
  kimi_k25_bf16             the kimi_k2 weights wrapped as Kimi-K2.5 (text_config, language_model., vision tensors)
  deepseek_v3_fp8           the V3-like config as DeepSeek releases it in FP8 (quant_method fp8, weight_block_size
                            [16, 16]; q_lora_rank and moe_intermediate_size 40 so blocks end partial in rows and
                            columns): every q_a/q_b/kv_a/kv_b/o and dense, expert and shared-expert gate/up/down
                            projection F8_E4M3 with weight_scale_inv F32 [ceil(out/16), ceil(in/16)]; embeddings,
                            lm_head, norms, router bf16, e_score_correction_bias fp32
  kimi_k25_int4             the Kimi-like config as Kimi-K2.5 releases it: text_config, language_model., vision
                            tensors, routed experts compressed-tensors pack-quantized int4 group 32 (weight_packed I32,
                            weight_scale BF16, weight_shape I32), the rest bf16 (quantization_config's ignore list)
  kimi_nearecho_fp32        a Kimi-style bigram target (o_proj/down_proj small noise) for the drafter
  kimi_specforge_drafter    EAGLE-3 drafter, SpecForge layout (LlamaForCausalLMEagle3, midlayer.*, eagle_config aux
                            ids [0, 1, 2] in SGLang's output convention = inputs of layers 1, 2, 3) that reproduces
                            the bigram map (the exact-echo construction of make_tiny_drafters.py)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_np  # noqa: E402

GENERATOR_VERSION = 3
SEQ_LEN = 24
INPUT_SEED = 20261201
MIN_MARGIN = 0.1          # top-1 minus top-2 logit, fp32 reference, every position
MIN_ROUTING_GAP = 2e-4    # the closest expert / group choice of any token stays this far from flipping
MAX_SEED_TRIES = 200

BASE = dict(vocab_size=384, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
            qk_rope_head_dim=16, v_head_dim=24, first_k_dense_replace=1, n_routed_experts=8, num_experts_per_tok=2,
            n_shared_experts=1, n_group=4, topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
            scoring_func="sigmoid", topk_method="noaux_tc", rms_norm_eps=1e-6, rope_theta=10000.0,
            hidden_act="silu", bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, attention_bias=False,
            initializer_range=0.02)

V3_YARN = {"type": "yarn", "factor": 40.0, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
           "original_max_position_embeddings": 64}
KIMI_YARN = {"type": "yarn", "factor": 32.0, "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0,
             "mscale_all_dim": 1.0, "original_max_position_embeddings": 64}

FP8_BLOCK = 16
INT4_GROUP = 32
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
              "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
# compressed-tensors as Kimi-K2-Thinking / K2.5 declare it: one scheme for Linear, everything but the routed experts
# ignored (kept bf16).
INT4_CONFIG = {
    "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
    "kv_cache_scheme": None,
    "config_groups": {"group_0": {
        "targets": ["Linear"], "input_activations": None, "output_activations": None,
        "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": INT4_GROUP,
                    "dynamic": False, "actorder": None, "block_structure": None, "observer": "minmax",
                    "observer_kwargs": {}}}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
               "re:vision_tower.*", "re:mm_projector.*"]}
# Variant -> (stored format, which Linears). DeepSeek's FP8 release: every projection of attention and the MLPs;
# Kimi-K2.5: the routed experts only.
QUANTIZED = {
    "deepseek_v3_fp8": ("fp8", re.compile(r"(self_attn\.(q_a_proj|q_b_proj|q_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)|"
                                          r"mlp\.(experts\.\d+\.|shared_experts\.)?(gate|up|down)_proj)\.weight$")),
    "kimi_k25_int4": ("int4", re.compile(r"mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")),
}
K25_WRAPPED = {"kimi_k25_int4"}  # generated as kimi_k2, stored in Kimi-K2.5's layout
# Where a variant's seed search starts when the name's crc32 start needs many tries (kimi_k25_int4: 51, ~1 min of CI).
SEED_START = {"kimi_k25_int4": 85412}

VARIANTS = {
    "deepseek_v3_bf16": dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], rope_scaling=V3_YARN,
                             max_position_embeddings=2560, num_nextn_predict_layers=1),
    "kimi_k2_bf16": dict(model_type="kimi_k2", architectures=["DeepseekV3ForCausalLM"], n_routed_experts=12,
                         num_experts_per_tok=3, n_group=1, topk_group=1, routed_scaling_factor=2.827,
                         rope_theta=50000.0, rope_scaling=KIMI_YARN, max_position_embeddings=2048, rms_norm_eps=1e-5),
    "deepseek_v3_noqlora_bf16": dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                                     q_lora_rank=None, rope_scaling=None, max_position_embeddings=4096, n_group=2,
                                     topk_group=1, n_shared_experts=2, num_hidden_layers=3),
    "deepseek_v3_fp8": dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], rope_scaling=V3_YARN,
                            max_position_embeddings=2560, num_nextn_predict_layers=1, q_lora_rank=40,
                            moe_intermediate_size=40, quantization_config=FP8_CONFIG),
    "kimi_k25_int4": dict(model_type="kimi_k2", architectures=["DeepseekV3ForCausalLM"], n_routed_experts=12,
                          num_experts_per_tok=3, n_group=1, topk_group=1, routed_scaling_factor=2.827,
                          rope_theta=50000.0, rope_scaling=KIMI_YARN, max_position_embeddings=2048, rms_norm_eps=1e-5,
                          quantization_config=INT4_CONFIG),
}
WRAPPED = "kimi_k25_bf16"      # kimi_k2_bf16 as Kimi-K2.5
ECHO = "kimi_nearecho_fp32"
DRAFTER = "kimi_specforge_drafter"
ECHO_GAIN = 0.3


def make_config(name: str) -> dict:
    cfg = dict(BASE)
    cfg.update(VARIANTS[name])
    cfg["torch_dtype"] = "bfloat16"
    return dict(sorted(cfg.items()))


def make_weights(cfg: dict, seed: int) -> tuple[dict, dict]:
    """Random weights at HF names and shapes; float32 arrays and their storage dtypes (bias F32, rest BF16)."""
    rng = np.random.default_rng(seed)
    Hd, V, H = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"]
    R, rope, nope, vd = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    qk = nope + rope

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_w(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def mlp(p, inter, gain=0.5):
        return {p + "gate_proj.weight": normal((inter, Hd), 1 / math.sqrt(Hd)),
                p + "up_proj.weight": normal((inter, Hd), 1 / math.sqrt(Hd)),
                p + "down_proj.weight": normal((Hd, inter), gain / math.sqrt(inter))}

    t = {"model.embed_tokens.weight": normal((V, Hd), 0.5)}
    total = cfg["num_hidden_layers"] + cfg.get("num_nextn_predict_layers", 0)
    for i in range(total):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm_w(Hd)
        t[p + "post_attention_layernorm.weight"] = norm_w(Hd)
        if cfg.get("q_lora_rank"):
            r = cfg["q_lora_rank"]
            t[p + "self_attn.q_a_proj.weight"] = normal((r, Hd), 1 / math.sqrt(Hd))
            t[p + "self_attn.q_a_layernorm.weight"] = norm_w(r)
            t[p + "self_attn.q_b_proj.weight"] = normal((H * qk, r), 1.4 / math.sqrt(r))
        else:
            t[p + "self_attn.q_proj.weight"] = normal((H * qk, Hd), 1.4 / math.sqrt(Hd))
        t[p + "self_attn.kv_a_proj_with_mqa.weight"] = normal((R + rope, Hd), 1.4 / math.sqrt(Hd))
        t[p + "self_attn.kv_a_layernorm.weight"] = norm_w(R)
        t[p + "self_attn.kv_b_proj.weight"] = normal((H * (nope + vd), R), 1 / math.sqrt(R))
        t[p + "self_attn.o_proj.weight"] = normal((Hd, H * vd), 0.5 / math.sqrt(H * vd))
        if i < cfg["first_k_dense_replace"]:
            t.update(mlp(p + "mlp.", cfg["intermediate_size"]))
            continue
        E, I = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
        t[p + "mlp.gate.weight"] = normal((E, Hd), 1.5 / math.sqrt(Hd))
        t[p + "mlp.gate.e_score_correction_bias"] = normal((E,), 0.1)
        for e in range(E):
            t.update(mlp(p + f"mlp.experts.{e}.", I, 0.8))
        t.update(mlp(p + "mlp.shared_experts.", I * cfg["n_shared_experts"]))
        if i >= cfg["num_hidden_layers"]:  # the MTP layer's own tensors
            t[p + "enorm.weight"], t[p + "hnorm.weight"] = norm_w(Hd), norm_w(Hd)
            t[p + "eh_proj.weight"] = normal((Hd, 2 * Hd), 1 / math.sqrt(2 * Hd))
            t[p + "shared_head.norm.weight"] = norm_w(Hd)
            t[p + "shared_head.head.weight"] = normal((V, Hd), 0.375)
    t["model.norm.weight"] = norm_w(Hd)
    t["lm_head.weight"] = normal((V, Hd), 0.375)
    dtypes = {k: "F32" if k.endswith("e_score_correction_bias") else "BF16" for k in t}
    t = {k: v if dtypes[k] == "F32" else safetensors_np.round_bf16(v) for k, v in t.items()}
    return t, dtypes


# --- the stored formats (written here from the format specs; deepseek_reference.py decodes them on its own) ------

def _e4m3_values() -> np.ndarray:
    """The 127 non-negative finite float8_e4m3fn values, increasing; index = code (0x00..0x7E). Subnormals m·2^-9,
    then (8 + m)·2^(e-10) for exponent fields e = 1..15 (0x7F is NaN; e4m3fn has no infinities)."""
    sub = [m * 2.0 ** -9 for m in range(8)]
    normal = [(8 + m) * 2.0 ** (e - 10) for e in range(1, 16) for m in range(8)]
    return np.array(sub + normal[:-1])


E4M3_VALUES = _e4m3_values()
E4M3_MAX = 448.0


def e4m3_encode(x) -> np.ndarray:
    """float -> float8_e4m3fn codes (uint8): round to nearest, ties to the even code; |x| > 448 saturates to 448;
    NaN -> 0x7F with the sign bit."""
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(np.nan_to_num(x)), E4M3_MAX)
    hi = np.clip(np.searchsorted(E4M3_VALUES, a, side="left"), 0, len(E4M3_VALUES) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - E4M3_VALUES[lo], E4M3_VALUES[hi] - a
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    code = np.where(np.isnan(x), 0x7F, code).astype(np.uint8)
    return code | (np.signbit(x).astype(np.uint8) << 7)


def quantize_fp8(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """DeepSeek's block quantization: per block×block tile (partial at the edges) scale_inv = absmax / 448 and
    codes = e4m3(w / scale_inv). -> (codes uint8 [out, in], scale_inv float32 [ceil(out/B), ceil(in/B)])."""
    out, inp = w.shape
    rb, cb = -(-out // block), -(-inp // block)
    scale = np.zeros((rb, cb), np.float32)
    codes = np.zeros(w.shape, np.uint8)
    for i in range(rb):
        for j in range(cb):
            tile = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            s = np.float32(np.abs(tile).max() / E4M3_MAX) or np.float32(1.0)
            scale[i, j] = s
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = e4m3_encode(tile / s)
    return codes, scale


def quantize_int4(w: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """compressed-tensors symmetric int4, strategy group: scale = absmax / 7.5 per (row, group), rounded to bf16 (as
    stored); q = clip(round-half-even(w / scale), -8, 7); q + 8 packed 8 per int32, column c in bits 4·(c % 8) of
    word c // 8. -> (weight_packed int32 [out, in/8], weight_scale float32 [out, in/group] holding bf16 values)."""
    out, inp = w.shape
    g = w.reshape(out, inp // group, group)
    scale = safetensors_np.round_bf16(np.abs(g).max(-1) / 7.5)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(g / scale[..., None]), -8, 7).astype(np.int64).reshape(out, inp)
    nib = (q + 8).reshape(out, inp // 8, 8)
    words = np.zeros((out, inp // 8), np.uint64)
    for i in range(8):
        words |= nib[..., i].astype(np.uint64) << np.uint64(4 * i)
    return words.astype(np.uint32).view(np.int32), scale


def store_quantized(name: str, tensors: dict, dtypes: dict) -> tuple[dict, dict]:
    """The variant's checkpoint tensors: its quantized Linears replaced by their stored form."""
    if name not in QUANTIZED:
        return tensors, dtypes
    fmt, which = QUANTIZED[name]
    t, d = {}, {}
    for k, v in tensors.items():
        if not which.search(k):
            t[k], d[k] = v, dtypes[k]
            continue
        module = k[:-len(".weight")]
        if fmt == "fp8":
            t[k], t[module + ".weight_scale_inv"] = quantize_fp8(v, FP8_BLOCK)
            d[k], d[module + ".weight_scale_inv"] = "F8_E4M3", "F32"
        else:
            t[module + ".weight_packed"], t[module + ".weight_scale"] = quantize_int4(v, INT4_GROUP)
            t[module + ".weight_shape"] = np.array(v.shape, np.int32)
            for suffix, dt in ((".weight_packed", "I32"), (".weight_scale", "BF16"), (".weight_shape", "I32")):
                d[module + suffix] = dt
    return t, d


def margins(logits):
    s = np.sort(logits, axis=-1)
    return s[:, -1] - s[:, -2]


def input_ids() -> np.ndarray:
    rng = np.random.default_rng(INPUT_SEED)
    return np.concatenate([[1], rng.integers(3, 381, size=SEQ_LEN - 1)]).astype(np.int64)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_model(vdir, cfg, tensors, dtypes, tiny):
    if os.path.isdir(vdir):
        shutil.rmtree(vdir)
    os.makedirs(vdir)
    write_json(os.path.join(vdir, "config.json"), cfg)
    write_json(os.path.join(vdir, "generation_config.json"), {"bos_token_id": 1, "eos_token_id": [2, 382]})
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tiny, "llama_fp32", f), os.path.join(vdir, f))
    safetensors_np.save(os.path.join(vdir, "model.safetensors"), tensors, dtypes, {"format": "pt"})


def wrap_k25(cfg: dict, tensors: dict, dtypes: dict, rng) -> tuple[dict, dict, dict]:
    """Kimi-K2.5's layout (vLLM KimiK25Config): the text model in text_config, tensors under language_model., plus a
    vision tower and projector eaglet must declare unused."""
    top = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
           "text_config": dict(cfg, model_type="kimi_k2"), "vision_config": {"model_type": "moonvit", "hidden_size": 32},
           "media_placeholder_token_id": 383, "torch_dtype": "bfloat16"}
    t = {"language_model." + k: v for k, v in tensors.items()}
    d = {"language_model." + k: v for k, v in dtypes.items()}
    for n, shape in (("vision_tower.patch_embed.proj.weight", (32, 3, 2, 2)), ("vision_tower.blocks.0.norm0.weight", (32,)),
                     ("mm_projector.proj.0.weight", (64, 32)), ("mm_projector.proj.2.weight", (64, 64))):
        t[n] = safetensors_np.round_bf16((rng.standard_normal(shape) * 0.1).astype(np.float32))
        d[n] = "BF16"
    return top, t, d


def stored_variant(name, cfg, seed) -> tuple[dict, dict, dict]:
    """(config.json, tensors, dtypes) of a variant as written: quantized, and in Kimi-K2.5's layout where it says."""
    t, d = store_quantized(name, *make_weights(cfg, seed))
    if name in K25_WRAPPED:
        return wrap_k25(cfg, t, d, np.random.default_rng(25))
    return cfg, t, d


def make_variant(name, out, ids, dr, tiny) -> dict:
    base_seed = SEED_START.get(name, zlib.crc32(name.encode()) % 100000)
    best = None
    for attempt in range(MAX_SEED_TRIES):
        cfg, t, d = stored_variant(name, make_config(name), base_seed + attempt)
        m = dr.Model(cfg, t, d, "fp32")
        logits, hidden, routing = m.forward(ids, record_routing=True)
        logits = logits.numpy()
        gap = min(g for _, _, g in routing)
        score = min(margins(logits).min() / MIN_MARGIN, gap / MIN_ROUTING_GAP)
        if best is None or score > best[0]:
            best = (score, base_seed + attempt, t, d, logits, hidden.numpy(), routing)
        if score >= 1.0:
            break
    score, seed, t, d, logits, hidden, routing = best
    vdir = os.path.join(out, name)
    write_model(vdir, cfg, t, d, tiny)
    m32 = dr.Model.from_dir(vdir, "fp32")
    l32, h32 = dr.forward(m32, ids)
    assert np.array_equal(l32, logits), "reference from files differs from in-memory model"
    lhf, _ = dr.forward(dr.Model.from_dir(vdir, "hf"), ids)
    ref = {"input_ids": ids, "logits": l32, "hidden_states": h32, "logits_hf": lhf}
    dtypes = {"input_ids": "I64", "logits": "F32", "hidden_states": "F32", "logits_hf": "F32"}
    if name in QUANTIZED and QUANTIZED[name][0] == "int4":
        ref["logits_int8_activations"], _ = dr.forward(dr.Model.from_dir(vdir, "fp32_a8"), ids)
        dtypes["logits_int8_activations"] = "F32"
    if name in QUANTIZED and QUANTIZED[name][0] == "fp8":
        ref["logits_bf16_activations"], _ = dr.forward(dr.Model.from_dir(vdir, "fp32_abf16"), ids)
        dtypes["logits_bf16_activations"] = "F32"
    safetensors_np.save(os.path.join(out, "reference", f"{name}.safetensors"), ref, dtypes,
                        {"variant": name, "compute": "fp32 + hf"})
    return {"model_type": cfg["model_type"], "quantized": QUANTIZED[name][0] if name in QUANTIZED else None,
            "seed": seed, "seed_tries": attempt + 1,
            "margin_fp32_min": float(margins(l32).min()), "routing_gap_min": float(min(g for _, _, g in routing)),
            "experts_used": {str(i): sorted(set(int(e) for e in idx.flatten())) for i, idx, _ in routing},
            "hf_vs_fp32_max_abs": float(np.abs(lhf - l32).max()),
            "hf_vs_fp32_argmax_agreement": float(np.mean(lhf.argmax(-1) == l32.argmax(-1))),
            "reference": f"reference/{name}.safetensors"}


def make_wrapped(out, ids, dr, tiny) -> dict:
    src = os.path.join(out, "kimi_k2_bf16")
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    tt = safetensors_np.load(os.path.join(src, "model.safetensors"), upcast_bf16=True)
    top, t, d = wrap_k25(cfg, dict(tt), dict(tt.dtypes), np.random.default_rng(25))
    vdir = os.path.join(out, WRAPPED)
    write_model(vdir, top, t, d, tiny)
    l32, h32 = dr.forward(dr.Model.from_dir(vdir, "fp32"), ids)
    ref = st_load(os.path.join(out, "reference", "kimi_k2_bf16.safetensors"))
    assert np.array_equal(l32, ref["logits"]), "the K2.5 wrapper must compute exactly the wrapped Kimi-K2"
    shutil.copy(os.path.join(out, "reference", "kimi_k2_bf16.safetensors"),
                os.path.join(out, "reference", f"{WRAPPED}.safetensors"))
    return {"model_type": "kimi_k25", "wraps": "kimi_k2_bf16", "reference": f"reference/{WRAPPED}.safetensors"}


def st_load(path):
    return safetensors_np.load(path)


def make_echo_pair(out, dr, tiny) -> dict:
    """A Kimi-style bigram target and the SpecForge-layout drafter that reproduces it (make_tiny_drafters.py's exact
    construction, on a DeepSeek target): embeddings live in dims 0..31, lm_head makes f(x) the argmax of
    lm_head(norm(embed(x))); o_proj / every down_proj carry small noise so the target strays from f now and then."""
    import make_tiny_drafters as mtd  # noqa: E402
    cfg = make_config("kimi_k2_bf16")
    cfg["torch_dtype"] = "float32"
    rng = np.random.default_rng(4747)
    t, _ = make_weights(cfg, 4747)
    V, Hd = cfg["vocab_size"], cfg["hidden_size"]
    E = np.zeros((V, Hd), np.float32)
    for s in range(2):
        v = rng.standard_normal((V, 16))
        E[:, 16 * s:16 * (s + 1)] = 2.0 * v / np.linalg.norm(v, axis=1, keepdims=True)
    w = (1.0 + 0.1 * rng.standard_normal(Hd)).astype(np.float32)
    f = mtd._cycle_map(rng, np.arange(3, 381), V, [0, 1, 2, 381, 382, 383])
    n = mtd._normed(E, w, cfg["rms_norm_eps"])
    W = np.zeros((V, Hd), np.float32)
    for x in range(V):
        W[f[x]] += 0.15 * n[x]
    t["model.embed_tokens.weight"], t["model.norm.weight"], t["lm_head.weight"] = E, w, W
    for k in list(t):
        if k.endswith("o_proj.weight") or k.endswith("down_proj.weight"):
            t[k] = (rng.standard_normal(t[k].shape) * ECHO_GAIN / math.sqrt(t[k].shape[1])).astype(np.float32)
    tdir = os.path.join(out, ECHO)
    write_model(tdir, cfg, t, {k: "F32" for k in t}, tiny)
    target = dr.Model.from_dir(tdir, "fp32")
    seqs = np.random.default_rng(7).integers(3, 381, size=(4, 16))
    agree = float(np.mean([np.mean(target.forward(s)[0].numpy().argmax(-1) == f[s]) for s in seqs]))
    dcfg, dt, _ = mtd.build_exact_drafter("exact_echo_eagle", {"echo_fp32": (cfg, t)})
    dcfg["architectures"] = ["LlamaForCausalLMEagle3"]
    dcfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [0, 1, 2], "use_aux_hidden_state": True}
    mtd.save_drafter(os.path.join(out, DRAFTER), dcfg, dt)
    return {"target": ECHO, "bigram_agreement": agree, "drafter": DRAFTER, "layout": "specforge",
            "aux_ids_sglang": [0, 1, 2], "aux_layers_input_convention": [1, 2, 3]}


SCRIPTS = ("make_tiny_deepseek.py", "deepseek_reference.py", "safetensors_np.py", "make_tiny_drafters.py")


def script_hash() -> str:
    h = hashlib.sha256()
    for f in SCRIPTS:
        with open(os.path.join(HERE, f), "rb") as fh:
            h.update(f.encode() + b"\0" + fh.read() + b"\0")
    return h.hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny", required=True, help="make_tiny_models.py output (tokenizer files)")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    digest = script_hash()
    man_path = os.path.join(out, "MANIFEST.json")
    if not args.force and os.path.isfile(man_path):
        with open(man_path) as f:
            man = json.load(f)
        if man.get("generator_hash") == digest:
            print(f"{out}: up to date (generator {digest[:12]}), nothing to do")
            return 0
    import torch  # noqa: E402
    torch.set_num_threads(1)
    import deepseek_reference as dr  # noqa: E402
    os.makedirs(os.path.join(out, "reference"), exist_ok=True)
    if os.path.exists(man_path):
        os.remove(man_path)
    ids = input_ids()
    man = {"generator": "tests/oracle/make_tiny_deepseek.py", "generator_version": GENERATOR_VERSION,
           "generator_hash": digest, "input_ids": [int(i) for i in ids], "variants": {}}
    for name in VARIANTS:
        man["variants"][name] = make_variant(name, out, ids, dr, args.tiny)
        v = man["variants"][name]
        print(f"{name:26} seed {v['seed']:6} tries {v['seed_tries']:3} margin {v['margin_fp32_min']:.3f} "
              f"routing gap {v['routing_gap_min']:.2e} hf-fp32 {v['hf_vs_fp32_max_abs']:.3f} "
              f"argmax agree {v['hf_vs_fp32_argmax_agreement']:.3f}")
    man["variants"][WRAPPED] = make_wrapped(out, ids, dr, args.tiny)
    man["echo_pair"] = make_echo_pair(out, dr, args.tiny)
    print(f"{ECHO}: bigram agreement {man['echo_pair']['bigram_agreement']:.3f}")
    write_json(man_path, man)
    return 0


if __name__ == "__main__":
    sys.exit(main())
