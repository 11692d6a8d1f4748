#!/usr/bin/python3
"""Sanity checks of the EAGLE-3 drafter oracle and its fixtures (no eaglet code involved).

    test_drafter_selfcheck.py [--fixtures DIR] [--targets TINY_DIR]

DIR is the output of make_tiny_drafters.py (default $EAGLET_FIXTURES/drafters), TINY_DIR that of make_tiny_models.py
(default $EAGLET_FIXTURES/tiny). If DIR has no MANIFEST.json the drafters are generated into a temporary directory
first. Prints one line per check and "N passed, M failed"; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import eagle3_reference as er  # noqa: E402
import hf_reference as hf  # noqa: E402
import make_tiny_drafters as mtd  # noqa: E402
import safetensors_np as st  # noqa: E402
from selfcheck import Checks  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
FIX = ""      # drafters dir
ROOT = ""     # fixtures root (targets are named relative to it)
MAN: dict = {}
BMAN: dict = {}



def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def target_dir(name):
    return os.path.join(ROOT, MAN["drafters"][name]["target"])


def drafter(name):
    return er.Drafter.from_dir(os.path.join(FIX, name), target_dir(name))


def target(name):
    return hf.load_model(target_dir(name), "fp32")


def ref(name):
    return st.load(os.path.join(FIX, "reference", f"{name}.safetensors"))


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------------------------
# references


@check("every reference file: tensor names, dtypes, shapes, metadata; recomputing it from the files gives the same")
def _():
    for name, info in MAN["drafters"].items():
        r = ref(name)
        d = drafter(name)
        c = d.cfg
        S, Vd, H, W = MAN["reference_len"], c.draft_vocab_size, c.hidden_size, c.num_aux * c.target_hidden_size
        shapes = {"input_ids": (S,), "aux": (S, W), "aux_layers": (c.num_aux,), "draft_input_ids": (S,),
                  "positions": (S,), "logits": (S, Vd), "h_next": (S, H), "step_token": (1,), "step_position": (1,),
                  "step_logits": (1, Vd), "step_h_next": (1, H)}
        expect(sorted(r) == sorted(shapes), f"{name}: tensors {sorted(r)}")
        for k, shp in shapes.items():
            expect(r[k].shape == shp, f"{name}: {k} shape {r[k].shape}, expected {shp}")
            expect(r.dtypes[k] == er.REFERENCE_DTYPES[k], f"{name}: {k} dtype {r.dtypes[k]}")
        expect(r.metadata["layout"] == info["layout"] and r.metadata["drafter"] == name, f"{name}: metadata")
        expect(r.metadata["aux_layers"] == ",".join(map(str, info["aux_layers"])), f"{name}: metadata aux")
        for k, v in info["flags"].items():
            expect(r.metadata[k] == str(v).lower(), f"{name}: metadata {k}")
        expect(list(r["aux_layers"]) == info["aux_layers"], f"{name}: aux_layers")
        expect(np.array_equal(r["positions"], np.arange(S)) and int(r["step_position"][0]) == S, "positions")
        expect(np.array_equal(r["draft_input_ids"][:-1], r["input_ids"][1:]), f"{name}: draft ids not shifted")
        again = er.reference_run(d, target(name), r["input_ids"])
        for k in shapes:
            expect(np.array_equal(again[k], r[k]), f"{name}: recomputed {k} differs by {maxdiff(again[k], r[k])}")


@check("aux = the target's hidden_states at the resolved layers (input-of-layer convention), next = target argmax")
def _():
    for name, info in MAN["drafters"].items():
        r = ref(name)
        lt, hs = target(name).forward(r["input_ids"])
        hs = hs.numpy()
        Ht = hs.shape[-1]
        for j, layer in enumerate(info["aux_layers"]):
            expect(np.array_equal(r["aux"][:, j * Ht:(j + 1) * Ht], hs[layer]), f"{name}: aux chunk {j} != hs[{layer}]")
        expect(int(r["draft_input_ids"][-1]) == int(torch.argmax(lt[-1])), f"{name}: next token")
        d = drafter(name)
        arg = int(np.argmax(r["logits"][-1]))
        expect(int(r["step_token"][0]) == arg + int(d.d2t[arg]), f"{name}: step token not d2t-mapped argmax")


@check("resolved aux layers and flags per layout (SpecForge eagle_config ids +1; speculators ids as-is; defaults)")
def _():
    want = {"eagle_official": ([2, 4, 5], "default"), "specforge": ([2, 4, 5], "eagle_config"),
            "speculators": ([2, 4, 5], "eagle_aux_hidden_state_layer_ids"),
            "speculators_2layer": ([1, 4, 7], "eagle_aux_hidden_state_layer_ids"), "vllm_bf16": ([2, 4, 5], "default")}
    for name, (layers, key) in want.items():
        info = MAN["drafters"][name]
        expect(info["aux_layers"] == layers and info["aux_layers_key"].startswith(key), f"{name}: {info['aux_layers']}")
    expect(MAN["drafters"]["specforge"]["aux_layers_config"] == [1, 3, 4], "specforge config ids")
    flags = {n: MAN["drafters"][n]["flags"] for n in MAN["drafters"]}
    expect(flags["speculators"] == {"norm_before_residual": True, "norm_before_fc": True, "fc_norm": False,
                                    "norm_output": True}, "speculators flags")
    expect(flags["speculators_2layer"] == {"norm_before_residual": True, "norm_before_fc": False, "fc_norm": False,
                                           "norm_output": False}, "speculators_2layer flags")
    expect(flags["specforge"]["fc_norm"] and not flags["specforge"]["norm_before_residual"], "specforge flags")
    for n in ("eagle_official", "vllm_bf16"):
        expect(not any(flags[n].values()), f"{n} flags")


@check("RoPE comes from the drafter's config: theta 10000 (official/SpecForge, no keys), 1e5 (vllm_bf16), llama3 "
       "500000 (speculators)")
def _():
    for name, theta in (("eagle_official", 10000.0), ("specforge", 10000.0), ("vllm_bf16", 100000.0)):
        d = drafter(name)
        D = d.cfg.head_dim
        want = 1.0 / (theta ** (np.arange(0, D, 2) / D))
        expect(d.cfg.rope_scaling is None and np.allclose(d.inv_freq.numpy(), want, rtol=1e-6), f"{name}: inv_freq")
    d = drafter("speculators")
    t = hf.load_model(target_dir("speculators"), "fp32")
    expect(np.array_equal(d.inv_freq.numpy(), t.inv_freq.numpy()), "speculators inv_freq != target's llama3 one")
    expect(not np.allclose(d.inv_freq.numpy(), drafter("eagle_official").inv_freq.numpy()), "rope not distinct")


# ---------------------------------------------------------------------------------------------------------------
# forward-pass properties


def _extend(name, n_first=None):
    d = drafter(name)
    r = ref(name)
    S = r["input_ids"].size
    cache = d.new_cache()
    if n_first is None:
        lg, hn = d.extend(r["draft_input_ids"], r["aux"], np.arange(S), cache)
    else:
        a = d.extend(r["draft_input_ids"][:n_first], r["aux"][:n_first], np.arange(n_first), cache)
        b = d.extend(r["draft_input_ids"][n_first:], r["aux"][n_first:], np.arange(n_first, S), cache)
        lg, hn = torch.cat((a[0], b[0])), torch.cat((a[1], b[1]))
    return d, r, cache, lg, hn


@check("extend in two chunks through the drafter cache == one pass; explicit causal mask == default mask")
def _():
    for name in MAN["drafters"]:
        d, r, cache, lg, hn = _extend(name, n_first=7)
        expect(maxdiff(lg, r["logits"]) < 1e-4 and maxdiff(hn, r["h_next"]) < 1e-4, f"{name}: chunked extend")
        S = r["input_ids"].size
        mask = np.tril(np.ones((S, S), bool))
        lg2, hn2 = d.extend(r["draft_input_ids"], r["aux"], np.arange(S), None, mask=mask)
        expect(np.array_equal(lg2.numpy(), r["logits"]) and np.array_equal(hn2.numpy(), r["h_next"]),
               f"{name}: explicit mask")


@check("tree-masked multi-step draft (top-3 then top-2 per node, siblings share a position) == each path run "
       "separately as a chain")
def _():
    for name in ("eagle_official", "speculators", "speculators_2layer", "vllm_bf16", "specforge"):
        d, r, cache, lg, hn = _extend(name)
        S = r["input_ids"].size
        base = d.cache_copy(cache)
        P = d.cache_len(cache)
        k1 = torch.topk(lg[-1], 3).indices
        tok1 = d.to_target(k1)
        h1 = hn[-1:].expand(3, -1)
        m1 = np.zeros((3, P + 3), bool)
        m1[:, :P] = True
        m1[np.arange(3), P + np.arange(3)] = True
        tc = d.cache_copy(base)
        l1, n1 = d.step(tok1, h1, [S] * 3, tc, mask=m1)
        k2 = torch.topk(l1, 2, dim=-1).indices           # [3, 2]
        tok2 = d.to_target(k2.reshape(-1))
        parent = np.repeat(np.arange(3), 2)
        m2 = np.zeros((6, P + 9), bool)
        m2[:, :P] = True
        m2[np.arange(6), P + parent] = True
        m2[np.arange(6), P + 3 + np.arange(6)] = True
        l2, n2 = d.step(tok2, n1[parent], [S + 1] * 6, tc, mask=m2)
        expect(d.cache_len(tc) == P + 9, "tree cache length")
        for i in range(6):
            c = d.cache_copy(base)
            a_l, a_h = d.step(tok1[parent[i]:parent[i] + 1], hn[-1:], [S], c)
            b_l, b_h = d.step(tok2[i:i + 1], a_h, [S + 1], c)
            expect(maxdiff(a_l[0], l1[parent[i]]) < 1e-5 and maxdiff(a_h[0], n1[parent[i]]) < 1e-5,
                   f"{name}: depth-1 node {parent[i]}")
            expect(maxdiff(b_l[0], l2[i]) < 1e-5 and maxdiff(b_h[0], n2[i]) < 1e-5, f"{name}: depth-2 node {i}")
        # keeping the accepted path's entries in the cache == having drafted that path alone
        keep = list(range(P)) + [P + parent[4], P + 3 + 4]
        kc = d.cache_select(tc, keep)
        c = d.cache_copy(base)
        d.step(tok1[parent[4]:parent[4] + 1], hn[-1:], [S], c)
        d.step(tok2[4:5], n1[parent[4]:parent[4] + 1], [S + 1], c)
        x1 = d.step(tok2[:1], n2[:1], [S + 2], kc)
        x2 = d.step(tok2[:1], n2[:1], [S + 2], c)
        expect(maxdiff(x1[0], x2[0]) < 1e-5, f"{name}: cache_select")


@check("hidden input kind is an explicit argument: extend rejects H-wide, step rejects num_aux*H_t-wide input")
def _():
    d, r, cache, lg, hn = _extend("eagle_official")
    for fn, h in ((d.extend, hn[:2].numpy()), (d.step, r["aux"][:2])):
        try:
            fn(r["draft_input_ids"][:2], h, [0, 1])
        except ValueError:
            continue
        raise AssertionError(f"{fn.__name__} accepted a hidden of width {h.shape[1]}")
    try:
        d.forward(r["draft_input_ids"][:2], r["aux"][:2], [0, 1])
    except TypeError:
        pass
    else:
        raise AssertionError("forward without from_target= was accepted")


@check("layout equivalence: eagle_official rewritten as speculators (layers.0.*, embed copy, flags false) and as "
       "vLLM (layers.0.* in a flat config) gives identical outputs")
def _():
    src = os.path.join(FIX, "eagle_official")
    t = st.load(os.path.join(src, "model.safetensors"))
    cfg = read_json(os.path.join(src, "config.json"))
    tdir = target_dir("eagle_official")
    tcfg = read_json(os.path.join(tdir, "config.json"))
    temb = st.load_model_dir(tdir)["model.embed_tokens.weight"]
    renamed = {("layers.0." + k[9:] if k.startswith("midlayer.") else k): v for k, v in t.items()}
    dts = {("layers.0." + k[9:] if k.startswith("midlayer.") else k): v for k, v in t.dtypes.items()}
    r = ref("eagle_official")
    with tempfile.TemporaryDirectory() as tmp:
        # speculators
        tc = dict(tcfg, rope_theta=10000.0, rope_scaling=None)
        scfg = mtd.speculators_config(tc, "x", 256, [2, 4, 5], {"norm_before_residual": False,
                                      "norm_before_fc": False, "fc_norm": False, "norm_output": False})
        scfg["transformer_layer_config"]["rms_norm_eps"] = cfg["rms_norm_eps"]
        d1 = os.path.join(tmp, "spec")
        os.makedirs(d1)
        mtd.write_json(os.path.join(d1, "config.json"), scfg)
        st.save(os.path.join(d1, "model.safetensors"), dict(renamed, **{"embed_tokens.weight": temb}),
                dict(dts, **{"embed_tokens.weight": "F32"}))
        # vLLM flat config, layers.0.* names
        d2 = os.path.join(tmp, "vllm")
        os.makedirs(d2)
        mtd.write_json(os.path.join(d2, "config.json"), dict(cfg, architectures=["Eagle3LlamaForCausalLM"],
                                                             norm_before_residual=False))
        st.save(os.path.join(d2, "model.safetensors"), renamed, dts)
        for d in (d1, d2):
            dr = er.Drafter.from_dir(d, tdir)
            again = er.reference_run(dr, hf.load_model(tdir, "fp32"), r["input_ids"])
            for k in ("logits", "h_next", "step_logits", "step_h_next"):
                expect(maxdiff(again[k], r[k]) < 1e-5, f"{os.path.basename(d)}: {k} differs")


@check("each flag moves the output the intended way (norm_before_residual, norm_output, norm_before_fc, fc_norm)")
def _():
    d, r, cache, lg, hn = _extend("speculators")
    S = r["input_ids"].size
    pos = np.arange(S)

    def run(**flags):
        for k, v in flags.items():
            setattr(d.cfg, k, v)
        out = d.extend(r["draft_input_ids"], r["aux"], pos)
        for k in flags:
            setattr(d.cfg, k, MAN["drafters"]["speculators"]["flags"][k])
        return out
    l0, h0 = run()
    expect(np.array_equal(l0.numpy(), r["logits"]), "baseline")
    l1, h1 = run(norm_output=False)
    expect(np.array_equal(l1.numpy(), l0.numpy()) and maxdiff(h1, h0) > 1e-2, "norm_output must change only h_next")
    expect(maxdiff(h0, er._rms_norm(h1, d.norm, d.cfg.rms_norm_eps)) < 1e-5, "norm_output: h_next = norm(h_out)")
    l2, _ = run(norm_before_residual=False)
    expect(maxdiff(l2, l0) > 1e-2, "norm_before_residual has no effect")
    saved = d.input_norm
    d.input_norm = None
    l3, _ = d.extend(r["draft_input_ids"], r["aux"], pos)
    d.input_norm = saved
    expect(maxdiff(l3, l0) > 1e-2, "input_norm has no effect")
    s, rs, _, lgs, _ = _extend("specforge")
    saved = s.fc_norms
    s.fc_norms = None
    l4, _ = s.extend(rs["draft_input_ids"], rs["aux"], np.arange(S))
    s.fc_norms = saved
    expect(maxdiff(l4, rs["logits"]) > 1e-2, "fc_norm has no effect")


@check("vllm_bf16: every float tensor is stored BF16; the reference is the fp32 computation on the upcast values")
def _():
    t = st.load(os.path.join(FIX, "vllm_bf16", "model.safetensors"))
    for k, dt in t.dtypes.items():
        expect(dt == {"d2t": "I64", "t2d": "BOOL"}.get(k, "BF16"), f"{k}: {dt}")
    expect(any(k.startswith("midlayer.") for k in t), "midlayer names")


# ---------------------------------------------------------------------------------------------------------------
# bigram targets and exact drafters


@check("echo_fp32 / smallvocab_fp32: argmax == bigram map f for every token, f far from the identity, margins")
def _():
    for tname in ("echo_fp32", "smallvocab_fp32"):
        info = MAN["targets"][tname]
        f = np.array(info["bigram_map"])
        m = hf.load_model(os.path.join(ROOT, info["dir"]), "fp32")
        V = f.size
        # by hand: lm_head(norm(embed(x))); o_proj/down_proj are zero
        w = m.norm.numpy()
        E = m.embed.numpy().astype(np.float64)
        n = w * E / np.sqrt((E ** 2).mean(1, keepdims=True) + m.cfg.rms_norm_eps)
        Z = n @ m.lm_head.numpy().T.astype(np.float64)
        expect(np.array_equal(Z.argmax(1), f), f"{tname}: hand-computed argmax != f")
        mg = np.sort(Z, 1)
        expect((mg[:, -1] - mg[:, -2]).min() > 0.5, f"{tname}: min margin {(mg[:, -1] - mg[:, -2]).min()}")
        expect(np.all(f != np.arange(V)), f"{tname}: f has a fixed point")
        lt, _ = m.forward(np.array(mtd.random_sequences(V, 1, 40, 31337)[0]))
        expect(info["bigram_agreement"] == 1.0, f"{tname}: manifest agreement")
        for i in range(m.cfg.num_layers):
            expect(float(m.layers[i]["o"].abs().max()) == 0 and float(m.layers[i]["down"].abs().max()) == 0,
                   f"{tname}: layer {i} o/down not zero")


@check("nearecho_fp32: argmax follows the bigram map 60-85% of the time (fresh sequences)")
def _():
    info = MAN["targets"]["nearecho_fp32"]
    m = hf.load_model(os.path.join(ROOT, info["dir"]), "fp32")
    rate = mtd.bigram_agreement(m, np.array(info["bigram_map"]), mtd.random_sequences(384, 6, 64, 4711))
    print(f"    nearecho bigram agreement {rate:.4f} (manifest {info['bigram_agreement']})")
    expect(0.60 <= rate <= 0.85, f"rate {rate}")


@check("smallvocab_fp32: at T=1 every next-token distribution has >= 3 tokens above 5%; specials < 1%")
def _():
    info = MAN["targets"]["smallvocab_fp32"]
    m = hf.load_model(os.path.join(ROOT, info["dir"]), "fp32")
    s = mtd.target_probs_summary(m, 24)
    expect(s["min_tokens_over_5pct"] >= 3 and s["special_prob_max"] < 0.01 and s["top_prob_max"] < 0.7, str(s))
    tok = read_json(os.path.join(ROOT, info["dir"], "tokenizer.json"))
    ids = sorted(tok["model"]["vocab"].values())
    expect(ids == list(range(24)), "tokenizer ids")


@check("exact drafters: argmax == the bigram target's next token >= 99% (fresh sequences; extend rows and 8 "
       "chained draft steps); random_echo ~ chance")
def _():
    for name, lo, hi in (("exact_echo", 0.99, 1.0), ("exact_smallvocab", 0.99, 1.0), ("random_echo", 0.0, 0.05)):
        d = drafter(name)
        seqs = mtd.random_sequences(d.cfg.vocab_size, 6, 32, 8086)
        ag = mtd.draft_agreement(d, target(name), seqs, steps=8)
        print(f"    {name}: extend {ag['extend']:.4f} ({ag['n_extend']}), chain {ag['chain']:.4f} ({ag['n_chain']}), "
              f"KL(p||q) mean {ag.get('kl_mean', float('nan')):.3g} max {ag.get('kl_max', float('nan')):.3g}")
        expect(lo <= ag["extend"] <= hi and lo <= ag["chain"] <= hi, f"{name}: {ag}")
        if name == "exact_smallvocab":
            expect(ag["kl_max"] < 0.02, f"KL {ag['kl_max']}")


@check("exact drafters: draft logits == target logits / rms(norm(embed(x))) (the construction, by hand)")
def _():
    for name in ("exact_echo", "exact_smallvocab"):
        d = drafter(name)
        r = ref(name)
        tm = target(name)
        lt, _ = tm.forward(np.concatenate([r["input_ids"], r["draft_input_ids"][-1:]]))
        a = er._rms_norm(tm.embed[torch.as_tensor(r["draft_input_ids"])], tm.norm, tm.cfg.rms_norm_eps)
        scale = torch.sqrt(a.pow(2).mean(-1, keepdim=True) + d.cfg.rms_norm_eps)
        expect(maxdiff(torch.as_tensor(r["logits"]) * scale, lt[1:]) < 1e-3, f"{name}: logits * rms != target")


# ---------------------------------------------------------------------------------------------------------------
# broken fixtures


def _intended(name, base_t, base_cfg):
    """The change each broken fixture must carry relative to its base (independent of the generator's record)."""
    mid = sorted(k for k in base_t if k.startswith("midlayer."))
    one = {"added": [], "removed": [], "changed": []}
    table = {
        "both_layouts": (dict(one, added=sorted("layers.0." + k[9:] for k in mid)), []),
        "missing_tensor": (dict(one, removed=["midlayer.mlp.up_proj.weight"]), []),
        "unknown_tensor": (dict(one, added=["midlayer.foo.weight"]), []),
        "fc_width": (dict(one, changed=["fc.weight"]), []),
        "attn_width": (dict(one, changed=["midlayer.self_attn.q_proj.weight"]), []),
        "lm_head_rows": (dict(one, changed=["lm_head.weight"]), []),
        "d2t_len": (dict(one, changed=["d2t"]), []),
        "t2d_len": (dict(one, changed=["t2d"]), []),
        "embed_width": (dict(one, changed=["embed_tokens.weight"]), []),
        "vocab_mismatch": (one, ["vocab_size"]),
        "aux_out_of_range": (one, ["eagle_aux_hidden_state_layer_ids"]),
        "target_hidden": (one, ["target_hidden_size"]),
        "d2t_float": (dict(one, changed=["d2t"]), []),
        "d2t_range": (dict(one, changed=["d2t"]), []),
        "d2t_not_increasing": (dict(one, changed=["d2t"]), []),
        "d2t_absolute": (dict(one, changed=["d2t"]), []),
        "d2t_t2d_mismatch": (dict(one, changed=["t2d"]), []),
        "reduced_vocab_no_d2t": (dict(one, removed=["d2t", "t2d"]), []),
        "unknown_architecture": (one, ["architectures"]),
        "norm_flags_conflict": (dict(one, added=[f"fc_norm.{i}.weight" for i in range(3)]), ["fc_norm"]),
    }
    return table[name]


def _value_checks(name, b, bt, t, cfg):
    """The exact new value of the broken contract."""
    base_targets = np.arange(bt["d2t"].size) + bt["d2t"] if "d2t" in bt else None
    if name == "fc_width":
        expect(t["fc.weight"].shape == (64, 128), "fc shape")
    elif name == "attn_width":
        expect(t["midlayer.self_attn.q_proj.weight"].shape == (64, 64), "q shape")
    elif name == "lm_head_rows":
        expect(t["lm_head.weight"].shape == (200, 64), "lm_head shape")
    elif name == "d2t_len":
        expect(t["d2t"].shape == (200,), "d2t shape")
    elif name == "t2d_len":
        expect(t["t2d"].shape == (300,), "t2d shape")
    elif name == "embed_width":
        expect(t["embed_tokens.weight"].shape == (384, 32), "embed shape")
    elif name == "vocab_mismatch":
        expect(cfg["vocab_size"] == 500, "vocab_size")
    elif name == "aux_out_of_range":
        expect(cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 12], "aux ids")
    elif name == "target_hidden":
        expect(cfg["target_hidden_size"] == 128, "target_hidden_size")
    elif name == "d2t_float":
        expect(t.dtypes["d2t"] == "F32" and np.array_equal(t["d2t"], bt["d2t"]), "d2t F32 with the same values")
    elif name == "d2t_range":
        tg = np.arange(t["d2t"].size) + t["d2t"]
        expect(tg[-1] == 390 and np.array_equal(tg[:-1], base_targets[:-1]), "only the last target id, now 390")
    elif name == "d2t_not_increasing":
        tg = np.arange(t["d2t"].size) + t["d2t"]
        diff = np.nonzero(tg != base_targets)[0]
        expect(len(diff) == 2 and diff[1] == diff[0] + 1 and sorted(tg) == sorted(base_targets),
               "two adjacent target ids swapped")
    elif name == "d2t_absolute":
        expect(np.array_equal(t["d2t"], base_targets), "d2t = absolute target ids")
    elif name == "d2t_t2d_mismatch":
        diff = np.nonzero(t["t2d"] != bt["t2d"])[0]
        expect(len(diff) == 2 and t["t2d"].sum() == bt["t2d"].sum(), "one bit cleared, one set")
    elif name == "unknown_architecture":
        expect(cfg["architectures"] == ["GPT2Model"], "architectures")
    elif name == "norm_flags_conflict":
        expect(cfg["fc_norm"] is True and cfg["norm_before_fc"] is True, "both flags")


