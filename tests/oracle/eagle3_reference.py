#!/usr/bin/python3
"""Independent PyTorch reference for EAGLE-3 draft models (docs: /work/shared/docs/eagle3-spec.md §1–§4, §7).

    drafter = Drafter.from_dir(drafter_dir, target_dir)
    logits_draft, h_next = drafter.forward(token_ids, hidden, positions, cache, from_target=True|False, mask=None)

Layouts read (spec §3): the official EAGLE-3 checkpoint (`LlamaForCausalLM`, `midlayer.*`), SpecForge
(`LlamaForCausalLMEagle3`, `midlayer.*`, optional `fc_norm.{i}`, `eagle_config`), vLLM's flat HF config
(`Eagle3LlamaForCausalLM`, `midlayer.*` or `layers.0.*`) and vllm-project/speculators (`Eagle3Speculator`,
`transformer_layer_config`, `layers.{i}.*`, `embed_tokens`, `input_norm`, `fc_norm.{i}`). Every contract is checked
while loading (strict tensor accounting, shapes, dtypes, d2t/t2d) and a violation raises `DrafterError` whose
message names the key, the expected and the found values.

Forward pass (spec §1.1/§1.2), all in float32 (weights upcast):
    from_target=True  hidden = cat of num_aux target residual-stream states [M, num_aux*H_t];
                      optional input_norm over the whole concat (speculators norm_before_fc) or per-chunk
                      fc_norm.{i}; g = fc(hidden)
    from_target=False hidden = the drafter's own h_next of the parent position [M, H]; fc skipped; g = hidden
    e   = embedding of the token (drafter's embed_tokens.weight if present, else the target's)
    u   = cat[input_layernorm(e), hidden_norm(g)]            (2H)
    res = hidden_norm(g) if norm_before_residual else g
    h1  = res + o_proj(attn(q,k,v from u; RoPE from the drafter's own config; causal GQA over the drafter cache))
    h   = h1 + mlp(post_attention_layernorm(h1))
    extra layers (layers.1.* ...): standard HF Llama decoder layers on H-wide input
    logits_draft = lm_head(norm(h))                           [M, Vd]
    h_next = norm(h) if speculators norm_output else h        [M, H]
Draft id d maps to target id d + d2t[d].

Which attention keys a query sees: by default key j is visible to query i iff pos_j <= pos_i (positions of the
cache entries and of the new tokens), like hf_reference's cache. Tree steps (siblings share a position) pass an
explicit boolean `mask` [M, cached + M] (True = visible).
"""

from __future__ import annotations

import json
import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_reference as hf  # noqa: E402
import safetensors_np  # noqa: E402


class DrafterError(ValueError):
    """A drafter checkpoint breaks one of the EAGLE-3 contracts (the message names key, expected, found)."""


# architectures value -> layout name
ARCH_LAYOUT = {
    "LlamaForCausalLM": "official",            # SafeAILab/EAGLE eagle/traineagle3/config.json
    "LlamaForCausalLMEagle3": "specforge",     # SpecForge / SGLang
    "Eagle3LlamaForCausalLM": "vllm",          # vLLM registry name, flat HF config
    "Eagle3Speculator": "speculators",         # vllm-project/speculators
}

FLOAT_DTYPES = ("F32", "BF16", "F16")


