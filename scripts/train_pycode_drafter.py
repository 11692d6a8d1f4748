#!/usr/bin/python3
"""Train a real EAGLE-3 drafter for ../shared/models/pycode-llama-19m on CPU, reproducibly.

    /usr/bin/python3 scripts/train_pycode_drafter.py [--out models/pycode-drafter] [--tokens 500000] [--steps 700]
                                                     [--seed 0] [--reuse-data] [--bench 24]
    /usr/bin/python3 scripts/train_pycode_drafter.py --bench-only --bench 24    # eaglet accept length / speedup

Three phases (docs: ../shared/docs/eagle3-spec.md §1.1, §2, §3a/§3c, §4, §5; scripts/README_drafter_training.md):

1. Data. Python sources on this machine (/usr/lib/python3.11, /usr/lib/python3/dist-packages: the target's training
   distribution), test files and the files the dev prompts (../shared/prompts/pycode-dev.jsonl) were cut from
   excluded. Each file gives up to --chunks-per-file random line-aligned chunks of ~--chunk-chars characters
   (~500 tokens). Every chunk goes through `eaglet hidden` (the same target forward the engine serves with), which
   writes input_ids [S] (BOS first), hidden_states [S, 3*384] (HF hidden_states[2], [4], [5]) and logits [S, 8000].
   We keep the aux states as bf16 and the teacher as the top-K (--teacher-topk) logits of each position with their
   ids (fp32 logits are 32 KB/token; the mass outside the top 32 of this code LM is ~1e-3), then delete the file.
   Cached in --data-dir (dataset.pt) and reused with --reuse-data.

2. Training, EAGLE-3 training-time test (§5) in the plain layer of §1.1 (norm_before_residual false). At index t:
   step 0 reads (x_{t+1}, fc(aux_t)) at position t; step k reads (x_{t+1+k}, h_out of step k-1 at t) at position
   t+k (teacher-forced tokens, the drafter's own pre-norm hidden). Attention: step-0 keys are causal over 0..t; the
   step-k query at t also sees the keys of steps 1..k at the same index t (the "diagonal"). Teacher of step k at t:
   the target's distribution at t+1+k restricted to the draft vocabulary and renormalised; positions whose target
   argmax is outside the draft vocabulary are masked (official rule). Loss: sum_k 0.8**k * soft CE. AdamW,
   linear warmup + cosine decay, grad clipping. Matmuls run in bf16 autocast (this torch build's fp32 GEMM is
   reference BLAS, ~5 GFLOP/s; bf16 goes to oneDNN, ~400 GFLOP/s); master weights, norms, softmax, loss in fp32.
   Embeddings: the target's, frozen. lm_head starts from the target's lm_head rows of the draft vocabulary and
   norm from the target's final norm (speculators-style initialisation; both then trained).

3. Export in the SpecForge/official layout (§3a/§3c): config.json (LlamaForCausalLMEagle3, no aux-layer ids so the
   default [2, L/2, L-3] = [2, 4, 5] applies), model.safetensors with fc, midlayer.*, norm, lm_head, d2t (I64
   offsets), t2d (BOOL). The draft vocabulary is the --draft-vocab most frequent token ids of the training chunks
   (ties by id, sorted ascending; §2 scandata).

Held-out chunks (--holdout-frac, by file) give the step-k accuracies printed at the end; the export is re-read with
tests/oracle/eagle3_reference.py and compared with the training module. --bench N runs eaglet generate --compare on
the first N dev prompts for chain and tree settings (bench.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ------------------------------------------------------------------------------------------------ safetensors I/O

_ST_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64, "I32": np.int32,
          "BOOL": np.bool_}


def st_read(path, names=None):
    """name -> numpy array (BF16 as raw uint16 bits), memory-mapped."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    mm = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or (names is not None and name not in names):
            continue
        b, e = info["data_offsets"]
        out[name] = mm[b:e].view(_ST_NP[info["dtype"]]).reshape(info["shape"])
    return out


def bf16_bits_to_torch(a):
    return torch.from_numpy(np.ascontiguousarray(a).astype(np.int16, copy=False).view(np.int16)).view(torch.bfloat16)