@check("broken fixtures: each differs from its base in exactly the intended way (tensors, dtypes, config keys)")
def _():
    expect(sorted(BMAN) == sorted(mtd.BROKEN), f"broken manifest names {sorted(BMAN)}")
    for name, info in BMAN.items():
        expect({"base", "target", "expect"} <= set(info), f"{name}: manifest fields")
        expect(info["target"] == MAN["drafters"][info["base"]]["target"], f"{name}: target")
        expect(os.path.isfile(os.path.join(ROOT, info["target"], "config.json")), f"{name}: target dir")
        bdir, ndir = os.path.join(FIX, info["base"]), os.path.join(FIX, "broken", name)
        bt = st.load(os.path.join(bdir, "model.safetensors"))
        t = st.load(os.path.join(ndir, "model.safetensors"))
        bcfg, cfg = read_json(os.path.join(bdir, "config.json")), read_json(os.path.join(ndir, "config.json"))
        want_t, want_c = _intended(name, bt, bcfg)
        got_t = mtd.tensor_diff(bt, bt.dtypes, t, t.dtypes)
        got_c = mtd.config_diff(bcfg, cfg)
        expect(got_t == want_t, f"{name}: tensor changes {got_t}, intended {want_t}")
        expect(got_c == want_c, f"{name}: config changes {got_c}, intended {want_c}")
        expect(info["changes"] == {"tensors": got_t, "config": got_c}, f"{name}: manifest changes")
        _value_checks(name, bcfg, bt, t, cfg)


