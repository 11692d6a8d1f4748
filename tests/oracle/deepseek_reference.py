#!/usr/bin/python3
"""Independent PyTorch reference for DeepSeek-V3 / Kimi-K2 / Kimi-K2.5 text decoders, written from the math of
Hugging Face `modeling_deepseek_v3.py` / `configuration_deepseek_v3.py` and `modeling_rope_utils.py` (yarn), as
summarised in /work/shared/docs/target-architectures.md §4. Function by function:
  * Config                  -> DeepseekV3Config defaults; kimi_k25: `text_config`, tensors under `language_model.`
  * yarn_inv_freq           -> _compute_yarn_parameters (mscale / mscale_all_dim, original_max_position_embeddings,
                               truncate, beta_fast / beta_slow), attention_factor on cos and sin
  * Model._rope             -> DeepseekV3RotaryEmbedding + apply_rotary_pos_emb_interleave (de-interleave, then
                               rotate_half) when rope_interleave, else apply_rotary_pos_emb
  * Model._attention        -> DeepseekV3Attention (naive form: q LoRA or q_proj, kv_a_proj_with_mqa split,
                               kv_a_layernorm, kv_b_proj to k_nope / v per head, shared k_rot, scaling with mscale²)
  * Model._router / _moe    -> DeepseekV3TopkRouter (fp32, sigmoid, e_score_correction_bias for the choice only,
                               group top-2 sums, masked_fill 0.0, top-k, norm_topk_prob + 1e-20, routed_scaling_factor)
                               and DeepseekV3MoE (experts summed in fp32, cast, + shared_experts)
  * dequantize_linear       -> the stored forms of a quantized Linear (target-architectures.md §4.2), decoded here
                               from the format specs: DeepSeek FP8 (quant_method "fp8", F8_E4M3 codes,
                               W[r, c] = e4m3(code) · weight_scale_inv[r // B, c // B]) and compressed-tensors
                               pack-quantized int4 (W[r, c] = (((word[r, c // 8] >> 4·(c % 8)) & 0xF) − 8) ·
                               weight_scale[r, c // group]); the weights are then used as the bf16 variants' are
Compute modes as hf_reference.py: "fp32" (weights upcast, everything fp32) and "hf" (the checkpoint dtype with HF's
rounding points; products accumulate in fp32 and round once). "fp32_a8" is fp32 with the one thing eaglet computes
differently by design, written from its documented scheme (src/kernels/quantized.h), not from its code: a Linear
stored as int4 meets its input quantized per row in blocks of 32 columns (scale absmax / 127, code round-half-even
of x · 127 / absmax); it tells how far eaglet's W4A8 arithmetic may be from its own definition, where the HF math
("fp32") only bounds it loosely. "fp32_abf16" is fp32 with the AVX-512 BF16 path's rounding points for FP8
checkpoints (docs/numerics.md): a Linear stored F8_E4M3 (but kv_b_proj, which eaglet dequantizes to fp32 for the
absorbed form) and a BF16 lm_head meet their input rounded to bf16; the router and everything else stay fp32. `MUTATIONS` switches single details off for the
self-check (each must move the logits).

forward(model, ids) -> (logits [S, V], hidden_states [L+1, S, H]) float32 numpy; hidden_states[i] enters layer i,
[L] is the last layer's output before the final norm.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

SUPPORTED = ("deepseek_v3", "kimi_k2", "kimi_k25")
_TORCH_DTYPE = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}

# Switches for the oracle's mutation tests (all False = the HF math).
MUTATIONS = {"bias_in_weights": False, "no_bias": False, "no_groups": False, "half_split_rope": False,
             "no_mscale": False, "no_yarn": False, "no_shared": False, "no_norm_topk": False,
             "no_scaling_factor": False, "softmax_router": False, "no_kv_norm": False,
             # decoding of quantized weights
             "fp8_scale_per_row": False, "fp8_scale_divided": False,
             "int4_nibbles_reversed": False, "int4_no_offset": False, "int4_scale_per_row": False}

DEFAULTS = dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
                num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=1,
                n_routed_experts=256, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536,
                qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=8, topk_group=4,
                num_experts_per_tok=8, first_k_dense_replace=3, norm_topk_prob=True, hidden_act="silu",
                max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None,
                rope_interleave=True, attention_bias=False, tie_word_embeddings=False, num_nextn_predict_layers=0)


class Config:
    def __init__(self, top: dict):
        self.model_type = top.get("model_type")
        if self.model_type not in SUPPORTED:
            raise ValueError(f"model_type {self.model_type!r} is not one of {SUPPORTED}")
        cfg = top["text_config"] if self.model_type == "kimi_k25" else top
        self.quant = Quantization(top, cfg)
        self.prefix = "language_model." if self.model_type == "kimi_k25" else ""
        g = {k: cfg.get(k, v) for k, v in DEFAULTS.items()}
        self.raw = g
        for k, v in g.items():
            setattr(self, k, v)
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.head_dim = self.qk_rope_head_dim
        assert self.num_key_value_heads == self.num_attention_heads
        self.scaling = self.qk_head_dim ** -0.5
        rs = self.rope_scaling
        if rs is not None and not MUTATIONS["no_mscale"]:
            mad = rs.get("mscale_all_dim", 0)
            if mad:
                m = get_mscale(rs["factor"], mad)
                self.scaling = self.scaling * m * m


def decode_e4m3(codes) -> np.ndarray:
    """float8_e4m3fn codes (uint8) -> float32: sign bit 7, exponent bits 6..3 (bias 7), mantissa bits 2..0; exponent
    field 0 is subnormal (m/8 · 2^-6); S.1111.111 is NaN; no infinities."""
    c = np.asarray(codes, np.uint8).astype(np.int64)
    e, m = (c >> 3) & 0xF, c & 0x7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * np.exp2(e - 7.0))
    mag = np.where((c & 0x7F) == 0x7F, np.nan, mag)
    return np.where(c & 0x80, -mag, mag).astype(np.float32)


class Quantization:
    """config.json's quantization_config (K2.5: in text_config, or at the top level)."""

    def __init__(self, top: dict, text: dict):
        q = top.get("quantization_config") or text.get("quantization_config")
        self.method, self.block, self.group = None, None, None
        if not q:
            return
        self.method = q["quant_method"]
        if self.method == "fp8":
            b = q["weight_block_size"]
            if q.get("fmt", "e4m3") != "e4m3" or len(b) != 2 or b[0] != b[1]:
                raise ValueError(f"fp8 quantization_config not understood: {q}")
            self.block = int(b[0])
        elif self.method == "compressed-tensors":
            (g,) = q["config_groups"].values()
            w = g["weights"]
            if (q["format"], w["num_bits"], w["type"], w["strategy"], w["symmetric"]) != \
                    ("pack-quantized", 4, "int", "group", True):
                raise ValueError(f"compressed-tensors scheme not understood: {q}")
            self.group = int(w["group_size"])
        else:
            raise ValueError(f"quant_method {self.method!r}")


