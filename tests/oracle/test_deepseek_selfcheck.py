#!/usr/bin/python3
"""Checks of the DeepSeek-V3 / Kimi oracle itself (no eaglet code involved).

    test_deepseek_selfcheck.py --fixtures DIR      (DIR = make_tiny_deepseek.py's output)

Prints one line per check and "N passed, M failed"."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import deepseek_reference as dr  # noqa: E402
import make_tiny_deepseek as mtd  # noqa: E402
import safetensors_np as st  # noqa: E402
from selfcheck import Checks  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
FIX = ""
MAN: dict = {}
MUTATION_TOL = 0.05


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def ref(v):
    return st.load(os.path.join(FIX, "reference", f"{v}.safetensors"))


def model(v, compute="fp32"):
    return dr.Model.from_dir(os.path.join(FIX, v), compute)


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


@check("references recompute from the files; incremental (KV cache, token by token and in chunks) == full forward")
def _():
    for v in mtd.VARIANTS:
        r, m = ref(v), model(v)
        full, _ = dr.forward(m, r["input_ids"])
        expect(np.array_equal(full, r["logits"]), f"{v}: forward() != stored reference")
        for chunks in (None, [5, 1, 7, 11]):
            d = maxdiff(dr.forward_incremental(m, r["input_ids"], chunks), full)
            expect(d < 1e-4, f"{v} chunks {chunks}: {d}")


@check("kimi_k25 wrapper (text_config, language_model., vision tensors unused) computes exactly kimi_k2")
def _():
    a, _ = dr.forward(model(mtd.WRAPPED), ref("kimi_k2_bf16")["input_ids"])
    expect(np.array_equal(a, ref("kimi_k2_bf16")["logits"]), "wrapper differs")
    t = st.load_model_dir(os.path.join(FIX, mtd.WRAPPED))
    expect(any(n.startswith("vision_tower.") for n in t) and any(n.startswith("mm_projector.") for n in t),
           "the wrapper must carry vision tensors")
    with open(os.path.join(FIX, mtd.WRAPPED, "config.json")) as f:
        cfg = json.load(f)
    t2 = dict(t)
    t2["language_model.model.layers.9.extra.weight"] = np.zeros(2, np.float32)
    try:
        dr.Model(cfg, t2, t.dtypes)
        raise AssertionError("an unknown tensor was accepted")
    except ValueError as e:
        expect("unexpected" in str(e), str(e))


@check("MTP layer tensors exist in deepseek_v3_bf16 and are ignored only when num_nextn_predict_layers says so")
def _():
    t = st.load_model_dir(os.path.join(FIX, "deepseek_v3_bf16"))
    expect("model.layers.4.eh_proj.weight" in t, "no MTP tensors")
    with open(os.path.join(FIX, "deepseek_v3_bf16", "config.json")) as f:
        cfg = json.load(f)
    try:
        dr.Model(dict(cfg, num_nextn_predict_layers=0), t, t.dtypes)
        raise AssertionError("MTP tensors accepted without num_nextn_predict_layers")
    except ValueError:
        pass


@check("yarn worked values (target-architectures.md §4.4): V3 range 10..23, Kimi 19..20, softmax scales")
def _():
    def cfg(**kw):
        base = dict(model_type="deepseek_v3", vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                    num_attention_heads=128)
        base.update(kw)
        return dr.Config(base)

    v3 = cfg(rope_scaling=dict(type="yarn", factor=40, beta_fast=32, beta_slow=1, mscale=1, mscale_all_dim=1,
                               original_max_position_embeddings=4096), max_position_embeddings=163840)
    inv, af = dr.yarn_inv_freq(v3)
    plain = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
    expect(af == 1.0, f"attention factor {af}")
    expect(torch.equal(inv[:10], plain[:10]), "dims below the range keep their frequency")
    expect(torch.allclose(inv[23:], plain[23:] / 40, rtol=1e-6), "dims above the range are interpolated")
    expect(not torch.allclose(inv[11:22], plain[11:22]) and not torch.allclose(inv[11:22], plain[11:22] / 40), "ramp")
    expect(abs(v3.scaling - 0.135234) < 1e-6, f"V3 scaling {v3.scaling}")
    kimi = cfg(rope_theta=50000.0, rope_scaling=dict(type="yarn", factor=32, beta_fast=1, beta_slow=1, mscale=1,
                                                     mscale_all_dim=1, original_max_position_embeddings=4096))
    inv, _ = dr.yarn_inv_freq(kimi)
    plain = 1.0 / (50000 ** (torch.arange(0, 64, 2).float() / 64))
    expect(torch.equal(inv[:20], plain[:20]) and torch.allclose(inv[20:], plain[20:] / 32, rtol=1e-6), "kimi bands")
    expect(abs(kimi.scaling - 0.130861) < 1e-6, f"Kimi scaling {kimi.scaling}")


@check("router by hand: the bias chooses, the unbiased scores weigh; groups by top-2 sums; masked experts get 0.0")
def _():
    m = model("deepseek_v3_bf16")
    L = dict(m.layers[1])
    E = m.c.n_routed_experts  # 8 experts, 4 groups of 2, topk_group 2, top-2
    L["router"] = torch.eye(E, m.c.hidden_size) * 10
    logits = torch.tensor([0.0, 0.1, 2.0, -2.0, 0.5, 0.4, -1.0, -1.5])
    x = torch.zeros(1, m.c.hidden_size)
    x[0, :E] = logits / 10
    L["bias"] = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0])
    idx, w = m._router(L, x)
    s = logits.sigmoid()
    # group sums: g0 = s0+s1, g1 = s2+s3, g2 = s4+s5, g3 = s6+3+s7 -> groups 3 and (g0 or g2 or g1)
    c = s + L["bias"]
    g = torch.stack([c[0] + c[1], c[2] + c[3], c[4] + c[5], c[6] + c[7]])
    keep = set(g.topk(2)[1].tolist())
    cand = [e for e in range(E) if e // 2 in keep]
    want = sorted(sorted(cand, key=lambda e: -float(c[e]))[:2])
    expect(sorted(idx[0].tolist()) == want, f"chosen {idx[0].tolist()}, expected {want}")
    ws = s[want] / s[want].sum() * m.c.routed_scaling_factor
    got = dict(zip(idx[0].tolist(), w[0].tolist()))
    expect(all(abs(got[e] - float(ws[i])) < 1e-6 for i, e in enumerate(want)), f"weights {got} vs {ws}")


def _mutated(v, name):
    dr.MUTATIONS[name] = True
    try:
        return dr.forward(model(v), ref(v)["input_ids"])[0]
    finally:
        dr.MUTATIONS[name] = False


@check("mutations move the logits: bias in the weights, no bias, no groups, rope layout, mscale, yarn, shared "
       "experts, norm_topk_prob, routed_scaling_factor, softmax router, kv_a_layernorm; FP8 scale per row block or "
       "divided, INT4 nibbles reversed, no offset 8, scale per row")
def _():
    cases = {
        "bias_in_weights": mtd.VARIANTS, "no_bias": mtd.VARIANTS, "half_split_rope": mtd.VARIANTS,
        "no_shared": mtd.VARIANTS, "no_norm_topk": mtd.VARIANTS, "no_scaling_factor": mtd.VARIANTS,
        "softmax_router": mtd.VARIANTS, "no_kv_norm": mtd.VARIANTS,
        "no_groups": ["deepseek_v3_bf16", "deepseek_v3_noqlora_bf16"],
        "no_mscale": ["deepseek_v3_bf16", "kimi_k2_bf16"], "no_yarn": ["deepseek_v3_bf16", "kimi_k2_bf16"],
        # decoding of the stored quantized weights
        "fp8_scale_per_row": ["deepseek_v3_fp8"], "fp8_scale_divided": ["deepseek_v3_fp8"],
        "int4_nibbles_reversed": ["kimi_k25_int4"], "int4_no_offset": ["kimi_k25_int4"],
        "int4_scale_per_row": ["kimi_k25_int4"],
    }
    for name, variants in cases.items():
        for v in variants:
            d = maxdiff(_mutated(v, name), ref(v)["logits"])
            expect(d > MUTATION_TOL, f"{v}: mutation {name} moves the logits by only {d:.3g}")


@check("absorbed MLA (what eaglet computes) equals the naive form up to fp32 rounding")
def _():
    m = model("kimi_k2_bf16")
    c = m.c
    L = m.layers[0]
    ids = ref("kimi_k2_bf16")["input_ids"][:9]
    x = m._rms_norm(m.embed[torch.as_tensor(ids)], L["in_norm"], c.rms_norm_eps)
    pos = torch.arange(len(ids))
    naive = m._attention(L, x, pos, None)
    H, R, nope, vd, rope = c.num_attention_heads, c.kv_lora_rank, c.qk_nope_head_dim, c.v_head_dim, c.qk_rope_head_dim
    S = len(ids)
    q = m._linear(m._rms_norm(m._linear(x, L["q_a"]), L["q_a_norm"], 1e-6), L["q_b"]).view(S, H, -1).transpose(0, 1)
    ckv = m._linear(x, L["kv_a"])
    lat = m._rms_norm(ckv[:, :R], L["kv_a_norm"], 1e-6)
    k_rot = m._rope(ckv[:, R:].view(1, S, rope), pos)[0]
    q_rot = m._rope(q[..., nope:], pos)
    wkv = L["kv_b"].view(H, nope + vd, R)
    q_abs = torch.einsum("hsd,hdc->hsc", q[..., :nope], wkv[:, :nope])
    scores = (q_abs @ lat.T + q_rot @ k_rot.T) * c.scaling
    scores = scores.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1)[None], float("-inf"))
    o = torch.einsum("hsc,hdc->hsd", torch.softmax(scores, -1) @ lat, wkv[:, nope:])
    absorbed = m._linear(o.transpose(0, 1).reshape(S, H * vd), L["o"])
    expect(maxdiff(absorbed, naive) < 1e-5, f"absorbed vs naive {maxdiff(absorbed, naive)}")


@check("float8_e4m3fn: the oracle's decoder on the format's anchor values; the generator's encoder rounds to nearest "
       "even and saturates; every finite code round-trips")
def _():
    dec = dr.decode_e4m3
    anchors = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6, 0x38: 1.0, 0x39: 1.125, 0x40: 2.0,
               0x7E: 448.0, 0xB8: -1.0, 0xFE: -448.0, 0x80: -0.0}
    for code, want in anchors.items():
        got = float(dec(np.array([code], np.uint8))[0])
        expect(got == want and math.copysign(1, got) == math.copysign(1, want), f"0x{code:02X}: {got} != {want}")
    expect(np.isnan(dec(np.array([0x7F, 0xFF], np.uint8))).all(), "0x7F / 0xFF must be NaN")
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    expect(np.array_equal(mtd.e4m3_encode(dec(codes)), codes), "finite codes do not round-trip")
    enc = mtd.e4m3_encode(np.array([1.0625, 1.1875, 1.0626, 500.0, -1e9, 2.0 ** -10, 3 * 2.0 ** -10, float("nan")]))
    # ties: 1.0625 between 1.0 (0x38, even) and 1.125 -> 0x38; 1.1875 between 1.125 and 1.25 (0x3A, even) -> 0x3A
    want = [0x38, 0x3A, 0x39, 0x7E, 0xFE, 0x00, 0x02, 0x7F]
    expect(enc.tolist() == want, f"encoder {[hex(v) for v in enc]} != {[hex(v) for v in want]}")


def _stored(v):
    return st.load_model_dir(os.path.join(FIX, v))


def _generating_weights(v):
    """The float weights the variant was quantized from (its seed in MANIFEST.json), at their stored names."""
    cfg = mtd.make_config(v)
    t, _ = mtd.make_weights(cfg, MAN["variants"][v]["seed"])
    p = "language_model." if v in mtd.K25_WRAPPED else ""
    return {p + k: a for k, a in t.items()}, p


@check("quantized variants are stored as released and decode to their weights within the format's step: FP8 "
       "|w - ŵ| <= 2^-4·block absmax, INT4 |w - ŵ| <= scale/2 per group")
def _():
    t = _stored("deepseek_v3_fp8")
    w, _ = _generating_weights("deepseek_v3_fp8")
    B = mtd.FP8_BLOCK
    fp8 = [n for n, d in t.dtypes.items() if d == "F8_E4M3"]
    # 4 layers + the MTP one: 5 attention projections each, the dense MLP's 3, 4 MoE MLPs of 8 experts + 1 shared
    expect(len(fp8) == 5 * 5 + 3 + 4 * 3 * (8 + 1), f"{len(fp8)} F8_E4M3 tensors")
    for n in ("lm_head.weight", "model.embed_tokens.weight", "model.layers.1.mlp.gate.weight", "model.norm.weight"):
        expect(t.dtypes[n] == "BF16", f"{n}: {t.dtypes[n]}")
    expect(t.dtypes["model.layers.1.mlp.gate.e_score_correction_bias"] == "F32", "bias dtype")
    partial_rows = partial_cols = 0
    for n in fp8:
        m = n[:-len(".weight")]
        out, inp = t[n].shape
        expect(t[m + ".weight_scale_inv"].shape == (-(-out // B), -(-inp // B)) and
               t.dtypes[m + ".weight_scale_inv"] == "F32", f"{m}.weight_scale_inv")
        partial_rows += out % B != 0
        partial_cols += inp % B != 0
        deq = dr.dequantize_linear(t, t.dtypes, m, (out, inp), dr.Quantization({"quantization_config":
                                                                                 mtd.FP8_CONFIG}, {}), set())
        amax = np.abs(w[n]).reshape(out, inp)
        blockmax = np.maximum.reduceat(np.maximum.reduceat(amax, np.arange(0, out, B), 0), np.arange(0, inp, B), 1)
        bound = blockmax[np.arange(out) // B][:, np.arange(inp) // B] * 2.0 ** -4
        expect((np.abs(deq - w[n]) <= bound + 1e-12).all(), f"{n}: decoded weight off by more than an fp8 step")
    expect(partial_rows > 0 and partial_cols > 0, f"partial blocks: rows {partial_rows}, cols {partial_cols}")

    t = _stored("kimi_k25_int4")
    w, p = _generating_weights("kimi_k25_int4")
    packed = [n for n in t if n.endswith(".weight_packed")]
    cfg = mtd.make_config("kimi_k25_int4")
    expect(len(packed) == 3 * cfg["n_routed_experts"] * (cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]),
           f"{len(packed)} packed tensors")
    q = dr.Quantization({}, {"quantization_config": mtd.INT4_CONFIG})
    for n in packed:
        m = n[:-len("_packed")]
        expect(t.dtypes[n] == "I32" and t.dtypes[m + "_scale"] == "BF16" and t.dtypes[m + "_shape"] == "I32", n)
        out, inp = (int(v) for v in t[m + "_shape"])
        deq = dr.dequantize_linear(t, t.dtypes, m[:-len(".weight")], (out, inp), q, set())
        scale = np.repeat(t[m + "_scale"], mtd.INT4_GROUP, axis=1)
        # the scale is rounded to bf16 before the codes are taken: the extreme group value may clip by 7.5·2^-8 more
        bound = scale * (0.5 + 7.5 * 2.0 ** -8 + 1e-6)
        expect((np.abs(deq - w[m]) <= bound).all(), f"{n}: decoded weight off by more than scale/2")
    for n in (p + "lm_head.weight", p + "model.layers.1.self_attn.kv_b_proj.weight",
              p + "model.layers.1.mlp.shared_experts.down_proj.weight", p + "model.layers.0.mlp.up_proj.weight"):
        expect(t.dtypes[n] == "BF16", f"{n}: {t.dtypes[n]}")


@check("fp32_a8 (int4 Linears meet int8 activation blocks): recomputes the stored logits_int8_activations, moves "
       "the logits (but not the argmax) from fp32; activation quantization by hand")
def _():
    r = ref("kimi_k25_int4")
    a8, _ = dr.forward(model("kimi_k25_int4", "fp32_a8"), r["input_ids"])
    expect(np.array_equal(a8, r["logits_int8_activations"]), "fp32_a8 != stored logits_int8_activations")
    d = maxdiff(a8, r["logits"])
    expect(d > 1e-2, f"int8 activations move the logits by only {d:.3g}")
    expect(np.array_equal(a8.argmax(-1), r["logits"].argmax(-1)), "argmax moved")
    x = torch.tensor([[127.0, 0.5, 1.5, -2.5, 0.2] + [0.0] * 27 + [0.0] * 32 + [2.0]])
    q = dr.quantize_activations(x)  # blocks: absmax 127 (step 1, ties to even), all zero, a partial block [2.0]
    want = torch.tensor([[127.0, 0.0, 2.0, -2.0, 0.0] + [0.0] * 59 + [2.0]])
    expect(torch.allclose(q, want, rtol=0, atol=1e-6), f"{q[0, :5]} {q[0, -1]}")


@check("the oracle refuses quantized tensors it cannot read as declared: F8_E4M3 without weight_scale_inv or without "
       "an fp8 quantization_config, int4 with a weight_zero_point")
def _():
    with open(os.path.join(FIX, "deepseek_v3_fp8", "config.json")) as f:
        cfg = json.load(f)
    t = _stored("deepseek_v3_fp8")
    cases = [(cfg, {k: a for k, a in t.items() if k != "model.layers.2.self_attn.o_proj.weight_scale_inv"}),
             ({k: a for k, a in cfg.items() if k != "quantization_config"}, t)]
    with open(os.path.join(FIX, "kimi_k25_int4", "config.json")) as f:
        kcfg = json.load(f)
    k = _stored("kimi_k25_int4")
    zp = dict(k)
    zp["language_model.model.layers.1.mlp.experts.0.up_proj.weight_zero_point"] = np.zeros((32, 2), np.int32)
    cases.append((kcfg, zp))
    for i, (c, tensors) in enumerate(cases):
        try:
            dr.Model(c, tensors, t.dtypes if i < 2 else k.dtypes)
            raise AssertionError(f"case {i} was accepted")
        except (KeyError, ValueError):
            pass


@check("echo pair: the SpecForge drafter config (LlamaForCausalLMEagle3, midlayer.*, eagle_config [0, 1, 2])")
def _():
    ddir = os.path.join(FIX, mtd.DRAFTER)
    with open(os.path.join(ddir, "config.json")) as f:
        cfg = json.load(f)
    expect(cfg["architectures"] == ["LlamaForCausalLMEagle3"], cfg["architectures"])
    expect(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2], "aux ids")
    t = st.load(os.path.join(ddir, "model.safetensors"))
    expect(any(n.startswith("midlayer.") for n in t), "midlayer names")
    agree = MAN["echo_pair"]["bigram_agreement"]
    expect(0.3 < agree < 0.95, f"the near-echo target should follow its bigram map partly, not {agree}")


def main(argv=None) -> int:
    global FIX, MAN
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args(argv)
    FIX = os.path.abspath(args.fixtures)
    with open(os.path.join(FIX, "MANIFEST.json")) as f:
        MAN = json.load(f)
    torch.set_num_threads(1)
    return 1 if CHECKS.run_all() else 0


if __name__ == "__main__":
    sys.exit(main())
