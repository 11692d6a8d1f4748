#!/usr/bin/python3
"""Independent PyTorch reference for Llama-family decoders, following the Hugging Face modeling files.

Supported `model_type`s: llama, mistral, qwen2, qwen3. The code mirrors (function by function):
  * RMSNorm                 -> modeling_llama.py `LlamaRMSNorm.forward` (same in Qwen2/Qwen3/Mistral)
  * rope_inv_freq           -> modeling_rope_utils.py `_compute_default_rope_parameters`,
                               `_compute_linear_scaling_rope_parameters`, `_compute_llama3_parameters`
  * Model._rope_cos_sin     -> modeling_llama.py `LlamaRotaryEmbedding.forward`
  * rotate_half / _apply_rope -> modeling_llama.py `rotate_half`, `apply_rotary_pos_emb`
  * Model._attention, repeat_kv -> modeling_llama.py `LlamaAttention.forward`, `eager_attention_forward`, `repeat_kv`;
                               Qwen2 q/k/v bias (modular_qwen2.py `Qwen2Attention`), Qwen3 q_norm/k_norm
                               (modeling_qwen3.py `Qwen3Attention`)
  * layer_windows / _mask   -> masking_utils.py `causal_mask_function`, `sliding_window_overlay`;
                               configuration_qwen2.py/qwen3 `layer_types`; modular_mistral.py `MistralModel.forward`
  * Model._mlp              -> modeling_llama.py `LlamaMLP.forward`
  * Model.forward           -> `LlamaDecoderLayer.forward`, `LlamaModel.forward`, `LlamaForCausalLM.forward`

Two compute modes:
  "fp32": weights upcast to float32, every op in float32 (cos/sin, softmax, logits all float32).
  "hf":   the dtype behaviour of HF eager attention for the checkpoint dtype (bf16/f16 checkpoints): activations
          in the weight dtype; RMSNorm normalises in fp32 and casts back before the weight multiply; cos/sin are
          computed in fp32 then cast to the dtype; softmax in fp32 then cast; logits in the dtype. Matrix products
          accumulate in fp32 and round once to the dtype (what torch's CPU/GPU bf16 GEMMs do); element-wise ops
          round after every op, as torch does. For an fp32 checkpoint "hf" is identical to "fp32".

hidden_states[i] (i < L) is the residual stream entering layer i; hidden_states[L] is the output of the last layer
BEFORE the final norm (HF's own last `output_hidden_states` entry is post-norm; ours is pre-norm by design).

CLI: hf_reference.py --model DIR --ids 1,2,3 --out FILE.safetensors [--compute fp32|hf]
     writes input_ids (I64 [S]), logits (F32 [S,V]), hidden_states (F32 [L+1,S,H]).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3")

_TORCH_DTYPE = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
_CONFIG_DTYPE = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


# ---------------------------------------------------------------------------------------------------------------
# config


class Config:
    """The config.json fields a Llama-family decoder uses, with the HF defaults of each model_type."""

    def __init__(self, cfg: dict):
        self.raw = cfg
        self.model_type = cfg.get("model_type")
        if self.model_type not in SUPPORTED:
            raise ValueError(f"model_type {self.model_type!r} is not one of {SUPPORTED}")
        self.vocab_size = int(cfg["vocab_size"])
        self.hidden_size = int(cfg["hidden_size"])
        self.intermediate_size = int(cfg["intermediate_size"])
        self.num_layers = int(cfg["num_hidden_layers"])
        self.num_heads = int(cfg["num_attention_heads"])
        mt = self.model_type
        # Absent keys take the defaults of each HF config class (LlamaConfig, MistralConfig, Qwen2Config,
        # Qwen3Config); a null num_key_value_heads / head_dim means "derive it".
        kv_default = {"llama": None, "mistral": 8, "qwen2": 32, "qwen3": 32}[mt]
        self.num_kv_heads = int(cfg.get("num_key_value_heads", kv_default) or self.num_heads)
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        # head_dim if given (not null) else hidden_size // heads; Qwen3Config's default is 128.
        self.head_dim = int(cfg.get("head_dim", 128 if mt == "qwen3" else None) or self.hidden_size // self.num_heads)
        self.rms_norm_eps = float(cfg.get("rms_norm_eps", 1e-6))  # every one of the four classes
        self.rope_theta = float(cfg.get("rope_theta", 1e4))       # likewise
        self.rope_scaling = cfg.get("rope_scaling")
        self.partial_rotary_factor = float(cfg.get("partial_rotary_factor", 1.0))
        if self.partial_rotary_factor != 1.0:
            raise NotImplementedError("partial_rotary_factor != 1")
        self.tie_word_embeddings = bool(cfg.get("tie_word_embeddings", False))
        self.hidden_act = cfg.get("hidden_act", "silu")
        if self.hidden_act not in ("silu", "swish"):
            raise NotImplementedError(f"hidden_act {self.hidden_act}")
        # Which projections carry a bias (module definitions of each modeling file).
        attn_bias = bool(cfg.get("attention_bias", False))
        if mt == "llama":
            self.qkv_bias, self.o_bias, self.mlp_bias = attn_bias, attn_bias, bool(cfg.get("mlp_bias", False))
        elif mt == "qwen2":
            self.qkv_bias, self.o_bias, self.mlp_bias = True, False, False
        elif mt == "qwen3":
            self.qkv_bias, self.o_bias, self.mlp_bias = attn_bias, attn_bias, False
        else:  # mistral
            self.qkv_bias, self.o_bias, self.mlp_bias = False, False, False
        self.qk_norm = mt == "qwen3"
        self.windows = layer_windows(cfg, mt, self.num_layers)


def layer_windows(cfg: dict, model_type: str, num_layers: int) -> list:
    """Per layer: the sliding window W (key j visible to query i iff i - W < j <= i) or None for full causal."""
    if model_type == "mistral":
        # MistralConfig default sliding_window=4096; MistralModel uses the sliding mask on every layer if not None.
        w = cfg.get("sliding_window", 4096)
        return [int(w) if w is not None else None] * num_layers
    if model_type in ("qwen2", "qwen3"):
        # Qwen2Config/Qwen3Config: sliding_window = sliding_window if use_sliding_window else None;
        # layer_types[i] = "sliding_attention" if sliding_window is not None and i >= max_window_layers.
        w = cfg.get("sliding_window", 4096) if cfg.get("use_sliding_window", False) else None
        types = cfg.get("layer_types")
        if types is None:
            mwl = int(cfg.get("max_window_layers", 28))
            types = ["sliding_attention" if w is not None and i >= mwl else "full_attention"
                     for i in range(num_layers)]
        return [int(w) if (t == "sliding_attention" and w is not None) else None for t in types[:num_layers]]
    return [None] * num_layers


def rope_inv_freq(cfg: Config) -> torch.Tensor:
    """float32 [D/2], exactly as modeling_rope_utils computes it (same torch ops in the same order)."""
    dim = int(cfg.head_dim * cfg.partial_rotary_factor)
    base = cfg.rope_theta
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))
    rs = cfg.rope_scaling
    if not rs:
        return inv_freq
    rope_type = rs.get("rope_type", rs.get("type", "default"))
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return inv_freq / float(rs["factor"])
    if rope_type == "llama3":
        factor = rs["factor"]
        low_freq_factor = rs["low_freq_factor"]
        high_freq_factor = rs["high_freq_factor"]
        old_context_len = rs["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    raise NotImplementedError(f"rope_scaling type {rope_type!r}")


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[Hkv, S, D] -> [Hkv*n_rep, S, D] via expand+reshape, so query head h reads kv head h // n_rep."""
    hkv, s, d = x.shape
    if n_rep == 1:
        return x
    return x[:, None].expand(hkv, n_rep, s, d).reshape(hkv * n_rep, s, d)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