def st_write(path, tensors, metadata=None):
    """tensors: name -> torch tensor (float32, bfloat16, int64, bool)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            dt, raw = "BF16", t.view(torch.int16).numpy().tobytes()
        elif t.dtype == torch.float32:
            dt, raw = "F32", t.numpy().tobytes()
        elif t.dtype == torch.int64:
            dt, raw = "I64", t.numpy().astype("<i8").tobytes()
        elif t.dtype == torch.bool:
            dt, raw = "BOOL", t.numpy().astype(np.bool_).tobytes()
        else:
            raise ValueError(f"{name}: dtype {t.dtype}")
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ------------------------------------------------------------------------------------------------ data

SOURCE_ROOTS = ["/usr/lib/python3.11", "/usr/lib/python3/dist-packages"]


def is_test_path(rel):
    parts = rel.lower().split("/")
    if any(p in ("test", "tests", "_tests", "testing", "unittests", "idle_test") for p in parts[:-1]):
        return True
    f = parts[-1]
    return f.startswith("test_") or f.endswith("_test.py") or f in ("test.py", "tests.py", "conftest.py")


def list_sources(prompts_file):
    excluded = []
    if prompts_file and os.path.exists(prompts_file):
        for line in open(prompts_file):
            src = json.loads(line)["source"]
            excluded.append(src[len("site-packages/"):] if src.startswith("site-packages/") else src)
    files = []
    for root in SOURCE_ROOTS:
        for d, dirs, fs in os.walk(root):
            dirs.sort()
            for f in sorted(fs):
                if not f.endswith(".py"):
                    continue
                p = os.path.join(d, f)
                rel = os.path.relpath(p, root)
                if is_test_path(rel) or any(rel == e for e in excluded) or os.path.islink(p):
                    continue
                files.append(p)
    return files, excluded


def file_chunks(path, chunk_chars, min_chars=300):
    """Line-aligned chunks of ~chunk_chars characters covering the file."""
    try:
        text = open(path, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        return []
    if "\x00" in text:
        return []
    lines = text.splitlines(keepends=True)
    chunks, cur = [], ""
    for ln in lines:
        if len(ln) > chunk_chars:  # minified / data lines
            return []
        if len(cur) + len(ln) > chunk_chars and cur:
            chunks.append(cur)
            cur = ""
        cur += ln
    if cur:
        chunks.append(cur)
    return [c for c in chunks if len(c) >= min_chars and c.strip()]


def find_eaglet(explicit):
    cands = [explicit] if explicit else [os.path.join(REPO, "build", "eaglet"), os.path.join(REPO, "build-train", "eaglet")]
    for _ in range(60):
        for c in cands:
            if c and os.path.isfile(c) and os.access(c, os.X_OK):
                return c
        log("eaglet binary not found yet (being rebuilt?), waiting 10 s:", cands)
        time.sleep(10)
    sys.exit("no eaglet binary; build one: cmake -S . -B build-train -DCMAKE_BUILD_TYPE=Release "
             "-DEAGLET_BUILD_TESTS=OFF && cmake --build build-train -j2 --target eaglet")


def run_hidden(eaglet, target, text, out, topk, retries=8):
    for attempt in range(retries):
        r = subprocess.run([eaglet, "hidden", "-m", target, "-p", text, "--out", out, "-t", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode == 0:
            break
        if r.returncode == 1 and "empty" in r.stderr:
            return None
        # the shared build/ may be mid-rebuild: wait and retry
        time.sleep(5 * (attempt + 1))
    else:
        raise RuntimeError(f"eaglet hidden failed: {r.stderr.strip()}")
    t = st_read(out)
    ids = torch.from_numpy(np.array(t["input_ids"], dtype=np.int64))
    hid = torch.from_numpy(np.array(t["hidden_states"], dtype=np.float32)).to(torch.bfloat16)
    logits = torch.from_numpy(np.array(t["logits"], dtype=np.float32))
    os.unlink(out)
    vals, idx = logits.topk(topk, dim=-1)
    return ids, hid, vals.to(torch.float32), idx.to(torch.int16)


def gather(args, eaglet):
    files, excluded = list_sources(args.prompts)
    rng = random.Random(args.seed)
    rng.shuffle(files)
    n_hold_files = max(1, int(len(files) * args.holdout_frac))
    log(f"{len(files)} source files (tests and {len(excluded)} dev-prompt sources excluded); "
        f"{n_hold_files} held out")
    jobs = []  # (split, text)
    budget_chars = {"train": args.tokens * args.chars_per_token_est,
                    "heldout": max(20000, args.tokens * args.holdout_frac) * args.chars_per_token_est}
    used = {"train": 0.0, "heldout": 0.0}
    for i, p in enumerate(files):
        split = "heldout" if i < n_hold_files else "train"
        if used[split] >= budget_chars[split]:
            if all(used[s] >= budget_chars[s] for s in used):
                break
            continue
        ch = file_chunks(p, args.chunk_chars)
        if not ch:
            continue
        picks = sorted(rng.sample(range(len(ch)), min(args.chunks_per_file, len(ch))))
        for j in picks:
            jobs.append((split, ch[j]))
            used[split] += len(ch[j])
    log(f"{len(jobs)} chunks queued ({sum(len(t) for _, t in jobs) / 1e6:.2f} M chars), "
        f"{args.workers} eaglet hidden workers")
    tmpdir = tempfile.mkdtemp(prefix="eaglet-hidden-", dir=args.data_dir)
    results = [None] * len(jobs)
    done = [0, 0]
    lock = threading.Lock()

    def work(i):
        split, text = jobs[i]
        r = run_hidden(eaglet, args.target, text, os.path.join(tmpdir, f"h{i}.safetensors"), args.teacher_topk)
        results[i] = r
        with lock:
            done[0] += 1
            done[1] += 0 if r is None else int(r[0].numel())
            if done[0] % 100 == 0:
                log(f"  hidden: {done[0]}/{len(jobs)} chunks, {done[1]} tokens")

    with ThreadPoolExecutor(args.workers) as ex:
        list(ex.map(work, range(len(jobs))))
    shutil.rmtree(tmpdir, ignore_errors=True)
    data = {}
    for split in ("train", "heldout"):
        seqs = [r for (s, _), r in zip(jobs, results) if s == split and r is not None and r[0].numel() >= 16]
        lens = torch.tensor([int(r[0].numel()) for r in seqs])
        data[split] = {
            "lens": lens,
            "ids": torch.cat([r[0] for r in seqs]),
            "hidden": torch.cat([r[1] for r in seqs]),
            "top_vals": torch.cat([r[2] for r in seqs]).to(torch.float16),
            "top_ids": torch.cat([r[3] for r in seqs]),
        }
        log(f"  {split}: {len(seqs)} sequences, {int(lens.sum())} tokens, max len {int(lens.max())}")
    return data


# ------------------------------------------------------------------------------------------------ model

def rms_norm(x, w, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Eagle3Drafter(nn.Module):
    """The plain EAGLE-3 layer (§1.1): norm_before_residual false, pre-norm h_out fed forward."""

    def __init__(self, H=384, I=1024, heads=6, kv_heads=2, head_dim=64, n_aux=3, Ht=384, Vd=4096, eps=1e-5,
                 theta=10000.0):
        super().__init__()
        self.H, self.heads, self.kv, self.D, self.eps = H, heads, kv_heads, head_dim, eps
        self.fc = nn.Linear(n_aux * Ht, H, bias=False)
        self.input_layernorm = nn.Parameter(torch.ones(H))
        self.hidden_norm = nn.Parameter(torch.ones(H))
        self.post_attention_layernorm = nn.Parameter(torch.ones(H))
        self.q_proj = nn.Linear(2 * H, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(2 * H, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(2 * H, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, H, bias=False)
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)
        self.norm = nn.Parameter(torch.ones(H))
        self.lm_head = nn.Linear(H, Vd, bias=False)
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim),
                             persistent=False)

    def rope(self, x, pos):
        f = pos.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((f, f), dim=-1)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    def step(self, emb, g, pos, cache_k, cache_v, causal):
        """emb [B,T,H] (target embedding of the input tokens), g [B,T,H] fp32, pos [T]. Appends this step's K/V.
        Returns (logits [B,T,Vd], h_out [B,T,H])."""
        B, T, H = g.shape
        u = torch.cat([rms_norm(emb, self.input_layernorm, self.eps), rms_norm(g, self.hidden_norm, self.eps)], -1)
        q = self.q_proj(u).view(B, T, self.heads, self.D).transpose(1, 2).float()
        k = self.k_proj(u).view(B, T, self.kv, self.D).transpose(1, 2).float()
        v = self.v_proj(u).view(B, T, self.kv, self.D).transpose(1, 2).float()
        q, k = self.rope(q, pos), self.rope(k, pos)
        rep = self.heads // self.kv
        k = k.repeat_interleave(rep, dim=1)  # HF repeat_kv: query head h reads kv head h // rep
        v = v.repeat_interleave(rep, dim=1)
        cache_k.append(k)
        cache_v.append(v)
        scale = 1.0 / math.sqrt(self.D)
        s0 = torch.matmul(q, cache_k[0].transpose(2, 3)).float() * scale + causal  # [B,h,T,T]
        diag = [((q * cache_k[j]).sum(-1, keepdim=True)) * scale for j in range(1, len(cache_k))]
        p = torch.softmax(torch.cat([s0] + diag, dim=-1), dim=-1)
        o = torch.matmul(p[..., :T], cache_v[0]).float()
        for j in range(1, len(cache_k)):
            o = o + p[..., T + j - 1:T + j] * cache_v[j]
        o = o.transpose(1, 2).reshape(B, T, self.heads * self.D)
        h1 = g + self.o_proj(o).float()
        n = rms_norm(h1, self.post_attention_layernorm, self.eps)
        h_out = h1 + self.down_proj(F.silu(self.gate_proj(n)) * self.up_proj(n)).float()
        logits = self.lm_head(rms_norm(h_out, self.norm, self.eps)).float()
        return logits, h_out


# ------------------------------------------------------------------------------------------------ batches and loss

class Split:
    def __init__(self, d):
        self.lens = d["lens"]
        self.starts = torch.cat([torch.zeros(1, dtype=torch.long), self.lens.cumsum(0)[:-1]])
        self.ids, self.hidden, self.top_vals, self.top_ids = d["ids"], d["hidden"], d["top_vals"], d["top_ids"]

    def __len__(self):
        return len(self.lens)

    def batch(self, idx, max_len):
        """Tensors of sequences idx, each cut to max_len tokens and padded to max_len: one shape for every batch
        (oneDNN builds kernels per shape; varying shapes cost ~10x)."""
        L = max_len
        B, K = len(idx), self.top_ids.shape[1]
        ids = torch.zeros(B, L, dtype=torch.long)
        hid = torch.zeros(B, L, self.hidden.shape[1], dtype=torch.bfloat16)
        tv = torch.full((B, L, K), -1e4, dtype=torch.float32)
        ti = torch.zeros(B, L, K, dtype=torch.long)
        lens = torch.zeros(B, dtype=torch.long)
        for b, i in enumerate(idx):
            s, n = int(self.starts[i]), min(L, int(self.lens[i]))
            ids[b, :n] = self.ids[s:s + n]
            hid[b, :n] = self.hidden[s:s + n]
            tv[b, :n] = self.top_vals[s:s + n].float()
            ti[b, :n] = self.top_ids[s:s + n].long()
            lens[b] = n
        return ids, hid, tv, ti, lens


def ttt_forward(model, embed, t2d_index, batch, n_steps, decay=0.8):
    """EAGLE-3 TTT over a padded batch. Returns (weighted loss, per-step [loss_sum, correct, count] rows,
    per-position step-correct flags [n_steps, B, T] and validity)."""
    ids, hid, tv, ti, lens = batch
    B, S = ids.shape
    T = S - 1  # query indices t = 0..S-2
    pos0 = torch.arange(T)
    causal = torch.full((T, T), float("-inf")).triu(1)
    # teacher over the draft vocabulary: top-K target logits whose ids are in the draft vocab, renormalised
    d_ids = t2d_index[ti]  # [B,S,K], -1 outside the draft vocab
    tvm = tv.masked_fill(d_ids < 0, float("-inf"))
    in_vocab_top1 = d_ids[..., 0] >= 0  # target argmax in draft vocab (position mask, §2)
    p_teacher = torch.softmax(tvm, -1).nan_to_num(0.0)
    d_ids_c = d_ids.clamp(min=0)
    g = model.fc(hid[:, :T]).float()
    cache_k, cache_v = [], []
    total = 0.0
    stats = []
    flags = []
    valids = []
    for k in range(n_steps):
        # step k at index t: token x_{t+1+k}, teacher at position t+1+k
        tok = torch.zeros(B, T, dtype=torch.long)
        n_tok = S - 1 - k
        if n_tok <= 0:
            break
        tok[:, :n_tok] = ids[:, 1 + k:]
        tgt = slice(1 + k, None)
        tpos = torch.arange(T)[None, :] + 1 + k
        valid = tpos < lens[:, None]
        pt = torch.zeros(B, T, p_teacher.shape[-1])
        di = torch.zeros(B, T, p_teacher.shape[-1], dtype=torch.long)
        top1 = torch.full((B, T), -1, dtype=torch.long)
        pt[:, :n_tok] = p_teacher[:, tgt]
        di[:, :n_tok] = d_ids_c[:, tgt]
        top1[:, :n_tok] = d_ids[:, tgt, 0]
        inv = torch.zeros(B, T, dtype=torch.bool)
        inv[:, :n_tok] = in_vocab_top1[:, tgt]
        mask = valid & inv
        logits, h_out = model.step(embed[tok], g, pos0 + k, cache_k, cache_v, causal)
        logq = torch.log_softmax(logits, -1)
        ce = -(pt * logq.gather(-1, di)).sum(-1)  # [B,T]
        m = mask.float()
        cnt = valid.float().sum().clamp(min=1)
        loss_k = (ce * m).sum() / cnt
        total = total + (decay ** k) * loss_k
        correct = (logits.argmax(-1) == top1) & mask
        stats.append([float((ce * m).sum()), int(correct.sum()), int(valid.sum())])
        flags.append(correct)
        valids.append(valid)
        g = h_out
    return total, stats, flags, valids


def evaluate(model, embed, t2d_index, split, n_steps, max_len, bs=8):
    model.eval()
    agg = np.zeros((n_steps, 3))
    run_sum, run_cnt = 0.0, 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for s in range(0, len(split), bs):
            batch = split.batch(list(range(s, min(len(split), s + bs))), max_len)
            _, stats, flags, valids = ttt_forward(model, embed, t2d_index, batch, n_steps)
            agg[:len(stats)] += np.array(stats)
            # teacher-forced run length: consecutive correct steps from step 0 where all n_steps are defined
            full = valids[-1]
            run = torch.zeros_like(flags[0], dtype=torch.long)
            alive = torch.ones_like(flags[0])
            for f in flags:
                alive = alive & f
                run += alive.long()
            run_sum += float(run[full].sum())
            run_cnt += int(full.sum())
    model.train()
    acc = agg[:, 1] / np.maximum(agg[:, 2], 1)
    ce = agg[:, 0] / np.maximum(agg[:, 2], 1)
    return acc, ce, 1.0 + run_sum / max(run_cnt, 1)


# ------------------------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models", "pycode-drafter"), help="exported drafter folder")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "models", "pycode-drafter-data"))
    shared = os.path.join(os.path.dirname(REPO), "shared")  # ../shared beside the repository
    ap.add_argument("--target", default=os.path.join(shared, "models", "pycode-llama-19m"))
    ap.add_argument("--prompts", default=os.path.join(shared, "prompts", "pycode-dev.jsonl"),
                    help="dev prompts; their source files are excluded from the data")
    ap.add_argument("--eaglet", default=None, help="eaglet binary (default build/eaglet, then build-train/eaglet)")
    ap.add_argument("--tokens", type=int, default=500_000, help="training-token budget for data gathering")
    ap.add_argument("--holdout-frac", type=float, default=0.03)
    ap.add_argument("--chunk-chars", type=int, default=1300, help="characters per eaglet hidden call (~500 tokens)")
    ap.add_argument("--chars-per-token-est", type=float, default=2.6)
    ap.add_argument("--chunks-per-file", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="parallel eaglet hidden processes (1 thread each)")
    ap.add_argument("--teacher-topk", type=int, default=32)
    ap.add_argument("--reuse-data", action="store_true", help="reuse --data-dir/dataset.pt if its settings match")
    ap.add_argument("--draft-vocab", type=int, default=4096)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--ttt-steps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=700, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=4, help="sequences per step")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=float, default=0.05, help="warmup fraction of --steps")
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--init-head", choices=["target", "random"], default="target",
                    help="lm_head/norm initialisation: target's rows of the draft vocab, or random")
    ap.add_argument("--export-dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bench", type=int, default=0,
                    help="after export, run eaglet generate --compare on the first N dev prompts (chain and tree)")
    ap.add_argument("--bench-tokens", type=int, default=128)
    ap.add_argument("--bench-only", action="store_true", help="only benchmark the drafter already in --out")
    ap.add_argument("--eval-every", type=int, default=0, help="held-out eval every N steps (0: only at the end)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    if args.bench_only:
        res = bench(args, find_eaglet(args.eaglet))
        path = os.path.join(args.out, "bench.json")
        with open(path, "w") as f:
            json.dump(res, f, indent=2)
            f.write("\n")
        log(f"wrote {path}")
        return
    os.makedirs(args.data_dir, exist_ok=True)

    # ---- 1. data
    key = {k: getattr(args, k) for k in ("target", "tokens", "holdout_frac", "chunk_chars", "chars_per_token_est",
                                         "chunks_per_file", "teacher_topk", "seed", "prompts")}
    ds_path = os.path.join(args.data_dir, "dataset.pt")
    data = None
    if args.reuse_data and os.path.exists(ds_path):
        saved = torch.load(ds_path)
        if saved.get("key") == key:
            data = saved["data"]
            log(f"reusing {ds_path}")
        else:
            log(f"{ds_path} was made with other settings; regathering")
    t_data = time.time()
    if data is None:
        eaglet = find_eaglet(args.eaglet)
        log(f"gathering with {eaglet}")
        torch.set_num_threads(1)  # the eaglet workers use the cores
        data = gather(args, eaglet)
        torch.set_num_threads(args.threads)
        torch.save({"key": key, "data": data}, ds_path)
        log(f"saved {ds_path} ({os.path.getsize(ds_path) / 1e6:.0f} MB)")
    t_data = time.time() - t_data
    train, held = Split(data["train"]), Split(data["heldout"])
    n_train_tok, n_held_tok = int(train.lens.sum()), int(held.lens.sum())

    # ---- draft vocabulary (§2): most frequent training token ids (BOS excluded), ties by id, sorted ascending
    V = 8000
    counts = torch.bincount(train.ids, minlength=V)
    counts[1] = 0  # BOS is never a draft target
    Vd = args.draft_vocab
    order = sorted(range(V), key=lambda i: (-int(counts[i]), i))
    used = sorted(order[:Vd])
    d2t = torch.tensor(used, dtype=torch.long) - torch.arange(Vd)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[used] = True
    t2d_index = torch.full((V,), -1, dtype=torch.long)
    t2d_index[torch.tensor(used)] = torch.arange(Vd)
    cover = float(counts[used].sum()) / float(counts.sum())
    top1 = train.top_ids[:, 0].long()
    cover_argmax = float(t2d[top1].float().mean())
    log(f"draft vocab {Vd}/{V}: covers {100 * cover:.2f}% of training tokens, {100 * cover_argmax:.2f}% of target "
        f"argmax predictions")

    # ---- target tensors: frozen embedding, lm_head/norm for initialisation
    tw = st_read(os.path.join(args.target, "model.safetensors"),
                 {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"})
    embed = bf16_bits_to_torch(tw["model.embed_tokens.weight"])  # [V,H] bf16, frozen
    tcfg = json.load(open(os.path.join(args.target, "config.json")))
    H = tcfg["hidden_size"]

    model = Eagle3Drafter(H=H, I=args.intermediate, heads=tcfg["num_attention_heads"],
                          kv_heads=tcfg["num_key_value_heads"], head_dim=tcfg["head_dim"], Ht=H, Vd=Vd,
                          eps=1e-5, theta=10000.0)
    if args.init_head == "target":
        with torch.no_grad():
            model.lm_head.weight.copy_(bf16_bits_to_torch(tw["lm_head.weight"]).float()[torch.tensor(used)])
            model.norm.copy_(bf16_bits_to_torch(tw["model.norm.weight"]).float())
    n_params = sum(p.numel() for p in model.parameters())
    log(f"drafter: {n_params / 1e6:.2f} M trainable parameters; train {len(train)} seqs / {n_train_tok} tokens, "
        f"held-out {len(held)} seqs / {n_held_tok} tokens")

    # ---- 2. training
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=args.weight_decay)
    warm = max(1, int(args.warmup * args.steps))

    def lr_at(s):
        if s < warm:
            return args.lr * (s + 1) / warm
        p = (s - warm) / max(1, args.steps - warm)
        return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))

    g = torch.Generator().manual_seed(args.seed)
    perm, pi = torch.randperm(len(train), generator=g).tolist(), 0
    t_train = time.time()
    ema = None
    seen = 0
    for step in range(args.steps):
        idx = []
        for _ in range(args.batch):
            if pi >= len(perm):
                perm, pi = torch.randperm(len(train), generator=g).tolist(), 0
            idx.append(perm[pi])
            pi += 1
        batch = train.batch(idx, args.max_len)
        seen += int(batch[4].sum())
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, stats, _, _ = ttt_forward(model, embed, t2d_index, batch, args.ttt_steps)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        accs = [c / max(n, 1) for _, c, n in stats]
        ema = accs if ema is None else [0.9 * e + 0.1 * a for e, a in zip(ema, accs)]
        if step % 25 == 0 or step == args.steps - 1:
            el = time.time() - t_train
            log(f"step {step:4d}/{args.steps} loss {float(loss):.3f} gnorm {float(gn):.2f} lr {lr_at(step):.2e} "
                f"acc(ema) " + " ".join(f"{a:.3f}" for a in ema) + f"  {seen / el:.0f} tok/s")
        if args.eval_every and step and step % args.eval_every == 0:
            acc, ce, run = evaluate(model, embed, t2d_index, held, args.ttt_steps, args.max_len)
            log("  held-out acc " + " ".join(f"{a:.3f}" for a in acc) + f"  teacher-forced run+1 {run:.2f}")
    t_train = time.time() - t_train

    acc, ce, run = evaluate(model, embed, t2d_index, held, args.ttt_steps, args.max_len)
    acc_tr, _, _ = evaluate(model, embed, t2d_index, train_subset(train, 64), args.ttt_steps, args.max_len)

    # ---- 3. export (SpecForge / official layout, §3a/§3c)
    os.makedirs(args.out, exist_ok=True)
    dt = torch.bfloat16 if args.export_dtype == "bfloat16" else torch.float32
    sd = {
        "fc.weight": model.fc.weight,
        "midlayer.input_layernorm.weight": model.input_layernorm,
        "midlayer.hidden_norm.weight": model.hidden_norm,
        "midlayer.self_attn.q_proj.weight": model.q_proj.weight,
        "midlayer.self_attn.k_proj.weight": model.k_proj.weight,
        "midlayer.self_attn.v_proj.weight": model.v_proj.weight,
        "midlayer.self_attn.o_proj.weight": model.o_proj.weight,
        "midlayer.post_attention_layernorm.weight": model.post_attention_layernorm,
        "midlayer.mlp.gate_proj.weight": model.gate_proj.weight,
        "midlayer.mlp.up_proj.weight": model.up_proj.weight,
        "midlayer.mlp.down_proj.weight": model.down_proj.weight,
        "norm.weight": model.norm,
        "lm_head.weight": model.lm_head.weight,
    }
    tensors = {k: v.detach().to(dt) for k, v in sd.items()}
    tensors["d2t"] = d2t
    tensors["t2d"] = t2d
    st_write(os.path.join(args.out, "model.safetensors"), tensors,
             {"format": "pt", "trained_by": "scripts/train_pycode_drafter.py"})
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": args.intermediate,
        "num_attention_heads": tcfg["num_attention_heads"],
        "num_key_value_heads": tcfg["num_key_value_heads"],
        "head_dim": tcfg["head_dim"],
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "max_position_embeddings": 2048,
        "vocab_size": V,
        "draft_vocab_size": Vd,
        "tie_word_embeddings": False,
        "bos_token_id": tcfg.get("bos_token_id", 1),
        "eos_token_id": tcfg.get("eos_token_id", 2),
        "torch_dtype": args.export_dtype,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    summary = {
        "command": " ".join([sys.executable] + sys.argv),
        "seed": args.seed,
        "data_seconds": round(t_data, 1),
        "train_seconds": round(t_train, 1),
        "total_seconds": round(time.time() - T0, 1),
        "train_tokens": n_train_tok,
        "train_sequences": len(train),
        "heldout_tokens": n_held_tok,
        "tokens_seen": seen,
        "epochs": round(seen / max(1, n_train_tok), 2),
        "draft_vocab": Vd,
        "draft_vocab_token_coverage": round(cover, 4),
        "draft_vocab_argmax_coverage": round(cover_argmax, 4),
        "ttt_steps": args.ttt_steps,
        "heldout_acc": [round(float(a), 4) for a in acc],
        "heldout_ce": [round(float(c), 4) for c in ce],
        "heldout_teacher_forced_run_plus1": round(run, 3),
        "train_subset_acc": [round(float(a), 4) for a in acc_tr],
    }
    diff = check_export(model, embed, held, args.out, args.target)
    if diff is not None:
        log(f"export check vs tests/oracle/eagle3_reference.py: max |logit diff| {diff:.2e} (steps 0-2)")
        summary["export_check_max_abs_logit_diff"] = diff
    with open(os.path.join(args.out, "training_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    log(f"exported {args.out} (config.json, model.safetensors {args.export_dtype}, training_summary.json)")
    log("SUMMARY " + json.dumps(summary))
    if args.bench:
        res = bench(args, find_eaglet(args.eaglet))
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump(res, f, indent=2)
            f.write("\n")
    print("held-out step-k accuracy (draft argmax == target argmax, teacher-forced):")
    for k, (a, c) in enumerate(zip(acc, ce)):
        print(f"  step {k}: acc {a:.4f}  soft-CE {c:.4f}")
    print(f"  consecutive-correct run + 1 (rough chain accept-length proxy, {args.ttt_steps} steps): {run:.2f}")
    print(f"data {t_data:.0f} s ({n_train_tok} train tokens), training {t_train:.0f} s, total {time.time() - T0:.0f} s")


def check_export(model, embed, held, out_dir, target_dir, n_tok=48, n_steps=3):
    """Re-reads the exported folder with the repository's independent PyTorch oracle (tests/oracle/
    eagle3_reference.py, itself checked against eaglet's drafter) and compares it with the training module
    (bf16-rounded weights, fp32 math, no autocast): step-0 logits over a held-out prefix, and TTT steps 1..n_steps-1
    as chain steps (a query at t sees the extend keys 0..t and its own earlier draft keys). Returns max |diff|."""
    oracle_dir = os.path.join(REPO, "tests", "oracle")
    if not os.path.exists(os.path.join(oracle_dir, "eagle3_reference.py")):
        return None
    sys.path.insert(0, oracle_dir)
    import eagle3_reference as ref  # noqa: E402
    dr = ref.Drafter.from_dir(out_dir, target_dir)
    import copy
    m = copy.deepcopy(model).float()
    with torch.no_grad():
        for prm in m.parameters():
            prm.copy_(prm.to(torch.bfloat16).float())
    ids, hid, tv, ti, lens = held.batch([0], n_tok + 1)
    ids, hid = ids[:, :n_tok + 1], hid[:, :n_tok + 1]
    T = n_tok - n_steps + 1
    worst = 0.0
    with torch.no_grad():
        causal = torch.full((T, T), float("-inf")).triu(1)
        g = m.fc(hid[:, :T].float())
        ck, cv, mine = [], [], []
        for k in range(n_steps):
            logits, g = m.step(embed[ids[:, 1 + k:1 + k + T]], g, torch.arange(T) + k, ck, cv, causal)
            mine.append(logits[0])
        cache = dr.new_cache()
        lo, hn = dr.extend(ids[0, 1:T + 1].numpy(), hid[0, :T].float().numpy(), np.arange(T), cache)
        worst = max(worst, float((lo - mine[0]).abs().max()))
        for t in range(0, T, max(1, T // 6)):
            c = dr.cache_select(cache, range(t + 1))
            h = hn[t:t + 1]
            for k in range(1, n_steps):
                lo_k, h = dr.step([int(ids[0, 1 + k + t])], h.numpy(), [t + k], c)
                worst = max(worst, float((lo_k[0] - mine[k][t]).abs().max()))
    return worst


BENCH_SETTINGS = {
    "chain-4": ["--speculative-eagle-topk", "1", "--speculative-num-steps", "4"],
    "chain-6": ["--speculative-eagle-topk", "1", "--speculative-num-steps", "6"],
    "tree-5x4-8": [],  # eaglet's (SGLang's) default: 5 steps, top-4, 8 draft tokens
    "tree-5x4-16": ["--speculative-num-draft-tokens", "16"],
}


def bench(args, eaglet):
    """eaglet generate --compare (greedy, -n --bench-tokens) over the first --bench dev prompts per setting;
    accept length aggregated as (sum accepted + sum verifies) / sum verifies, speedup as total time ratio."""
    import re
    prompts = [json.loads(l)["prompt"] for l in open(args.prompts)][:args.bench]
    results = {}
    for name, flags in BENCH_SETTINGS.items():
        V = A = D = 0
        t_spec = t_plain = 0.0
        n_tok = 0
        same = 0
        differ = []
        lines = []
        for i, pr in enumerate(prompts):
            cmd = [eaglet, "generate", "-m", args.target, "-d", args.out, "-p", pr, "-n", str(args.bench_tokens),
                   "--compare", "-t", str(args.threads)] + flags
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd[:6])} ...: {r.stderr.strip()[-500:]}")
            err = r.stderr
            m = re.search(r"verifies (\d+), drafted (\d+), accepted (\d+)", err)
            v, d, a = map(int, m.groups())
            V, D, A = V + v, D + d, A + a
            c = re.search(r"compare: target alone ([\d.]+) tok/s, this run ([\d.]+) tok/s: speedup ([\d.]+)x; "
                          r"outputs (\w+)", err)
            n = int(re.search(r"decode: (\d+) tokens", err).group(1))
            n_tok += n
            t_plain += n / float(c.group(1))
            t_spec += n / float(c.group(2))
            same += c.group(4) == "identical"
            if c.group(4) != "identical":
                differ.append(i)  # greedy speculative output != the target alone: a losslessness failure
            lines.append([l for l in err.splitlines() if l.startswith(("accept len", "compare:", "  per-depth"))])
        res = {"prompts": len(prompts), "accept_len": round((A + V) / max(V, 1), 3),
               "draft_acceptance": round(A / max(D, 1), 3), "verifies": V,
               "speedup": round(t_plain / t_spec, 3), "target_tok_s": round(n_tok / t_plain, 1),
               "spec_tok_s": round(n_tok / t_spec, 1), "outputs_identical": f"{same}/{len(prompts)}",
               "differing_prompts": differ,
               "example": lines[0]}
        results[name] = res
        log(f"bench {name:12s} ({' '.join(flags) or 'defaults'}): accept len {res['accept_len']:.2f}, "
            f"draft acceptance {100 * res['draft_acceptance']:.1f}%, speedup {res['speedup']:.2f}x "
            f"({res['spec_tok_s']} vs {res['target_tok_s']} tok/s), outputs identical {res['outputs_identical']}"
            + (f" (DIFFER on prompts {differ})" if differ else ""))
    return results


def train_subset(split, n):
    """The first n training sequences, as a Split (train-set accuracy for the over-fitting check)."""
    n = min(n, len(split))
    end = int(split.starts[n - 1] + split.lens[n - 1])
    return Split({"lens": split.lens[:n], "ids": split.ids[:end], "hidden": split.hidden[:end],
                  "top_vals": split.top_vals[:end], "top_ids": split.top_ids[:end]})


if __name__ == "__main__":
    main()