take_array = safetensors_np.take_array


def dequantize_linear(tensors, dtypes, module: str, shape, quant: Quantization, used: set) -> np.ndarray:
    """The fp32 weight [out, in] of Linear `module` (a dense .weight, or a quantized stored form)."""
    out, inp = shape
    if module + ".weight_packed" in tensors:
        if quant.group is None:
            raise ValueError(f"{module}.weight_packed without a compressed-tensors quantization_config")
        if module + ".weight_zero_point" in tensors:
            raise ValueError(f"{module}: asymmetric int4 (weight_zero_point)")
        words = np.asarray(tensors[module + ".weight_packed"]).astype(np.int64) & 0xFFFFFFFF
        scale = np.asarray(tensors[module + ".weight_scale"], np.float32)
        wshape = [int(v) for v in np.asarray(tensors[module + ".weight_shape"]).reshape(-1)]
        if wshape != [out, inp] or words.shape != (out, inp // 8) or scale.shape != (out, inp // quant.group):
            raise ValueError(f"{module}: packed {words.shape} scale {scale.shape} shape {wshape} for [{out}, {inp}]")
        col = np.arange(inp)
        shift = 4 * (7 - col % 8) if MUTATIONS["int4_nibbles_reversed"] else 4 * (col % 8)
        nib = (words[:, col // 8] >> shift[None, :]) & 0xF
        q = nib if MUTATIONS["int4_no_offset"] else nib - 8
        s = scale[:, :1].repeat(inp, 1) if MUTATIONS["int4_scale_per_row"] else scale[:, col // quant.group]
        used.update(module + n for n in (".weight_packed", ".weight_scale", ".weight_shape"))
        return q.astype(np.float32) * s
    name = module + ".weight"
    a = take_array(tensors, name, shape, used)
    if dtypes.get(name) != "F8_E4M3":
        return np.array(a, dtype=np.float32)
    B = quant.block
    if B is None:
        raise ValueError(f"{name} is F8_E4M3 without an fp8 quantization_config")
    si = np.asarray(tensors[module + ".weight_scale_inv"], np.float32)
    if si.shape != (-(-out // B), -(-inp // B)):
        raise ValueError(f"{module}.weight_scale_inv: shape {si.shape} for [{out}, {inp}] in {B}-blocks")
    used.add(module + ".weight_scale_inv")
    r, c = np.arange(out) // B, np.arange(inp) // B
    s = si[r][:, np.zeros_like(c)] if MUTATIONS["fp8_scale_per_row"] else si[r][:, c]
    w = decode_e4m3(a)
    return w / s if MUTATIONS["fp8_scale_divided"] else w * s


def quantize_activations(x, block=32):
    """Each row of x [S, K] in blocks of `block` columns (the last zero-padded): the values code · absmax / 127 with
    code = round-half-even(x · (127 / absmax)), clamped to ±127; an all-zero block stays zero."""
    S, K = x.shape
    kp = -(-K // block) * block
    xp = torch.zeros(S, kp, dtype=torch.float32)
    xp[:, :K] = x.float()
    b = xp.view(S, kp // block, block)
    amax = b.abs().amax(-1, keepdim=True)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    codes = torch.round(b * (127.0 / safe)).clamp(-127, 127)
    return (codes * (safe / 127.0)).view(S, kp)[:, :K].to(x.dtype)


def get_mscale(scale, mscale=1.0):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn_inv_freq(c: Config):
    """-> (inv_freq float32 [dim/2], attention_factor float)."""
    dim, base = c.head_dim, c.rope_theta
    default = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float) / dim))
    rs = c.rope_scaling
    if not rs or rs.get("rope_type", rs.get("type")) in (None, "default") or MUTATIONS["no_yarn"]:
        return default, 1.0
    assert rs.get("rope_type", rs.get("type")) == "yarn"
    factor = rs["factor"]
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    orig = rs.get("original_max_position_embeddings") or c.max_position_embeddings
    attention_factor = rs.get("attention_factor")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1
    truncate = rs.get("truncate", True)

    def corr_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrap, interp = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrap_factor = 1 - ramp
    return interp * (1 - extrap_factor) + extrap * extrap_factor, attention_factor


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Model:
    def __init__(self, config: dict, tensors: dict, dtypes: dict | None = None, compute: str = "fp32"):
        self.c = c = Config(config)
        dtypes = dtypes or {}
        p = c.prefix
        self.int8_activations = compute == "fp32_a8"
        self.bf16_activations = compute == "fp32_abf16"
        self.int_weights = set()  # id() of the weights stored as int4
        self.bf16_input_weights = set()  # id() of the weights that meet bf16-rounded inputs in fp32_abf16
        if compute in ("fp32", "fp32_a8", "fp32_abf16"):
            self.dtype = torch.float32
        else:
            self.dtype = _TORCH_DTYPE.get(dtypes.get(p + "model.embed_tokens.weight"), torch.float32)
        used = set()

        def get(name, shape, keep_fp32=False):
            a = take_array(tensors, p + name, shape, used)
            t = torch.from_numpy(np.array(a, dtype=np.float32))
            return t if keep_fp32 else t.to(self.dtype)

        def linear(name, shape):
            module = p + name[:-len(".weight")]
            w = torch.from_numpy(dequantize_linear(tensors, dtypes, module, shape, c.quant, used)).to(self.dtype)
            if module + ".weight_packed" in tensors:
                self.int_weights.add(id(w))
            if dtypes.get(p + name) == "F8_E4M3" and not name.endswith("kv_b_proj.weight"):
                self.bf16_input_weights.add(id(w))
            return w

        Hd, H, V = c.hidden_size, c.num_attention_heads, c.vocab_size
        R, rope, nope, vd = c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim, c.v_head_dim
        self.embed = get("model.embed_tokens.weight", (V, Hd))
        self.layers = []
        for i in range(c.num_hidden_layers):
            q = f"model.layers.{i}."
            L = {"in_norm": get(q + "input_layernorm.weight", (Hd,)),
                 "post_norm": get(q + "post_attention_layernorm.weight", (Hd,)),
                 "kv_a": linear(q + "self_attn.kv_a_proj_with_mqa.weight", (R + rope, Hd)),
                 "kv_a_norm": get(q + "self_attn.kv_a_layernorm.weight", (R,)),
                 "kv_b": linear(q + "self_attn.kv_b_proj.weight", (H * (nope + vd), R)),
                 "o": linear(q + "self_attn.o_proj.weight", (Hd, H * vd))}
            if c.q_lora_rank:
                L["q_a"] = linear(q + "self_attn.q_a_proj.weight", (c.q_lora_rank, Hd))
                L["q_a_norm"] = get(q + "self_attn.q_a_layernorm.weight", (c.q_lora_rank,))
                L["q_b"] = linear(q + "self_attn.q_b_proj.weight", (H * c.qk_head_dim, c.q_lora_rank))
            else:
                L["q"] = linear(q + "self_attn.q_proj.weight", (H * c.qk_head_dim, Hd))
            if i >= c.first_k_dense_replace:
                E, I = c.n_routed_experts, c.moe_intermediate_size
                L["router"] = get(q + "mlp.gate.weight", (E, Hd))
                L["bias"] = get(q + "mlp.gate.e_score_correction_bias", (E,), keep_fp32=True)
                L["experts"] = [{n: linear(q + f"mlp.experts.{e}.{n}_proj.weight", (I, Hd) if n != "down" else (Hd, I))
                                 for n in ("gate", "up", "down")} for e in range(E)]
                S = I * c.n_shared_experts
                L["shared"] = {n: linear(q + f"mlp.shared_experts.{n}_proj.weight", (S, Hd) if n != "down" else (Hd, S))
                               for n in ("gate", "up", "down")}
            else:
                I = c.intermediate_size
                L["mlp"] = {n: linear(q + f"mlp.{n}_proj.weight", (I, Hd) if n != "down" else (Hd, I))
                            for n in ("gate", "up", "down")}
            self.layers.append(L)
        self.norm = get("model.norm.weight", (Hd,))
        self.lm_head = get("lm_head.weight", (V, Hd))
        if dtypes.get(p + "lm_head.weight") == "BF16":
            self.bf16_input_weights.add(id(self.lm_head))
        # Known and unused: MTP layers (num_nextn_predict_layers after the decoder), K2.5's vision tower/projector.
        mtp = re.compile(re.escape(p) + r"model\.layers\.(\d+)\.")
        unexpected = []
        for n in tensors:
            m = mtp.match(n)
            if n in used or (m and c.num_hidden_layers <= int(m.group(1)) < c.num_hidden_layers +
                             c.num_nextn_predict_layers):
                continue
            if c.model_type == "kimi_k25" and (n.startswith("vision_tower.") or n.startswith("mm_projector.")):
                continue
            unexpected.append(n)
        if unexpected:
            raise ValueError(f"unexpected tensors in checkpoint: {sorted(unexpected)[:8]}")
        self.inv_freq, self.attention_factor = yarn_inv_freq(c)

    @classmethod
    def from_dir(cls, model_dir: str, compute: str = "fp32") -> "Model":
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        t = safetensors_np.load_model_dir(model_dir)
        return cls(config, t, t.dtypes, compute)

    # -- primitives -----------------------------------------------------------------------------------------

    def _linear(self, x, w):
        if self.int8_activations and id(w) in self.int_weights:
            x = quantize_activations(x)
        if self.bf16_activations and id(w) in self.bf16_input_weights:
            x = x.to(torch.bfloat16).to(torch.float32)
        if self.dtype == torch.float32:
            return torch.nn.functional.linear(x, w)
        return torch.nn.functional.linear(x.float(), w.float()).to(self.dtype)

    def _matmul(self, a, b):
        if self.dtype == torch.float32:
            return torch.matmul(a, b)
        return torch.matmul(a.float(), b.float()).to(self.dtype)

    def _rms_norm(self, x, w, eps):
        dt = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(dt)

    def _rope(self, x, positions):
        """x [heads, S, rope]: the rotary embedding of DeepseekV3RotaryEmbedding at these positions."""
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * self.attention_factor).to(self.dtype)
        sin = (emb.sin() * self.attention_factor).to(self.dtype)
        if self.c.rope_interleave and not MUTATIONS["half_split_rope"]:
            h, s, d = x.shape
            x = x.view(h, s, d // 2, 2).transpose(3, 2).reshape(h, s, d)
        return x * cos[None] + rotate_half(x) * sin[None]

    def _attention(self, L, x, positions, cache):
        c = self.c
        S, H = x.shape[0], c.num_attention_heads
        R, rope, nope, vd = c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim, c.v_head_dim
        if c.q_lora_rank:
            q = self._linear(self._rms_norm(self._linear(x, L["q_a"]), L["q_a_norm"], 1e-6), L["q_b"])
        else:
            q = self._linear(x, L["q"])
        q = q.view(S, H, c.qk_head_dim).transpose(0, 1)                      # [H, S, 192]
        q_nope, q_rot = q[..., :nope], q[..., nope:]
        ckv = self._linear(x, L["kv_a"])
        c_kv, k_rot = ckv[:, :R], ckv[:, R:]
        if not MUTATIONS["no_kv_norm"]:
            c_kv = self._rms_norm(c_kv, L["kv_a_norm"], 1e-6)
        kv = self._linear(c_kv, L["kv_b"]).view(S, H, nope + vd).transpose(0, 1)
        k_nope, v = kv[..., :nope], kv[..., nope:]
        q_rot = self._rope(q_rot, positions)
        k_rot = self._rope(k_rot.view(1, S, rope), positions)
        q = torch.cat((q_nope, q_rot), dim=-1)
        k = torch.cat((k_nope, k_rot.expand(H, S, rope)), dim=-1)
        if cache is not None:
            if cache["k"] is not None:
                k = torch.cat((cache["k"], k), dim=1)
                v = torch.cat((cache["v"], v), dim=1)
                k_pos = torch.cat((cache["pos"], positions))
            else:
                k_pos = positions
            cache["k"], cache["v"], cache["pos"] = k, v, k_pos
        else:
            k_pos = positions
        scores = self._matmul(q, k.transpose(1, 2)) * c.scaling
        visible = k_pos[None, :] <= positions[:, None]
        mask = torch.where(visible, torch.zeros((), dtype=self.dtype),
                           torch.tensor(torch.finfo(self.dtype).min, dtype=self.dtype))
        probs = torch.nn.functional.softmax(scores + mask[None], dim=-1, dtype=torch.float32).to(self.dtype)
        out = self._matmul(probs, v).transpose(0, 1).reshape(S, H * vd)
        return self._linear(out, L["o"])

    def _mlp(self, w, x):
        return self._linear(torch.nn.functional.silu(self._linear(x, w["gate"])) * self._linear(x, w["up"]), w["down"])

    def _router(self, L, x):
        """-> (topk_indices [T, k], topk_weights [T, k] fp32)."""
        c = self.c
        E, k = c.n_routed_experts, c.num_experts_per_tok
        logits = torch.nn.functional.linear(x.float(), L["router"].float())
        scores = torch.softmax(logits, -1) if MUTATIONS["softmax_router"] else logits.sigmoid()
        bias = torch.zeros(E) if MUTATIONS["no_bias"] else L["bias"]
        choice = scores + bias[None]
        n_group, topk_group = (1, 1) if MUTATIONS["no_groups"] else (c.n_group, c.topk_group)
        group_scores = choice.view(-1, n_group, E // n_group).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, n_group, E // n_group).reshape(-1, E)
        choice = choice.masked_fill(~score_mask.bool(), 0.0)
        idx = torch.topk(choice, k=k, dim=-1, sorted=False)[1]
        weights = (choice if MUTATIONS["bias_in_weights"] else scores).gather(1, idx)
        if c.norm_topk_prob and not MUTATIONS["no_norm_topk"]:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        if not MUTATIONS["no_scaling_factor"]:
            weights = weights * c.routed_scaling_factor
        return idx, weights

    def _moe(self, L, x):
        idx, weights = self._router(L, x)
        out = torch.zeros(x.shape, dtype=torch.float32)
        for e, w in enumerate(L["experts"]):
            tok, slot = torch.where(idx == e)
            if tok.numel():
                y = self._mlp(w, x[tok]).float() * weights[tok, slot].unsqueeze(-1)
                out.index_add_(0, tok, y)
        out = out.to(self.dtype)
        if not MUTATIONS["no_shared"] and self.c.n_shared_experts:
            out = out + self._mlp(L["shared"], x)
        return out

    def routing(self, input_ids):
        """Per MoE layer: (layer, sorted chosen experts [S, k], router margins) for the fixture generator."""
        return self.forward(input_ids, record_routing=True)[2]

    def new_cache(self):
        return [{"k": None, "v": None, "pos": None} for _ in range(self.c.num_hidden_layers)]

    @torch.no_grad()
    def forward(self, input_ids, cache=None, record_routing=False):
        ids = torch.as_tensor(np.asarray(input_ids, dtype=np.int64))
        start = 0 if cache is None or cache[0]["pos"] is None else int(cache[0]["pos"][-1]) + 1
        positions = torch.arange(start, start + ids.numel(), dtype=torch.int64)
        x = self.embed[ids]
        hidden, routing = [], []
        eps = self.c.rms_norm_eps
        for i, L in enumerate(self.layers):
            hidden.append(x)
            x = x + self._attention(L, self._rms_norm(x, L["in_norm"], eps), positions, None if cache is None else cache[i])
            h = self._rms_norm(x, L["post_norm"], eps)
            if "router" in L:
                if record_routing:
                    routing.append((i, *self._routing_margins(L, h)))
                x = x + self._moe(L, h)
            else:
                x = x + self._mlp(L["mlp"], h)
        hidden.append(x)
        logits = self._linear(self._rms_norm(x, self.norm, eps), self.lm_head)
        if record_routing:
            return logits.float(), torch.stack(hidden).float(), routing
        return logits.float(), torch.stack(hidden).float()

    def _routing_margins(self, L, x):
        """The chosen experts and how far the choice is from flipping: the gap between the k-th and (k+1)-th
        masked choice score and between the topk_group-th and next group score (min over tokens)."""
        c = self.c
        E, k = c.n_routed_experts, c.num_experts_per_tok
        s = torch.nn.functional.linear(x.float(), L["router"].float()).sigmoid() + L["bias"][None]
        g = s.view(-1, c.n_group, E // c.n_group).topk(2, dim=-1)[0].sum(-1)
        gs = g.sort(-1, descending=True)[0]
        group_gap = float((gs[:, c.topk_group - 1] - gs[:, c.topk_group]).min()) if c.topk_group < c.n_group else 1.0
        idx, _ = self._router(L, x)
        keep = torch.zeros_like(g).scatter_(1, g.topk(c.topk_group, -1)[1], 1)
        masked = s.masked_fill(~keep.unsqueeze(-1).expand(-1, c.n_group, E // c.n_group).reshape(-1, E).bool(), 0.0)
        ms = masked.sort(-1, descending=True)[0]
        expert_gap = float((ms[:, k - 1] - ms[:, k]).min()) if k < E else 1.0
        return idx.sort(-1)[0].numpy(), min(group_gap, expert_gap)


def forward(model: Model, input_ids):
    """-> (logits [S, V], hidden_states [L+1, S, H]) float32 numpy."""
    logits, hidden = model.forward(input_ids)
    return logits.numpy(), hidden.numpy()


def forward_incremental(model: Model, input_ids, chunks=None):
    """The logits of the same sequence fed through the KV cache in chunks (default: one token at a time)."""
    ids = [int(t) for t in input_ids]
    cache, out, at = model.new_cache(), [], 0
    for n in chunks or [1] * len(ids):
        out.append(model.forward(ids[at:at + n], cache=cache)[0])
        at += n
    return torch.cat(out).numpy()
