#!/usr/bin/python3
"""Independent PyTorch reference of the EAGLE-3 training-time-test loss (eagle3-spec §5, the official
`eagle/traineagle3/cnets.py` scheme), for eaglet's libtorch trainer (src/train/torch/ttt.h).

    ttt_reference.py CASE.safetensors CASE.json
        ->  prints {"loss", "step_loss", "step_acc", "step_count", "step_trained"}

CASE.safetensors holds the drafter's fp32 weights (SGLang names), `embed` [V, H], and the batch: `ids` [B, T],
`mask` [B, T], `aux` [B, T, W], `teacher` [B, T, Vd], `teacher_argmax` [B, T]. CASE.json: num_heads,
num_kv_heads, head_dim, rms_norm_eps, steps, decay, and `rope` (the HF config fields rope_theta / rope_scaling).

Written from the spec, not from eaglet: one position at a time is not needed; like the official trainer it keeps a
list of per-step keys (cache_hidden), shifts ids / teacher / mask left once per step, attends step 0 causally and each
later step's key at the same index (the diagonal), and weights step k by decay**k. Loss and accuracy are normalised
as the spec quotes the official code: the loss is a mean over all B x T positions, the accuracy is divided by the
trained positions (loss mask), whether or not their target is in the draft vocabulary.
"""
import json
import math
import sys

import torch

import safetensors_np as st
from hf_reference import rope_inv_freq


class RopeCfg:
    def __init__(self, c, head_dim):
        self.head_dim = head_dim
        self.partial_rotary_factor = 1.0
        self.rope_theta = float(c.get("rope_theta", 10000.0))
        self.rope_scaling = c.get("rope_scaling")


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x, pos, inv_freq):
    freqs = pos[:, None].float() * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), -1)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * emb.cos() + torch.cat((-x2, x1), -1) * emb.sin()


def left(x, n, fill):
    """Official `padding(x, left=False)` applied n times: drop the first n positions, fill at the end."""
    pad = torch.full_like(x[:, :n], fill)
    return torch.cat((x[:, n:], pad), 1)


def main(case_path, json_path):
    t = {k: torch.from_numpy(v.copy()) for k, v in st.load(case_path).items()}
    c = json.load(open(json_path))
    nh, kvh, d, eps = c["num_heads"], c["num_kv_heads"], c["head_dim"], c["rms_norm_eps"]
    inv_freq = rope_inv_freq(RopeCfg(c["rope"], d))
    ids, mask, aux, teacher, am = t["ids"].long(), t["mask"], t["aux"], t["teacher"], t["teacher_argmax"].long()
    B, T = ids.shape
    p = "midlayer."
    hidden = aux @ t["fc.weight"].T
    k_cache, v_cache = [], []
    total, step_loss, step_acc, step_count, step_trained = 0.0, [], [], [], []
    causal = torch.full((T, T), float("-inf")).triu(1)
    for k in range(c["steps"]):
        ids, teacher, am = left(ids, 1, 0), left(teacher, 1, 0.0), left(am, 1, -1)
        # the predicted token of index t is t+2+k: its loss mask is shifted once more than the inputs
        pos = torch.arange(T) + k
        emb = t["embed"][ids]
        u = torch.cat((rms(emb, t[p + "input_layernorm.weight"], eps), rms(hidden, t[p + "hidden_norm.weight"], eps)), -1)
        q = (u @ t[p + "self_attn.q_proj.weight"].T).view(B, T, nh, d).transpose(1, 2)
        kk = (u @ t[p + "self_attn.k_proj.weight"].T).view(B, T, kvh, d).transpose(1, 2)
        vv = (u @ t[p + "self_attn.v_proj.weight"].T).view(B, T, kvh, d).transpose(1, 2)
        q, kk = rotate(q, pos, inv_freq), rotate(kk, pos, inv_freq)
        kk, vv = kk.repeat_interleave(nh // kvh, 1), vv.repeat_interleave(nh // kvh, 1)
        k_cache.append(kk)
        v_cache.append(vv)
        w = [q @ k_cache[0].transpose(2, 3) / math.sqrt(d) + causal]
        for i in range(1, len(k_cache)):
            w.append(((q * k_cache[i]).sum(-1) / math.sqrt(d))[..., None])
        w = torch.softmax(torch.cat(w, -1), -1)
        o = w[..., :T] @ v_cache[0]
        for i in range(1, len(v_cache)):
            o = o + w[..., T + i - 1: T + i] * v_cache[i]
        o = o.transpose(1, 2).reshape(B, T, nh * d) @ t[p + "self_attn.o_proj.weight"].T
        h1 = hidden + o
        n = rms(h1, t[p + "post_attention_layernorm.weight"], eps)
        mlp = (torch.nn.functional.silu(n @ t[p + "mlp.gate_proj.weight"].T) * (n @ t[p + "mlp.up_proj.weight"].T))
        hidden = h1 + mlp @ t[p + "mlp.down_proj.weight"].T
        logits = rms(hidden, t["norm.weight"], eps) @ t["lm_head.weight"].T
        # eagle3-spec §5 "Loss and metrics", written as the official cnets.py computes them:
        #   position_mask = target_mask * loss_mask   (target argmax in the draft vocabulary, token trained)
        #   loss = -torch.sum(position_mask * target_p * log_softmax(logits), 2).mean()     -> mean over B x T
        #   acc  = ((argmax logits == argmax target_p) * position_mask).sum() / loss_mask.sum()
        loss_mask = left(mask, 2 + k, 0.0)
        position_mask = (loss_mask * (am >= 0).float())[..., None]
        loss = float(-torch.sum(position_mask * teacher * torch.log_softmax(logits, -1), 2).mean())
        correct = float(((logits.argmax(-1) == teacher.argmax(-1)).float() * position_mask[..., 0]).sum())
        trained = float(loss_mask.sum())
        total += c["decay"] ** k * loss
        step_loss.append(loss)
        step_acc.append(correct / trained if trained else 0.0)
        step_count.append(int(position_mask.sum()))
        step_trained.append(int(trained))
    print(json.dumps({"loss": total, "step_loss": step_loss, "step_acc": step_acc, "step_count": step_count,
                      "step_trained": step_trained}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