@check("broken fixtures: the oracle's loader rejects each with a message holding every 'expect' substring; "
       "the bases load")
def _():
    for name, info in BMAN.items():
        tdir = os.path.join(ROOT, info["target"])
        er.Drafter.from_dir(os.path.join(FIX, info["base"]), tdir)
        try:
            er.Drafter.from_dir(os.path.join(FIX, "broken", name), tdir)
        except er.DrafterError as e:
            msg = str(e)
            missing = [s for s in info["expect"] if s not in msg]
            expect(not missing, f"{name}: message {msg!r} lacks {missing}")
            print(f"    {name}: {msg}")
            continue
        raise AssertionError(f"{name}: loaded without error")


@check("MANIFEST: every drafter's files, reference and target exist; generator hash matches the scripts")
def _():
    tiny = os.path.dirname(target_dir("eagle_official"))
    expect(MAN["generator_hash"] == mtd.script_hash(tiny), "generator hash is stale")
    for f in mtd.manifest_files(dict(MAN, broken={n: None for n in BMAN})):
        expect(os.path.isfile(os.path.join(FIX, f)), f"missing {f}")


def main(argv=None) -> int:
    global FIX, ROOT, MAN, BMAN
    ap = argparse.ArgumentParser()
    env = os.environ.get("EAGLET_FIXTURES", "")
    ap.add_argument("--fixtures", default=os.path.join(env, "drafters") if env else "")
    ap.add_argument("--targets", default=os.path.join(env, "tiny") if env else "")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    tmp = None
    FIX = args.fixtures
    if not FIX or not os.path.isfile(os.path.join(FIX, "MANIFEST.json")):
        if not args.targets:
            print("need --targets (or EAGLET_FIXTURES) to generate the drafters")
            print("0 passed, 1 failed")
            return 1
        tmp = tempfile.TemporaryDirectory()
        FIX = os.path.join(tmp.name, "drafters")
        print(f"no drafter fixtures given; generating into {FIX}")
        mtd.main(["--out", FIX, "--targets", args.targets])
    FIX = os.path.abspath(FIX)
    ROOT = os.path.dirname(FIX)
    MAN = read_json(os.path.join(FIX, "MANIFEST.json"))
    BMAN = read_json(os.path.join(FIX, "broken", "MANIFEST.json"))
    failed = CHECKS.run_all()
    if tmp:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
