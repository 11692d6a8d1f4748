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
       "experts, norm_topk_prob, routed_scaling_factor, softmax router, kv_a_layernorm")
def _():
    cases = {
        "bias_in_weights": mtd.VARIANTS, "no_bias": mtd.VARIANTS, "half_split_rope": mtd.VARIANTS,
        "no_shared": mtd.VARIANTS, "no_norm_topk": mtd.VARIANTS, "no_scaling_factor": mtd.VARIANTS,
        "softmax_router": mtd.VARIANTS, "no_kv_norm": mtd.VARIANTS,
        "no_groups": ["deepseek_v3_bf16", "deepseek_v3_noqlora_bf16"],
        "no_mscale": ["deepseek_v3_bf16", "kimi_k2_bf16"], "no_yarn": ["deepseek_v3_bf16", "kimi_k2_bf16"],
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