def default_aux_layers(num_layers: int) -> list:
    """The default captured layers of every implementation, in the input-of-layer convention (spec §4)."""
    return [2, num_layers // 2, num_layers - 3]


def _fmt_shape(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


# ---------------------------------------------------------------------------------------------------------------
# config resolution


class DrafterConfig:
    """Everything the forward pass needs, resolved from the drafter's config.json and the target's.

    layout, architecture, hidden_size (H), target_hidden_size (H_t), num_layers, num_heads, num_kv_heads, head_dim,
    intermediate_size, rms_norm_eps, vocab_size (V), draft_vocab_size (Vd), aux_layers (input-of-layer convention,
    ascending), aux_layers_config (as written), aux_convention ("input" | "output+1"), norm_before_residual,
    norm_before_fc, fc_norm, norm_output (speculators meaning: feed the post-norm hidden forward), rope_theta,
    rope_scaling."""

    def __init__(self, cfg: dict, target_cfg: dict):
        self.raw = cfg
        arch = cfg.get("architectures")
        if not isinstance(arch, list) or len(arch) != 1:
            raise DrafterError(f"config.json: architectures: expected a list of one of {sorted(ARCH_LAYOUT)}, "
                               f"found {arch!r}")
        if arch[0] not in ARCH_LAYOUT:
            raise DrafterError(f"config.json: architectures: expected one of {sorted(ARCH_LAYOUT)}, "
                               f"found {arch[0]}")
        self.architecture = arch[0]
        self.layout = ARCH_LAYOUT[arch[0]]
        if self.layout == "speculators":
            if cfg.get("speculators_model_type") != "eagle3":
                raise DrafterError(f"config.json: speculators_model_type: expected \"eagle3\", found "
                                   f"{cfg.get('speculators_model_type')!r}")
            lc = cfg.get("transformer_layer_config")
            if not isinstance(lc, dict):
                raise DrafterError("config.json: transformer_layer_config: expected an object (a LlamaConfig), "
                                   f"found {lc!r}")
        else:
            lc = cfg
        mt = lc.get("model_type", "llama")
        if mt != "llama":
            raise DrafterError(f"config.json: model_type: expected \"llama\", found {mt!r}")

        def req(key):
            if key not in lc or lc[key] is None:
                where = "transformer_layer_config." if self.layout == "speculators" else ""
                raise DrafterError(f"config.json: {where}{key}: missing")
            return lc[key]

        self.hidden_size = int(req("hidden_size"))
        self.intermediate_size = int(req("intermediate_size"))
        self.num_layers = int(lc.get("num_hidden_layers", 1))
        self.num_heads = int(req("num_attention_heads"))
        self.num_kv_heads = int(lc.get("num_key_value_heads") or self.num_heads)
        if self.num_heads % self.num_kv_heads:
            raise DrafterError(f"config.json: num_attention_heads {self.num_heads} is not a multiple of "
                               f"num_key_value_heads {self.num_kv_heads}")
        # LlamaConfig / SpecForge: head_dim if given, else hidden_size // heads (the official cnets.py always
        # uses hidden_size // heads; our fixtures only set head_dim where the two agree or the layout honours it).
        self.head_dim = int(lc.get("head_dim") or self.hidden_size // self.num_heads)
        self.rms_norm_eps = float(lc.get("rms_norm_eps", 1e-6))  # LlamaConfig default
        self.rope_theta = float(lc.get("rope_theta", 10000.0))    # cnets.py _init_rope / LlamaConfig default
        self.rope_scaling = lc.get("rope_scaling")
        self.hidden_act = lc.get("hidden_act", "silu")
        if self.hidden_act not in ("silu", "swish"):
            raise DrafterError(f"config.json: hidden_act: expected \"silu\", found {self.hidden_act!r}")
        self.vocab_size = int(req("vocab_size"))
        top = cfg  # draft_vocab_size, target_hidden_size and the flags are top-level in every layout
        self.draft_vocab_size = int(top.get("draft_vocab_size") or self.vocab_size)

        # flags (spec §1.2, §7.6/7.7): written explicitly in every fixture; defaults are each layout's own.
        if self.layout == "speculators":
            self.norm_before_residual = bool(top.get("norm_before_residual", False))  # Eagle3SpeculatorConfig
            self.norm_before_fc = bool(top.get("norm_before_fc", False))
            self.fc_norm = bool(top.get("fc_norm", False))
            self.norm_output = bool(top.get("norm_output", False))
        else:
            self.norm_before_residual = bool(top.get("norm_before_residual", False))
            self.norm_before_fc = bool(top.get("norm_before_fc", False))
            self.fc_norm = bool(top.get("fc_norm", False))
            if self.layout == "vllm":
                # vLLM forwards speculators' flags into the flat config: speculators meaning.
                self.norm_output = bool(top.get("norm_output", False))
            else:
                # SpecForge: norm_output = "apply self.norm before lm_head" (default True); not speculators' flag.
                if top.get("norm_output", True) is not True:
                    raise DrafterError("config.json: norm_output: SpecForge's norm_output=false (no final norm "
                                       "before lm_head) is not supported; expected true or absent")
                self.norm_output = False
        if self.norm_before_fc and self.fc_norm:
            raise DrafterError("config.json: norm_before_fc and fc_norm are both true; at most one may be set")

        # target
        self.target_vocab_size = int(target_cfg["vocab_size"])
        self.target_num_layers = int(target_cfg["num_hidden_layers"])
        t_hidden = int(target_cfg["hidden_size"])
        declared = top.get("target_hidden_size")
        self.target_hidden_size = int(declared) if declared is not None else self.hidden_size
        if self.target_hidden_size != t_hidden:
            raise DrafterError(f"config.json: target_hidden_size: drafter expects {self.target_hidden_size}, "
                               f"the target's hidden_size is {t_hidden}")
        if self.vocab_size != self.target_vocab_size:
            raise DrafterError(f"config.json: vocab_size: drafter has {self.vocab_size}, the target's vocab_size "
                               f"is {self.target_vocab_size}")
        if not 0 < self.draft_vocab_size <= self.vocab_size:
            raise DrafterError(f"config.json: draft_vocab_size: expected 1..{self.vocab_size}, found "
                               f"{self.draft_vocab_size}")

        # aux layers (spec §4, §7.1)
        ec = top.get("eagle_config") or {}
        if ec and ec.get("use_aux_hidden_state", True) is not True:
            raise DrafterError("config.json: eagle_config.use_aux_hidden_state: expected true, found "
                               f"{ec.get('use_aux_hidden_state')!r}")
        ids, conv, key = None, "input", None
        if self.layout in ("speculators", "vllm") and top.get("eagle_aux_hidden_state_layer_ids") is not None:
            ids, key = top["eagle_aux_hidden_state_layer_ids"], "eagle_aux_hidden_state_layer_ids"
        elif ec.get("eagle_aux_hidden_state_layer_ids") is not None:
            ids, key = ec["eagle_aux_hidden_state_layer_ids"], "eagle_config.eagle_aux_hidden_state_layer_ids"
            # SpecForge/SGLang: explicit ids name the OUTPUT of layer j (= input of j+1); vLLM uses them as-is.
            conv = "input" if self.layout == "vllm" else "output+1"
        elif self.layout != "speculators" and top.get("eagle_aux_hidden_state_layer_ids") is not None:
            raise DrafterError("config.json: eagle_aux_hidden_state_layer_ids: top-level key in a "
                               f"{self.layout} config (only speculators/vLLM read it); use eagle_config")
        self.aux_layers_config = None if ids is None else [int(i) for i in ids]
        self.aux_convention = conv
        if ids is None:
            resolved = default_aux_layers(self.target_num_layers)
            key = "default"
        else:
            if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
                raise DrafterError(f"config.json: {key}: expected a list of layer ids, found {ids!r}")
            resolved = [i + 1 for i in ids] if conv == "output+1" else list(ids)
        L = self.target_num_layers
        for raw, r in zip(ids or resolved, resolved):
            if not 0 <= r <= L:
                raise DrafterError(f"config.json: {key}: layer id {raw} is out of range for a target with {L} layers "
                                   f"(valid input-of-layer ids 0..{L})")
        if len(set(resolved)) != len(resolved):
            raise DrafterError(f"config.json: {key}: duplicate layer ids {ids}")
        self.aux_layers_key = key
        self.aux_layers = sorted(resolved)
        self.num_aux = len(self.aux_layers)

    def flags(self) -> dict:
        return {"norm_before_residual": self.norm_before_residual, "norm_before_fc": self.norm_before_fc,
                "fc_norm": self.fc_norm, "norm_output": self.norm_output}

    def rope_namespace(self):
        return types.SimpleNamespace(head_dim=self.head_dim, partial_rotary_factor=1.0, rope_theta=self.rope_theta,
                                     rope_scaling=self.rope_scaling)

    def summary(self) -> dict:
        return {"layout": self.layout, "architecture": self.architecture, "hidden_size": self.hidden_size,
                "target_hidden_size": self.target_hidden_size, "num_layers": self.num_layers,
                "num_heads": self.num_heads, "num_kv_heads": self.num_kv_heads, "head_dim": self.head_dim,
                "intermediate_size": self.intermediate_size, "rms_norm_eps": self.rms_norm_eps,
                "vocab_size": self.vocab_size, "draft_vocab_size": self.draft_vocab_size,
                "aux_layers": self.aux_layers, "aux_layers_config": self.aux_layers_config,
                "aux_layers_key": self.aux_layers_key, "aux_convention": self.aux_convention,
                "rope_theta": self.rope_theta, "rope_scaling": self.rope_scaling, **self.flags()}


# ---------------------------------------------------------------------------------------------------------------
# d2t / t2d


def check_vocab_maps(d2t, d2t_dtype, t2d, t2d_dtype, Vd: int, V: int) -> np.ndarray:
    """Validates d2t (offsets, I64 [Vd]) and t2d (BOOL [V]); returns the target id of every draft id."""
    if d2t is None:
        if Vd != V:
            raise DrafterError(f"d2t: missing, but draft_vocab_size {Vd} differs from vocab_size {V} (a reduced "
                               f"draft vocabulary needs the d2t map)")
        targets = np.arange(V, dtype=np.int64)
    else:
        if d2t_dtype != "I64":
            raise DrafterError(f"d2t: dtype expected I64, found {d2t_dtype}")
        if d2t.ndim != 1 or d2t.shape[0] != Vd:
            raise DrafterError(f"d2t: shape expected [{Vd}] (draft_vocab_size), found {_fmt_shape(d2t.shape)}")
        d2t = d2t.astype(np.int64)
        targets = np.arange(Vd, dtype=np.int64) + d2t
        bad_range = np.nonzero((targets < 0) | (targets >= V))[0]
        bad_order = np.nonzero(np.diff(targets) <= 0)[0]
        if bad_range.size or bad_order.size:
            # The known export bug: absolute target ids stored instead of offsets.
            absolute_ok = (np.all(d2t >= 0) and np.all(d2t < V) and np.all(np.diff(d2t) > 0)
                           and (t2d is None or (t2d.shape == (V,) and bool(np.all(t2d.astype(bool)[d2t])))))
            if absolute_ok and Vd > 1:
                i = int(bad_range[0]) if bad_range.size else int(bad_order[0]) + 1
                raise DrafterError(f"d2t: holds absolute target ids, not offsets (target = draft + d2t[draft]): "
                                   f"draft id {i} maps to {int(targets[i])}; d2t[{i}] = {int(d2t[i])} is itself a "
                                   f"valid target id")
            if bad_range.size:
                i = int(bad_range[0])
                raise DrafterError(f"d2t: draft id {i} maps to target id {int(targets[i])}, outside the target "
                                   f"vocabulary 0..{V - 1} (vocab_size {V})")
            i = int(bad_order[0])
            raise DrafterError(f"d2t: target ids must be strictly increasing: draft id {i + 1} maps to "
                               f"{int(targets[i + 1])} after draft id {i} -> {int(targets[i])}")
    if t2d is not None:
        if t2d_dtype != "BOOL":
            raise DrafterError(f"t2d: dtype expected BOOL, found {t2d_dtype}")
        if t2d.ndim != 1 or t2d.shape[0] != V:
            raise DrafterError(f"t2d: shape expected [{V}] (target vocab_size), found {_fmt_shape(t2d.shape)}")
        want = np.zeros(V, dtype=bool)
        want[targets] = True
        diff = np.nonzero(want != t2d.astype(bool))[0]
        if diff.size:
            j = int(diff[0])
            raise DrafterError(f"t2d disagrees with d2t at target id {j}: t2d[{j}] = {bool(t2d[j])}, d2t "
                               f"{'maps a draft id to it' if want[j] else 'maps no draft id to it'} "
                               f"(t2d has {int(t2d.astype(bool).sum())} true entries, draft_vocab_size {Vd})")
    return targets


# ---------------------------------------------------------------------------------------------------------------
# the drafter


def _rms_norm(x, w, eps):
    """LlamaRMSNorm in float32 (hf_reference.Model._rms_norm with dtype float32)."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


class Drafter:
    """A loaded EAGLE-3 drafter (weights float32 torch tensors) plus what it needs from its target."""

    def __init__(self, cfg: DrafterConfig, tensors: dict, dtypes: dict, target_embed: np.ndarray | None):
        self.cfg = c = cfg
        H, Ht, D, nh, nkv, I = (c.hidden_size, c.target_hidden_size, c.head_dim, c.num_heads, c.num_kv_heads,
                                c.intermediate_size)
        V, Vd = c.vocab_size, c.draft_vocab_size
        self.stored_dtypes = dict(dtypes)
        names = set(tensors)
        has_mid = any(n.startswith("midlayer.") for n in names)
        has_l0 = any(n.startswith("layers.0.") for n in names)
        if has_mid and has_l0:
            raise DrafterError("both midlayer.* and layers.0.* tensors are present; a checkpoint must name the "
                               "first decoder layer one way")
        p0 = "midlayer." if has_mid or not has_l0 and c.layout != "speculators" else "layers.0."
        self.layer0_prefix = p0
        used = set()

        def get(name, shape, required=True):
            if name not in tensors:
                if not required:
                    return None
                raise DrafterError(f"missing tensor {name} (expected shape {_fmt_shape(shape)})")
            a = tensors[name]
            dt = dtypes.get(name)
            if dt not in FLOAT_DTYPES:
                raise DrafterError(f"{name}: dtype expected one of {'/'.join(FLOAT_DTYPES)}, found {dt}")
            if tuple(a.shape) != tuple(shape):
                raise DrafterError(f"{name}: shape expected {_fmt_shape(shape)}, found {_fmt_shape(a.shape)}")
            used.add(name)
            return torch.from_numpy(np.array(a, dtype=np.float32))

        W = c.num_aux * Ht
        self.fc = get("fc.weight", (H, W))
        self.input_norm = get("input_norm.weight", (W,)) if c.norm_before_fc else None
        self.fc_norms = [get(f"fc_norm.{i}.weight", (Ht,)) for i in range(c.num_aux)] if c.fc_norm else None
        self.layers = []
        for li in range(c.num_layers):
            p = p0 if li == 0 else f"layers.{li}."
            inw = 2 * H if li == 0 else H
            L = {
                "in_norm": get(p + "input_layernorm.weight", (H,)),
                "q": get(p + "self_attn.q_proj.weight", (nh * D, inw)),
                "k": get(p + "self_attn.k_proj.weight", (nkv * D, inw)),
                "v": get(p + "self_attn.v_proj.weight", (nkv * D, inw)),
                "o": get(p + "self_attn.o_proj.weight", (H, nh * D)),
                "post_norm": get(p + "post_attention_layernorm.weight", (H,)),
                "gate": get(p + "mlp.gate_proj.weight", (I, H)),
                "up": get(p + "mlp.up_proj.weight", (I, H)),
                "down": get(p + "mlp.down_proj.weight", (H, I)),
            }
            if li == 0:
                L["hidden_norm"] = get(p + "hidden_norm.weight", (H,))
            self.layers.append(L)
        self.norm = get("norm.weight", (H,))
        self.lm_head = get("lm_head.weight", (Vd, H))
        if "embed_tokens.weight" in tensors:
            self.embed = get("embed_tokens.weight", (V, H))
            self.embed_source = "drafter"
        else:
            if target_embed is None:
                raise DrafterError("missing tensor embed_tokens.weight and no target embedding was given")
            if tuple(target_embed.shape) != (V, H):
                raise DrafterError(f"target model.embed_tokens.weight: shape expected {_fmt_shape((V, H))} "
                                   f"(drafter vocab_size, hidden_size), found {_fmt_shape(target_embed.shape)}")
            self.embed = torch.from_numpy(np.array(target_embed, dtype=np.float32))
            self.embed_source = "target"
        d2t = tensors.get("d2t")
        t2d = tensors.get("t2d")
        used.update(n for n in ("d2t", "t2d") if n in tensors)
        unexpected = sorted(n for n in names if n not in used)
        if unexpected:
            raise DrafterError(f"unexpected tensor {unexpected[0]}" + (f" (and {len(unexpected) - 1} more: "
                               f"{unexpected[1:6]})" if len(unexpected) > 1 else "") +
                               f"; the {c.layout} layout with this config does not use it")
        targets = check_vocab_maps(d2t, dtypes.get("d2t"), t2d, dtypes.get("t2d"), Vd, V)
        self.draft_to_target = torch.from_numpy(targets)
        self.d2t = self.draft_to_target - torch.arange(Vd, dtype=torch.int64)
        self.inv_freq = hf.rope_inv_freq(c.rope_namespace())

    @classmethod
    def from_dir(cls, drafter_dir: str, target_dir: str) -> "Drafter":
        with open(os.path.join(drafter_dir, "config.json")) as f:
            cfg = json.load(f)
        with open(os.path.join(target_dir, "config.json")) as f:
            tcfg = json.load(f)
        dc = DrafterConfig(cfg, tcfg)
        tensors = safetensors_np.load_model_dir(drafter_dir)
        target_embed = None
        if "embed_tokens.weight" not in tensors:
            target_embed = safetensors_np.load_model_dir(target_dir)["model.embed_tokens.weight"]
        d = cls(dc, tensors, tensors.dtypes, target_embed)
        d.dir = drafter_dir
        return d

    # -- helpers -------------------------------------------------------------------------------------------------

    def new_cache(self) -> list:
        return [{"k": None, "v": None, "pos": None} for _ in range(self.cfg.num_layers)]

    @staticmethod
    def cache_len(cache) -> int:
        return 0 if cache is None or cache[0]["k"] is None else int(cache[0]["k"].shape[1])

    @staticmethod
    def cache_copy(cache) -> list:
        return [dict(e) for e in cache]  # tensors are never modified in place, so a shallow copy suffices

    @staticmethod
    def cache_select(cache, keep) -> list:
        """A cache holding only entries `keep` (indices, in order) of `cache` (e.g. the accepted tree path)."""
        idx = torch.as_tensor(list(keep), dtype=torch.int64)
        out = []
        for e in cache:
            if e["k"] is None or idx.numel() == 0:
                out.append({"k": None, "v": None, "pos": None})
            else:
                out.append({"k": e["k"][:, idx], "v": e["v"][:, idx], "pos": e["pos"][idx]})
        return out

    def to_target(self, draft_ids):
        """Draft ids -> target ids (draft + d2t[draft])."""
        return self.draft_to_target[torch.as_tensor(draft_ids, dtype=torch.int64)]

    def _rope(self, x, positions):
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        return x * cos[None] + hf.rotate_half(x) * sin[None]

    def _attention(self, L, x, positions, entry, mask):
        c = self.cfg
        M = x.shape[0]
        nh, nkv, D = c.num_heads, c.num_kv_heads, c.head_dim
        q = torch.nn.functional.linear(x, L["q"]).view(M, nh, D).transpose(0, 1)
        k = torch.nn.functional.linear(x, L["k"]).view(M, nkv, D).transpose(0, 1)
        v = torch.nn.functional.linear(x, L["v"]).view(M, nkv, D).transpose(0, 1)
        q = self._rope(q, positions)
        k = self._rope(k, positions)
        if entry is not None and entry["k"] is not None:
            k = torch.cat((entry["k"], k), dim=1)
            v = torch.cat((entry["v"], v), dim=1)
            k_pos = torch.cat((entry["pos"], positions))
        else:
            k_pos = positions
        if entry is not None:
            entry["k"], entry["v"], entry["pos"] = k, v, k_pos
        if mask is None:
            visible = k_pos[None, :] <= positions[:, None]
        else:
            visible = torch.as_tensor(np.asarray(mask), dtype=torch.bool)
            if tuple(visible.shape) != (M, k.shape[1]):
                raise ValueError(f"mask: expected shape [{M}, {k.shape[1]}], found {list(visible.shape)}")
        n_rep = nh // nkv
        scores = torch.matmul(q, hf.repeat_kv(k, n_rep).transpose(1, 2)) * (D ** -0.5)
        neg = torch.tensor(torch.finfo(torch.float32).min)
        scores = scores + torch.where(visible, torch.zeros(()), neg)[None]
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, hf.repeat_kv(v, n_rep)).transpose(0, 1).reshape(M, nh * D)
        return torch.nn.functional.linear(out, L["o"])

    def _mlp(self, L, x):
        F = torch.nn.functional
        return F.linear(F.silu(F.linear(x, L["gate"])) * F.linear(x, L["up"]), L["down"])

    # -- forward -------------------------------------------------------------------------------------------------

    def fuse(self, aux):
        """fc over the target's aux states [M, num_aux*H_t] (after input_norm / fc_norm when configured)."""
        c = self.cfg
        x = torch.as_tensor(np.asarray(aux, dtype=np.float32))
        W = c.num_aux * c.target_hidden_size
        if x.dim() != 2 or x.shape[1] != W:
            raise ValueError(f"aux hidden: expected [M, {W}], found {list(x.shape)}")
        if self.input_norm is not None:
            x = _rms_norm(x, self.input_norm, c.rms_norm_eps)
        elif self.fc_norms is not None:
            Ht = c.target_hidden_size
            x = torch.cat([_rms_norm(x[:, i * Ht:(i + 1) * Ht], w, c.rms_norm_eps)
                           for i, w in enumerate(self.fc_norms)], dim=-1)
        return torch.nn.functional.linear(x, self.fc)

    @torch.no_grad()
    def forward(self, token_ids, hidden, positions, cache=None, *, from_target: bool, mask=None):
        """token_ids [M] (target ids), hidden [M, num_aux*H_t] if from_target else [M, H], positions [M].
        `cache` (from new_cache) is extended in place with the new keys/values; `mask` [M, cached+M] bool is
        optional. Returns (logits_draft [M, Vd], h_next [M, H]) float32 torch tensors."""
        c = self.cfg
        ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64))
        pos = torch.as_tensor(np.asarray(positions, dtype=np.int64))
        M = ids.numel()
        if ids.dim() != 1 or pos.shape != (M,):
            raise ValueError("token_ids and positions must be 1-D of the same length")
        if M and (int(ids.min()) < 0 or int(ids.max()) >= c.vocab_size):
            raise ValueError("token id out of range (token_ids are target-vocabulary ids)")
        if from_target:
            g = self.fuse(hidden)
        else:
            g = torch.as_tensor(np.asarray(hidden, dtype=np.float32))
            if tuple(g.shape) != (M, c.hidden_size):
                raise ValueError(f"draft hidden: expected [{M}, {c.hidden_size}], found {list(g.shape)}")
        if g.shape[0] != M:
            raise ValueError("hidden must have one row per token")
        eps = c.rms_norm_eps
        e = self.embed[ids]
        x = None
        for li, L in enumerate(self.layers):
            entry = None if cache is None else cache[li]
            if li == 0:
                hn = _rms_norm(g, L["hidden_norm"], eps)
                u = torch.cat((_rms_norm(e, L["in_norm"], eps), hn), dim=-1)
                residual = hn if c.norm_before_residual else g
                x = residual + self._attention(L, u, pos, entry, mask)
            else:
                x = x + self._attention(L, _rms_norm(x, L["in_norm"], eps), pos, entry, mask)
            x = x + self._mlp(L, _rms_norm(x, L["post_norm"], eps))
        normed = _rms_norm(x, self.norm, eps)
        logits = torch.nn.functional.linear(normed, self.lm_head)
        return logits, (normed if c.norm_output else x)

    def extend(self, token_ids, aux, positions, cache=None, mask=None):
        return self.forward(token_ids, aux, positions, cache, from_target=True, mask=mask)

    def step(self, token_ids, hidden, positions, cache=None, mask=None):
        return self.forward(token_ids, hidden, positions, cache, from_target=False, mask=mask)


# ---------------------------------------------------------------------------------------------------------------
# target side


def aux_states(hidden_states, layers) -> np.ndarray:
    """hidden_states [L+1, S, H_t] from hf_reference (index i = residual stream entering layer i) -> [S, n*H_t]
    concatenated in ascending layer order."""
    hs = np.asarray(hidden_states)
    return np.concatenate([hs[i] for i in sorted(layers)], axis=-1).astype(np.float32)


def reference_run(drafter: Drafter, target, input_ids) -> dict:
    """The fixture reference (README): target oracle over input_ids, extend pass over ids[1:] + [next] with the
    aux states at positions 0..S-1, then one draft step from the last row. Returns numpy arrays."""
    ids = np.asarray(input_ids, dtype=np.int64)
    S = ids.size
    logits_t, hs = target.forward(ids)
    aux = aux_states(hs.numpy(), drafter.cfg.aux_layers)
    nxt = int(torch.argmax(logits_t[-1]))
    dids = np.concatenate([ids[1:], [nxt]]).astype(np.int64)
    pos = np.arange(S, dtype=np.int64)
    cache = drafter.new_cache()
    logits, h_next = drafter.extend(dids, aux, pos, cache)
    arg = int(torch.argmax(logits[-1]))
    step_token = int(drafter.to_target(arg))
    slog, sh = drafter.step([step_token], h_next[-1:], [S], cache)
    return {"input_ids": ids, "aux": aux, "aux_layers": np.array(drafter.cfg.aux_layers, dtype=np.int64),
            "draft_input_ids": dids, "positions": pos, "logits": logits.numpy(), "h_next": h_next.numpy(),
            "step_token": np.array([step_token], dtype=np.int64), "step_position": np.array([S], dtype=np.int64),
            "step_logits": slog.numpy(), "step_h_next": sh.numpy()}


REFERENCE_DTYPES = {"input_ids": "I64", "aux": "F32", "aux_layers": "I64", "draft_input_ids": "I64",
                    "positions": "I64", "logits": "F32", "h_next": "F32", "step_token": "I64",
                    "step_position": "I64", "step_logits": "F32", "step_h_next": "F32"}


def load_target(target_dir: str):
    return hf.load_model(target_dir, "fp32")


def _main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="run the EAGLE-3 reference once and print a summary")
    ap.add_argument("--drafter", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--ids", default="1,5,9,13,17")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    d = Drafter.from_dir(a.drafter, a.target)
    r = reference_run(d, load_target(a.target), [int(t) for t in a.ids.split(",")])
    print(json.dumps(d.cfg.summary(), indent=1))
    print("draft argmax -> target ids:", d.to_target(np.argmax(r["logits"], -1)).tolist(),
          "step token", int(r["step_token"][0]))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