# ---------------------------------------------------------------------------------------------------------------
# model


_IGNORED = re.compile(r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$")


class Model:
    """A loaded checkpoint in one compute mode. `forward` runs a chunk of tokens, optionally against a KV cache."""

    def __init__(self, config: dict, tensors: dict, dtypes: dict | None = None, compute: str = "fp32"):
        self.cfg = Config(config)
        c = self.cfg
        dtypes = dtypes or {}
        if compute == "fp32":
            self.dtype = torch.float32
        elif compute == "hf":
            stored = dtypes.get("model.embed_tokens.weight")
            if stored in _TORCH_DTYPE:
                self.dtype = _TORCH_DTYPE[stored]
            else:
                self.dtype = _CONFIG_DTYPE.get(config.get("torch_dtype") or config.get("dtype"), torch.float32)
        else:
            raise ValueError(f"compute must be 'fp32' or 'hf', not {compute!r}")
        self.compute = compute

        used = set()

        def get(name, shape):
            a = safetensors_np.take_array(tensors, name, shape, used)
            return torch.from_numpy(np.array(a, dtype=np.float32)).to(self.dtype)

        Hd, D, H, Hkv, I, V = c.hidden_size, c.head_dim, c.num_heads, c.num_kv_heads, c.intermediate_size, c.vocab_size
        self.embed = get("model.embed_tokens.weight", (V, Hd))
        self.layers = []
        for i in range(c.num_layers):
            p = f"model.layers.{i}."
            L = {
                "in_norm": get(p + "input_layernorm.weight", (Hd,)),
                "post_norm": get(p + "post_attention_layernorm.weight", (Hd,)),
                "q": get(p + "self_attn.q_proj.weight", (H * D, Hd)),
                "k": get(p + "self_attn.k_proj.weight", (Hkv * D, Hd)),
                "v": get(p + "self_attn.v_proj.weight", (Hkv * D, Hd)),
                "o": get(p + "self_attn.o_proj.weight", (Hd, H * D)),
                "gate": get(p + "mlp.gate_proj.weight", (I, Hd)),
                "up": get(p + "mlp.up_proj.weight", (I, Hd)),
                "down": get(p + "mlp.down_proj.weight", (Hd, I)),
            }
            if c.qkv_bias:
                L["q_b"] = get(p + "self_attn.q_proj.bias", (H * D,))
                L["k_b"] = get(p + "self_attn.k_proj.bias", (Hkv * D,))
                L["v_b"] = get(p + "self_attn.v_proj.bias", (Hkv * D,))
            if c.o_bias:
                L["o_b"] = get(p + "self_attn.o_proj.bias", (Hd,))
            if c.mlp_bias:
                L["gate_b"] = get(p + "mlp.gate_proj.bias", (I,))
                L["up_b"] = get(p + "mlp.up_proj.bias", (I,))
                L["down_b"] = get(p + "mlp.down_proj.bias", (Hd,))
            if c.qk_norm:
                L["q_norm"] = get(p + "self_attn.q_norm.weight", (D,))
                L["k_norm"] = get(p + "self_attn.k_norm.weight", (D,))
            self.layers.append(L)
        self.norm = get("model.norm.weight", (Hd,))
        if c.tie_word_embeddings:
            # LlamaForCausalLM._tied_weights_keys: lm_head shares embed_tokens (a stored lm_head is overridden).
            used.add("lm_head.weight")
            self.lm_head = self.embed
        else:
            self.lm_head = get("lm_head.weight", (V, Hd))
        unexpected = []
        for n in tensors:
            if n in used or _IGNORED.match(n):
                continue
            m = re.match(r"^model\.layers\.(\d+)\.", n)
            if m and int(m.group(1)) >= c.num_layers:
                continue  # extra layers beyond num_hidden_layers (e.g. MTP heads) are not part of the decoder
            unexpected.append(n)
        if unexpected:
            raise ValueError(f"unexpected tensors in checkpoint: {sorted(unexpected)[:8]}")
        self.inv_freq = rope_inv_freq(c)

    @classmethod
    def from_dir(cls, model_dir: str, compute: str = "fp32") -> "Model":
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        tensors = safetensors_np.load_model_dir(model_dir)
        return cls(config, tensors, tensors.dtypes, compute)

    # -- primitives ----------------------------------------------------------------------------------------------

    def _linear(self, x, w, b=None):
        """nn.Linear: y = x·wᵀ + b, fp32 accumulation, one rounding to the activation dtype."""
        if self.dtype == torch.float32:
            return torch.nn.functional.linear(x, w, b)
        y = torch.nn.functional.linear(x.float(), w.float(), None if b is None else b.float())
        return y.to(self.dtype)

    def _matmul(self, a, b):
        if self.dtype == torch.float32:
            return torch.matmul(a, b)
        return torch.matmul(a.float(), b.float()).to(self.dtype)

    def _rms_norm(self, x, weight):
        """LlamaRMSNorm.forward: normalise in fp32, cast back to the input dtype, then multiply by the weight."""
        input_dtype = x.dtype
        h = x.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.cfg.rms_norm_eps)
        return weight * h.to(input_dtype)

    def _rope_cos_sin(self, positions):
        """LlamaRotaryEmbedding.forward: fp32 angles p*inv_freq, cat(freqs, freqs), cos/sin cast to the dtype."""
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def _apply_rope(x, cos, sin):
        # x: [heads, S, D]; cos/sin: [S, D] (apply_rotary_pos_emb with unsqueeze over the head axis)
        return (x * cos[None]) + (rotate_half(x) * sin[None])

    def _mask(self, q_pos, k_pos, window):
        """Additive mask [Sq, Sk]: 0 where visible, finfo(dtype).min elsewhere (HF eager path)."""
        visible = k_pos[None, :] <= q_pos[:, None]
        if window is not None:
            visible &= k_pos[None, :] > q_pos[:, None] - window
        zero = torch.zeros((), dtype=self.dtype)
        return torch.where(visible, zero, torch.tensor(torch.finfo(self.dtype).min, dtype=self.dtype))

    def _attention(self, L, x, positions, cache_entry, window):
        c = self.cfg
        S = x.shape[0]
        H, Hkv, D = c.num_heads, c.num_kv_heads, c.head_dim
        q = self._linear(x, L["q"], L.get("q_b")).view(S, H, D)
        k = self._linear(x, L["k"], L.get("k_b")).view(S, Hkv, D)
        v = self._linear(x, L["v"], L.get("v_b")).view(S, Hkv, D)
        if c.qk_norm:  # Qwen3: per-head RMSNorm over D, before RoPE; not on v
            q = self._rms_norm(q, L["q_norm"])
            k = self._rms_norm(k, L["k_norm"])
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [heads, S, D]
        cos, sin = self._rope_cos_sin(positions)
        q = self._apply_rope(q, cos, sin)
        k = self._apply_rope(k, cos, sin)
        if cache_entry is not None:
            if cache_entry["k"] is not None:
                k = torch.cat((cache_entry["k"], k), dim=1)
                v = torch.cat((cache_entry["v"], v), dim=1)
                k_pos = torch.cat((cache_entry["pos"], positions))
            else:
                k_pos = positions
            cache_entry["k"], cache_entry["v"], cache_entry["pos"] = k, v, k_pos
        else:
            k_pos = positions
        n_rep = H // Hkv
        k_rep = repeat_kv(k, n_rep)
        v_rep = repeat_kv(v, n_rep)
        scaling = D ** -0.5
        scores = self._matmul(q, k_rep.transpose(1, 2)) * scaling
        scores = scores + self._mask(positions, k_pos, window)[None]
        probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
        out = self._matmul(probs, v_rep)  # [H, S, D]
        out = out.transpose(0, 1).reshape(S, H * D)
        return self._linear(out, L["o"], L.get("o_b"))

    def _mlp(self, L, x):
        g = self._linear(x, L["gate"], L.get("gate_b"))
        u = self._linear(x, L["up"], L.get("up_b"))
        return self._linear(torch.nn.functional.silu(g) * u, L["down"], L.get("down_b"))

    # -- forward -------------------------------------------------------------------------------------------------

    def new_cache(self) -> list:
        return [{"k": None, "v": None, "pos": None} for _ in range(self.cfg.num_layers)]

    @torch.no_grad()
    def forward(self, input_ids, cache: list | None = None, start_pos: int | None = None):
        """Run tokens `input_ids` ([S] ints). Without a cache the positions are 0..S-1; with one they continue
        after the cached tokens. Returns (logits [S,V] float32, hidden_states [L+1,S,H] float32) as torch tensors."""
        ids = torch.as_tensor(np.asarray(input_ids, dtype=np.int64))
        if ids.dim() != 1:
            raise ValueError("input_ids must be 1-D")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab_size):
            raise ValueError("input id out of range")
        if start_pos is None:
            start_pos = 0 if cache is None or cache[0]["pos"] is None else int(cache[0]["pos"][-1]) + 1
        positions = torch.arange(start_pos, start_pos + ids.numel(), dtype=torch.int64)
        x = self.embed[ids]
        hidden = []
        for i, L in enumerate(self.layers):
            hidden.append(x)
            r = x
            h = self._rms_norm(x, L["in_norm"])
            h = self._attention(L, h, positions, None if cache is None else cache[i], self.cfg.windows[i])
            x = r + h
            r = x
            h = self._rms_norm(x, L["post_norm"])
            x = r + self._mlp(L, h)
        hidden.append(x)
        logits = self._linear(self._rms_norm(x, self.norm), self.lm_head)
        return logits.float(), torch.stack(hidden).float()


