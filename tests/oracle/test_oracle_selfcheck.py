#!/usr/bin/python3
"""Sanity checks of the PyTorch oracle itself (no eaglet code involved).

    test_oracle_selfcheck.py [--fixtures DIR]

DIR is the output of make_tiny_models.py (default $EAGLET_FIXTURES/tiny); if it has no MANIFEST.json the fixtures
are generated into a temporary directory first. Prints one line per check and "N passed, M failed"; exits 1 on
any failure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_reference as hf  # noqa: E402
import make_tiny_models as mtm  # noqa: E402
import safetensors_np as st  # noqa: E402
from selfcheck import Checks  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
FIX = ""
MAN: dict = {}



def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def vdir(v):
    return os.path.join(FIX, v)


def ref(v):
    return st.load(os.path.join(FIX, "reference", f"{v}.safetensors"))


def model(v, compute="fp32", **cfg_overrides):
    with open(os.path.join(vdir(v), "config.json")) as f:
        cfg = json.load(f)
    cfg.update(cfg_overrides)
    t = st.load_model_dir(vdir(v))
    return hf.Model(cfg, t, t.dtypes, compute)


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


# ---------------------------------------------------------------------------------------------------------------
# (a) KV-cache incremental forward == full forward


@check("incremental (KV cache, 1 token at a time and in chunks) == full forward, fp32, all variants")
def _():
    for v in MAN["variants"]:
        r = ref(v)
        m = model(v)
        ids = r["input_ids"]
        full_l, full_h = hf.forward(m, ids)
        expect(np.array_equal(full_l, r["logits"]), f"{v}: forward() != stored reference")
        for chunks in (None, [5, 1, 7, 11]):
            inc_l, inc_h = hf.forward_incremental(m, ids, chunks=chunks)
            d = maxdiff(inc_l, full_l)
            dh = maxdiff(inc_h, full_h)
            expect(d < 1e-4 and dh < 1e-4, f"{v} chunks={chunks}: logits diff {d:.3g}, hidden diff {dh:.3g}")
            expect(np.array_equal(inc_l.argmax(-1), full_l.argmax(-1)), f"{v}: argmax differs")


@check("incremental == full forward, compute=hf, bf16 variants (bf16 rounding tolerance)")
def _():
    for v, info in MAN["variants"].items():
        if info["dtype"] != "BF16":
            continue
        r = ref(v)
        m = model(v, "hf")
        inc_l, _ = hf.forward_incremental(m, r["input_ids"])
        d = maxdiff(inc_l, r["logits_hf"])
        expect(d <= 0.25, f"{v}: incremental hf logits differ by {d}")
        agree = np.mean(inc_l.argmax(-1) == r["logits_hf"].argmax(-1))
        expect(agree == 1.0, f"{v}: argmax agreement {agree}")


# ---------------------------------------------------------------------------------------------------------------
# (b) llama3 inv_freq


@check("llama3 inv_freq: hand-computed value in each band (high, medium, low), float64 formula")
def _():
    with open(os.path.join(vdir("llama_fp32"), "config.json")) as f:
        cfg = json.load(f)
    c = hf.Config(cfg)
    got = hf.rope_inv_freq(c).double().numpy()
    theta, D = 500000.0, 16
    rs = cfg["rope_scaling"]
    expect(rs == mtm.LLAMA3_SCALING and c.head_dim == D and c.rope_theta == theta, "unexpected llama_fp32 config")
    # by hand: inv_j = theta^(-2j/D); wavelen = 2*pi/inv_j; bands at 64/4 = 16 and 64/1 = 64.
    inv = [theta ** (-2.0 * j / D) for j in range(D // 2)]
    wl = [2 * math.pi / x for x in inv]
    # j=0: inv 1, wavelen 6.28 < 16 -> high band, unchanged
    expect(wl[0] < 16 and abs(got[0] - 1.0) < 1e-7, f"high band j=0: {got[0]} (wavelen {wl[0]})")
    # j=1: inv = 500000^(-1/8) = 0.1939..., wavelen 32.4 in [16, 64] -> smoothed
    expect(16 <= wl[1] <= 64, f"j=1 wavelen {wl[1]} not medium")
    smooth = (64 / wl[1] - 1.0) / (4.0 - 1.0)
    want1 = (1 - smooth) * inv[1] / 8 + smooth * inv[1]
    expect(abs(inv[1] - 0.19392) < 1e-4, f"500000^(-1/8) = {inv[1]}")
    expect(abs(got[1] - want1) < 1e-6 * want1, f"medium band j=1: {got[1]} vs {want1}")
    expect(abs(got[1] - inv[1]) > 0.01 * inv[1], "medium band frequency not changed")
    # j=2: wavelen 167 > 64 -> low band, inv / factor
    expect(wl[2] > 64 and abs(got[2] - inv[2] / 8) < 1e-6 * inv[2], f"low band j=2: {got[2]} vs {inv[2] / 8}")
    for j in range(3, D // 2):
        expect(abs(got[j] - inv[j] / 8) < 1e-6 * inv[j], f"low band j={j}")
    expect(MAN["variants"]["llama_fp32"]["llama3_bands"] == {"high": [0], "medium": [1], "low": [2, 3, 4, 5, 6, 7]},
           "manifest bands")


@check("llama3 inv_freq at Llama-3.1 settings (D 128, theta 5e5, orig 8192): band edges inclusive, float32 path")
def _():
    cfg = dict(mtm.COMMON, model_type="llama", hidden_size=4096, num_attention_heads=32, head_dim=128,
               rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0,
                                                  "original_max_position_embeddings": 8192})
    got = hf.rope_inv_freq(hf.Config(cfg)).double().numpy()
    inv32 = (1.0 / (np.float32(500000.0) ** (np.arange(0, 128, 2).astype(np.float32) / np.float32(128)))).astype(
        np.float64)
    for j, x in enumerate(inv32):
        wl = 2 * math.pi / x
        if wl < 2048:
            want = x
        elif wl > 8192:
            want = x / 8
        else:
            s = (8192 / wl - 1) / 3
            want = (1 - s) * x / 8 + s * x
        expect(abs(got[j] - want) <= 2e-6 * want, f"j={j}: {got[j]} vs {want}")
    # the legacy `type` key is accepted too
    cfg2 = dict(cfg, rope_scaling=dict(cfg["rope_scaling"]))
    cfg2["rope_scaling"]["type"] = cfg2["rope_scaling"].pop("rope_type")
    expect(torch.equal(hf.rope_inv_freq(hf.Config(cfg2)), hf.rope_inv_freq(hf.Config(cfg))), "legacy `type` key")


# ---------------------------------------------------------------------------------------------------------------
# (c) qwen3 head_dim != hidden/H


@check("qwen3: head_dim 32 with hidden 64 / 4 heads -> HF shapes; q_norm/k_norm over D")
def _():
    for v in ("qwen3_fp32", "qwen3_bf16"):
        t = st.load_model_dir(vdir(v))
        c = hf.Config(json.load(open(os.path.join(vdir(v), "config.json"))))
        expect(c.head_dim == 32 and c.hidden_size == 64 and c.num_heads * c.head_dim == 128, "config")
        shapes = {
            "model.layers.0.self_attn.q_proj.weight": (128, 64), "model.layers.0.self_attn.k_proj.weight": (64, 64),
            "model.layers.0.self_attn.v_proj.weight": (64, 64), "model.layers.0.self_attn.o_proj.weight": (64, 128),
            "model.layers.0.self_attn.q_norm.weight": (32,), "model.layers.0.self_attn.k_norm.weight": (32,),
            "model.embed_tokens.weight": (384, 64),
        }
        for n, s in shapes.items():
            expect(t[n].shape == s, f"{v}: {n} {t[n].shape} != {s}")
        expect("lm_head.weight" not in t, f"{v}: tied model stores lm_head")
        expect(not any(n.endswith(".bias") for n in t), f"{v}: qwen3 has no biases")
        expect(MAN["variants"][v]["qk_norm"] and not MAN["variants"][v]["qkv_bias"], "manifest flags")


# ---------------------------------------------------------------------------------------------------------------
# (d) safetensors


@check("safetensors: bf16 round-to-nearest-even on known values, matches torch on random/special values")
def _():
    known = {
        1.0: 1.0,
        1.0078125: 1.0078125,        # 1 + 2^-7: representable, stays
        1.00390625: 1.0,             # 1 + 2^-8: halfway between 1 and 1+2^-7 -> even (1.0)
        1.01171875: 1.015625,        # 1 + 3*2^-8: halfway between 1+2^-7 (odd) and 1+2^-6 (even) -> up
        float(np.nextafter(np.float32(1.00390625), np.float32(2))): 1.0078125,  # one f32 ulp above the tie -> up
        float(np.nextafter(np.float32(1.01171875), np.float32(0))): 1.0078125,  # one f32 ulp below the tie -> down
        -1.00390625: -1.0,
        3.4e38: float("inf"),        # past the midpoint above the largest bf16 (3.3895e38) -> inf
        3.39e38: 3.3895313892515355e38,  # rounds to the largest finite bf16
        0.0: 0.0,
    }
    for x, want in known.items():
        got = float(st.round_bf16(np.float32(x)))
        expect(got == want, f"bf16({x!r}) = {got!r}, want {want!r}")
    expect(st.f32_to_bf16_bits(np.float32(-0.0)) == 0x8000, "-0.0")
    expect(np.isnan(st.round_bf16(np.float32("nan"))), "nan")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(10000).astype(np.float32) * 10.0 ** rng.integers(-40, 38, 10000),
                        np.array([np.inf, -np.inf, 1e-40, -1e-42, 3.389e38, -3.4e38], np.float32)]).astype(np.float32)
    ours = st.f32_to_bf16_bits(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    expect(np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} values round differently from torch")


@check("safetensors: save/load round trip for F32, BF16, F16, I64, I32, BOOL + metadata + header layout")
def _():
    rng = np.random.default_rng(1)
    tensors = {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "bf16": np.array([1.0, 1.00390625, 1.01171875, -2.5, 65504.0], np.float32),
        "f16": rng.standard_normal(7).astype(np.float16),
        "i64": np.array([0, -1, 2 ** 40], np.int64),
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "bool": np.array([True, False, True]),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
    }
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.safetensors")
        st.save(p, tensors, {"bf16": "BF16"}, {"format": "pt"})
        back = st.load(p)
        expect(back.metadata == {"format": "pt"}, "metadata")
        expect(back.dtypes == {"f32": "F32", "bf16": "BF16", "f16": "F16", "i64": "I64", "i32": "I32",
                               "bool": "BOOL", "scalar": "F32", "empty": "F32"}, f"dtypes {back.dtypes}")
        for n, a in tensors.items():
            want = st.round_bf16(a) if n == "bf16" else a
            expect(back[n].shape == a.shape and np.array_equal(back[n], want), f"{n}: {back[n]} vs {want}")
        expect(list(back["bf16"]) == [1.0, 1.0, 1.015625, -2.5, 65536.0], f"bf16 values {back['bf16']}")
        expect(st.load(p, upcast_bf16=False)["bf16"].dtype == np.uint16, "raw bf16 bits")
        raw = open(p, "rb").read()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        expect((8 + n) % 8 == 0, "header padded to 8 bytes")
        spans = sorted(tuple(v["data_offsets"]) for k, v in header.items() if k != "__metadata__")
        expect(spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
               and spans[-1][1] == len(raw) - 8 - n, "data offsets contiguous and cover the buffer")
        # torch reads the same bytes the same way (BF16 bits)
        bits = np.frombuffer(raw, np.uint16, count=5, offset=8 + n + header["bf16"]["data_offsets"][0])
        tb = torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16).float().numpy()
        expect(np.array_equal(tb, back["bf16"]), "torch bf16 view")


@check("safetensors: sharded checkpoint via model.safetensors.index.json == in-memory weights; legacy inv_freq")
def _():
    d = vdir("llama_sharded_fp32")
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    files = sorted(set(idx["weight_map"].values()))
    expect(files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"], f"files {files}")
    t = st.load_model_dir(d)
    expect(sorted(t) == sorted(idx["weight_map"]), "every indexed tensor loads")
    total = sum(a.nbytes for a in t.values())
    expect(idx["metadata"]["total_size"] == total, f"total_size {idx['metadata']['total_size']} != {total}")
    inv = t["model.layers.3.self_attn.rotary_emb.inv_freq"]
    expect(inv.shape == (8,) and t.dtypes["model.layers.3.self_attn.rotary_emb.inv_freq"] == "F32", "inv_freq")
    cfg = mtm.make_config("llama_sharded_fp32")
    w = mtm.make_weights(cfg, MAN["variants"]["llama_sharded_fp32"]["seed"])
    for n, a in w.items():
        expect(np.array_equal(t[n], a), f"{n} differs from the regenerated weights")


# ---------------------------------------------------------------------------------------------------------------
# (e) masks / sliding windows


@check("sliding window (mistral W=6, 1 layer): token outside the window leaves the last logits bit-identical")
def _():
    m = model("mistral_fp32", num_hidden_layers=1)
    expect(m.cfg.windows == [6], f"windows {m.cfg.windows}")
    ids = ref("mistral_fp32")["input_ids"].copy()
    last = len(ids) - 1
    base, _ = hf.forward(m, ids)
    for pos in (0, 5, last - 6):  # j <= i - W: invisible to query i = last
        alt = ids.copy()
        alt[pos] = 7 if alt[pos] != 7 else 8
        lg, _ = hf.forward(m, alt)
        expect(np.array_equal(lg[last], base[last]), f"changing position {pos} changed the last logits")
    for pos in (last - 5, last - 1):  # inside the window
        alt = ids.copy()
        alt[pos] = 7 if alt[pos] != 7 else 8
        lg, _ = hf.forward(m, alt)
        expect(maxdiff(lg[last], base[last]) > 1e-3, f"changing position {pos} (in window) did nothing")
    # without the window the far token does matter
    mf = model("mistral_fp32", num_hidden_layers=1, sliding_window=None)
    alt = ids.copy()
    alt[0] = 7
    expect(maxdiff(hf.forward(mf, alt)[0][last], hf.forward(mf, ids)[0][last]) > 1e-3, "full attention")


@check("sliding window (mistral, 8 layers): rows < W equal full attention exactly, later rows differ")
def _():
    r = ref("mistral_fp32")
    full, _ = hf.forward(model("mistral_fp32", sliding_window=None), r["input_ids"])
    expect(np.array_equal(full[:6], r["logits"][:6]), "first W rows must not depend on the window")
    expect(maxdiff(full[6:], r["logits"][6:]) > 0.1, "window has no effect")


@check("qwen2/qwen3 layer_types: use_sliding_window false -> no window; true -> layers >= max_window_layers")
def _():
    base = mtm.make_config("qwen2_fp32")
    expect(hf.Config(base).windows == [None] * 8, "qwen2_fp32 must have no window")
    expect(MAN["variants"]["qwen2_fp32"]["sliding_window"] is None, "manifest")
    on = dict(base, use_sliding_window=True, max_window_layers=5)
    expect(hf.Config(on).windows == [None] * 5 + [4] * 3, f"{hf.Config(on).windows}")
    lt = dict(on, layer_types=["sliding_attention", "full_attention"] * 4)
    expect(hf.Config(lt).windows == [4, None] * 4, f"{hf.Config(lt).windows}")
    expect(hf.Config(dict(lt, use_sliding_window=False)).windows == [None] * 8, "layer_types w/o window")
    q3 = mtm.make_config("qwen3_fp32")
    expect(hf.Config(q3).windows == [None] * 8, "qwen3")
    expect(hf.Config(dict(mtm.make_config("llama_fp32"), sliding_window=4)).windows == [None] * 8, "llama")
    # an explicit qwen2 window really changes the outputs, so ignoring use_sliding_window would be detected
    r = ref("qwen2_fp32")
    on_l, _ = hf.forward(model("qwen2_fp32", use_sliding_window=True, max_window_layers=0), r["input_ids"])
    expect(maxdiff(on_l, r["logits"]) > 0.1, "qwen2 window would not be detected")


@check("causal: changing a later token never changes earlier logits (all variants, fp32)")
def _():
    for v in MAN["variants"]:
        m = model(v)
        ids = ref(v)["input_ids"].copy()
        base, _ = hf.forward(m, ids)
        ids[15] = 9 if ids[15] != 9 else 10
        lg, _ = hf.forward(m, ids)
        expect(np.array_equal(lg[:15], base[:15]), f"{v}: future token leaked")
        expect(maxdiff(lg[15:], base[15:]) > 1e-3, f"{v}: token change had no effect")


# ---------------------------------------------------------------------------------------------------------------
# discriminative power of the fixtures: each classic mistake moves the logits well beyond fp32 noise


def _with_patch(attr, fn, thunk):
    old = getattr(hf, attr)
    setattr(hf, attr, fn)
    try:
        return thunk()
    finally:
        setattr(hf, attr, old)


@check("fixtures detect mistakes: GQA h%Hkv, interleaved RoPE, no llama3 scaling, stored inv_freq, no bias, "
       "no q/k norm, post-norm last hidden state")
def _():
    def gqa_mod(x, n_rep):  # wrong: query head h -> kv head h % Hkv
        return x.repeat(n_rep, 1, 1)

    def rot_interleaved(x):  # wrong: pairwise (2j, 2j+1) rotation
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    tol = 0.05
    for v in MAN["variants"]:
        r = ref(v)
        ids = r["input_ids"]
        m = model(v)
        d = maxdiff(_with_patch("repeat_kv", gqa_mod, lambda: hf.forward(m, ids)[0]), r["logits"])
        expect(d > tol, f"{v}: GQA mapping h % Hkv changes logits by only {d}")
        d = maxdiff(_with_patch("rotate_half", rot_interleaved, lambda: hf.forward(m, ids)[0]), r["logits"])
        expect(d > tol, f"{v}: interleaved RoPE changes logits by only {d}")
    for v in ("llama_fp32", "llama_bf16", "llama_sharded_fp32"):
        r = ref(v)
        m = model(v)
        m.inv_freq = hf.rope_inv_freq(hf.Config(dict(mtm.make_config(v), rope_scaling=None)))
        d = maxdiff(hf.forward(m, r["input_ids"])[0], r["logits"])
        expect(d > tol, f"{v}: dropping llama3 scaling changes logits by only {d}")
    t = st.load_model_dir(vdir("llama_sharded_fp32"))
    m = model("llama_sharded_fp32")
    m.inv_freq = torch.from_numpy(t["model.layers.0.self_attn.rotary_emb.inv_freq"])
    d = maxdiff(hf.forward(m, ref("llama_sharded_fp32")["input_ids"])[0], ref("llama_sharded_fp32")["logits"])
    expect(d > tol, f"using the stored legacy inv_freq changes logits by only {d}")
    m = model("qwen2_fp32")
    for L in m.layers:
        for b in ("q_b", "k_b", "v_b"):
            L[b] = torch.zeros_like(L[b])
    d = maxdiff(hf.forward(m, ref("qwen2_fp32")["input_ids"])[0], ref("qwen2_fp32")["logits"])
    expect(d > tol, f"qwen2 without q/k/v bias: {d}")
    for v in ("qwen3_fp32", "qwen3_bf16"):
        m = model(v)
        m.cfg.qk_norm = False
        d = maxdiff(hf.forward(m, ref(v)["input_ids"])[0], ref(v)["logits"])
        expect(d > tol, f"{v} without q_norm/k_norm: {d}")
    r = ref("llama_fp32")
    m = model("llama_fp32")
    post = m._rms_norm(torch.from_numpy(r["hidden_states"][-1]), m.norm).numpy()
    expect(maxdiff(post, r["hidden_states"][-1]) > 0.1, "pre/post final norm indistinguishable")


# ---------------------------------------------------------------------------------------------------------------
# dtype semantics


@check("compute=hf: fp32 checkpoints give exactly the fp32 result; bf16 logits/hidden are bf16 values")
def _():
    for v, info in MAN["variants"].items():
        r = ref(v)
        if info["dtype"] == "F32":
            lg, hs = hf.forward(model(v, "hf"), r["input_ids"])
            expect(np.array_equal(lg, r["logits"]) and np.array_equal(hs, r["hidden_states"]), f"{v}: hf != fp32")
            expect("logits_hf" not in r, f"{v}: unexpected logits_hf")
        else:
            for n in ("logits_hf", "hidden_states_hf"):
                expect(np.array_equal(st.round_bf16(r[n]), r[n]), f"{v}: {n} not bf16-representable")
            d = maxdiff(r["logits_hf"], r["logits"])
            expect(0 < d < 1.0, f"{v}: |hf - fp32| = {d}")


@check("compute=hf RMSNorm: fp32 normalise, cast to bf16, then bf16 weight multiply (HF LlamaRMSNorm)")
def _():
    m = model("llama_bf16", "hf")
    x = torch.tensor([[1.0, 2.0, 3.0, 4.5] * 16], dtype=torch.bfloat16)
    w = torch.full((64,), 1.1, dtype=torch.bfloat16)
    got = m._rms_norm(x, w)
    xf = x.double()
    normed = (xf / torch.sqrt((xf ** 2).mean(-1, keepdim=True) + 1e-5)).float().to(torch.bfloat16)
    want = (normed.float() * w.float()).to(torch.bfloat16)  # one bf16 rounding of the product
    expect(got.dtype == torch.bfloat16 and torch.equal(got, want), f"{got[0, :4]} vs {want[0, :4]}")
    # multiplying in fp32 and rounding once would differ on some element for this input
    once = (xf / torch.sqrt((xf ** 2).mean(-1, keepdim=True) + 1e-5) * w.double()).float().to(torch.bfloat16)
    expect(not torch.equal(once, want), "test input does not distinguish the two orders")


# ---------------------------------------------------------------------------------------------------------------
# files


@check("reference files: names, dtypes, shapes; CLI reproduces the stored reference bit-exactly")
def _():
    for v, info in MAN["variants"].items():
        r = ref(v)
        L, H, V = info["num_hidden_layers"], info["hidden_size"], info["vocab_size"]
        want = {"input_ids": ("I64", (24,)), "logits": ("F32", (24, V)), "hidden_states": ("F32", (L + 1, 24, H))}
        if info["dtype"] == "BF16":
            want.update(logits_hf=("F32", (24, V)), hidden_states_hf=("F32", (L + 1, 24, H)))
        got = {n: (r.dtypes[n], r[n].shape) for n in r}
        expect(got == want, f"{v}: {got}")
        expect(list(r["input_ids"]) == MAN["input_ids"], f"{v}: input_ids")
        expect(np.all(np.isfinite(r["logits"])) and np.all(np.isfinite(r["hidden_states"])), f"{v}: non-finite")
        cfg = json.load(open(os.path.join(vdir(v), "config.json")))
        expect(cfg["vocab_size"] == 384 and cfg["bos_token_id"] == 1 and cfg["eos_token_id"] == 2, f"{v}: config")
    with tempfile.TemporaryDirectory() as d:
        for v, comp, key in (("qwen2_fp32", "fp32", "logits"), ("llama_bf16", "hf", "logits_hf")):
            out = os.path.join(d, "o.safetensors")
            ids = ",".join(str(int(i)) for i in MAN["input_ids"])
            subprocess.run([sys.executable, os.path.join(HERE, "hf_reference.py"), "--model", vdir(v), "--ids", ids,
                            "--out", out, "--compute", comp], check=True)
            o, r = st.load(out), ref(v)
            expect(o.dtypes == {"input_ids": "I64", "logits": "F32", "hidden_states": "F32"}, f"CLI dtypes {o.dtypes}")
            expect(np.array_equal(o["logits"], r[key]), f"{v} CLI {comp} logits differ from reference {key}")


@check("tokenizer.json: byte-level BPE, 384 ids, merges valid, specials, chat template")
def _():
    tok = json.load(open(os.path.join(vdir("llama_fp32"), "tokenizer.json")))
    tc = json.load(open(os.path.join(vdir("llama_fp32"), "tokenizer_config.json")))
    vocab = tok["model"]["vocab"]
    b2u = mtm.bytes_to_unicode()
    expect(all(vocab[b2u[b]] == 3 + b for b in range(256)), "byte tokens at 3 + byte")
    expect(vocab["Ġ"] == 3 + 32 and vocab["Ċ"] == 3 + 10, "space/newline")
    for mg in tok["model"]["merges"]:
        a, b = mg.split(" ")
        expect(a in vocab and b in vocab and a + b in vocab, f"merge {mg}")
    added = {a["id"]: a["content"] for a in tok["added_tokens"]}
    expect(added == dict(mtm.SPECIAL_TOKENS), f"added {added}")
    ids = sorted(list(vocab.values()) + list(added))
    expect(ids == list(range(384)), "ids 0..383")
    expect(tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == mtm.QWEN2_REGEX, "regex")
    expect("<|im_start|>" in tc["chat_template"] and tc["add_bos_token"] and tc["bos_token"] == "<s>", "config")
    for v in MAN["variants"]:
        expect(open(os.path.join(vdir(v), "tokenizer.json")).read()
               == open(os.path.join(vdir("llama_fp32"), "tokenizer.json")).read(), f"{v}: tokenizer differs")


@check("pycode-llama-19m reference (if present): real model predicts well; interleaved RoPE is clearly worse")
def _():
    info = MAN.get("pycode")
    if not info:
        print("    (skipped: no pycode-llama-19m reference)")
        return
    r = st.load(os.path.join(FIX, info["reference"]))
    ids = r["input_ids"]
    expect(list(ids) == mtm.PYCODE_IDS and len(ids) == 40, "ids")
    expect(r["logits"].shape == (40, 8000) and r["hidden_states"].shape == (9, 40, 384), "shapes")

    def nll(lg):
        lp = torch.log_softmax(torch.from_numpy(lg).double(), -1).numpy()
        return -float(np.mean([lp[i, ids[i + 1]] for i in range(len(ids) - 1)]))

    n32, nhf = nll(r["logits"]), nll(r["logits_hf"])
    expect(n32 < 3.0 and abs(n32 - nhf) < 0.05, f"nll fp32 {n32:.3f}, hf {nhf:.3f}")

    def rot_interleaved(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    m = hf.Model.from_dir(info["model_dir"], "fp32")
    bad = nll(_with_patch("rotate_half", rot_interleaved, lambda: hf.forward(m, ids)[0]))
    expect(bad > n32 + 0.3, f"interleaved RoPE nll {bad:.3f} vs {n32:.3f}")
    print(f"    nll/token fp32 {n32:.3f}, hf {nhf:.3f}, interleaved-RoPE {bad:.3f}")


def main(argv=None) -> int:
    global FIX, MAN
    ap = argparse.ArgumentParser()
    default = os.path.join(os.environ["EAGLET_FIXTURES"], "tiny") if os.environ.get("EAGLET_FIXTURES") else ""
    ap.add_argument("--fixtures", default=default)
    ap.add_argument("--shared", default=os.environ.get("EAGLET_SHARED", ""))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    tmp = None
    FIX = args.fixtures
    if not FIX or not os.path.isfile(os.path.join(FIX, "MANIFEST.json")):
        tmp = tempfile.TemporaryDirectory()
        FIX = tmp.name
        print(f"no fixtures given; generating into {FIX}")
        mtm.main(["--out", FIX, "--shared", args.shared])
    MAN = json.load(open(os.path.join(FIX, "MANIFEST.json")))
    failed = CHECKS.run_all()
    if tmp:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