_MODELS: dict = {}


def load_model(model_dir: str, compute: str = "fp32") -> Model:
    key = (os.path.abspath(model_dir), compute)
    if key not in _MODELS:
        _MODELS[key] = Model.from_dir(model_dir, compute)
    return _MODELS[key]


def forward(model_dir, input_ids, compute: str = "fp32"):
    """-> (logits [S,V] float32 np.ndarray, hidden_states [L+1,S,H] float32 np.ndarray). `model_dir` may also be
    a Model instance."""
    model = model_dir if isinstance(model_dir, Model) else load_model(model_dir, compute)
    logits, hidden = model.forward(input_ids)
    return logits.numpy(), hidden.numpy()


def forward_incremental(model_dir, input_ids, compute: str = "fp32", chunks=None):
    """The same sequence fed through an explicit KV cache in chunks (default: one token at a time)."""
    model = model_dir if isinstance(model_dir, Model) else load_model(model_dir, compute)
    ids = list(int(t) for t in input_ids)
    chunks = chunks or [1] * len(ids)
    if sum(chunks) != len(ids):
        raise ValueError("chunks must add up to the sequence length")
    cache = model.new_cache()
    logits, hidden, at = [], [], 0
    for n in chunks:
        lg, hs = model.forward(ids[at:at + n], cache=cache)
        logits.append(lg)
        hidden.append(hs)
        at += n
    return torch.cat(logits).numpy(), torch.cat(hidden, dim=1).numpy()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint directory (config.json + safetensors)")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="output .safetensors file")
    ap.add_argument("--compute", default="fp32", choices=("fp32", "hf"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ids = np.array([int(t) for t in args.ids.split(",") if t.strip()], dtype=np.int64)
    logits, hidden = forward(args.model, ids, args.compute)
    safetensors_np.save(args.out, {"input_ids": ids, "logits": logits, "hidden_states": hidden},
                        {"input_ids": "I64", "logits": "F32", "hidden_states": "F32"},
                        {"compute": args.compute, "model": os.path.basename(os.path.abspath(args.model))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
