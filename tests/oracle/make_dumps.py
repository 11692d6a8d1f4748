#!/usr/bin/python3
"""Hidden-state dumps in the layouts of the Python EAGLE-3 trainers (../shared/docs/offline-data-formats.md), made
from a tiny target's real hidden states (hf_reference.py, fp32, stored bf16 as the trainers store them), for the
train-draft dump readers' tests.

CLI: make_dumps.py --target DIR --rows ROWS.json --out DIR
  ROWS.json: [{"ids": [...], "mask": [...]}, ...]
  OUT/speculators/hidden_states/hs_{i}.safetensors  hidden_states BF16 [T, 4, H] = R[2], R[L/2], R[L-3], R[L] (pre-norm)
                                                    token_ids I64 [T]  (vLLM's ExampleHiddenStatesConnector)
  OUT/speculators_legacy/data_{i}.pt + data_config.json   layer_ids [1, L/2-1, L-4, L-1] (layer outputs), the last
                                                    the pre-norm final state
  OUT/specforge/rows_0-2000/data_{i}.ckpt[.gz]      aux_hidden_state [1, T, 3H], hidden_state [1, T, H] post-norm;
                                                    odd rows gzipped (--compress)
  OUT/bad_layer_count      SpecForge with two aux layers ([1, T, 2H])
  OUT/bad_postnorm         legacy speculators whose final state is post-norm (the layout says pre-norm)
  OUT/bad_missing_key      SpecForge without loss_mask
  OUT/bad_shape            SpecForge whose aux_hidden_state has T-1 positions
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import sys

import numpy as np
import torch

import hf_reference
import safetensors_np


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def bf16(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float32)).to(torch.bfloat16)


def save_torch(obj, path: str, compress: bool = False) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if compress:
        buf = io.BytesIO()
        torch.save(obj, buf)
        with gzip.open(path, "wb", compresslevel=6) as f:
            f.write(buf.getvalue())
    else:
        torch.save(obj, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--rows", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = hf_reference.load_model(args.target)
    L = model.cfg.num_layers
    rows = json.load(open(args.rows))
    aux = [2, L // 2, L - 3]  # R ids: the default of every framework
    out = args.out
    for i, row in enumerate(rows):
        ids = np.array(row["ids"], dtype=np.int64)
        mask = torch.tensor(row["mask"], dtype=torch.int64)
        _, hidden = hf_reference.forward(model, ids)  # [L+1, T, H], hidden[L] pre-norm
        h = torch.as_tensor(hidden)
        post = rms_norm(h[L], model.norm.float(), model.cfg.rms_norm_eps)
        T = len(ids)
        stack = torch.stack([h[a] for a in aux] + [h[L]], dim=1)  # [T, 4, H]
        os.makedirs(os.path.join(out, "speculators", "hidden_states"), exist_ok=True)
        safetensors_np.save(os.path.join(out, "speculators", "hidden_states", f"hs_{i}.safetensors"),
                            {"hidden_states": stack.numpy(), "token_ids": ids},
                            {"hidden_states": "BF16", "token_ids": "I64"}, None)
        ids_t = torch.tensor(ids)
        legacy = {"input_ids": ids_t, "loss_mask": mask,
                  "hidden_states": [bf16(h[a]).contiguous() for a in aux] + [bf16(h[L])]}
        save_torch(legacy, os.path.join(out, "speculators_legacy", f"data_{i}.pt"))
        cat = torch.cat([h[a] for a in aux], dim=-1)
        record = {"input_ids": ids_t, "loss_mask": mask, "aux_hidden_state": bf16(cat).unsqueeze(0),
                  "hidden_state": bf16(post).unsqueeze(0)}
        save_torch(record, os.path.join(out, "specforge", "rows_0-2000", f"data_{i}.ckpt" + (".gz" if i % 2 else "")),
                   compress=bool(i % 2))
        if i == 0:
            bad = dict(record, aux_hidden_state=bf16(torch.cat([h[2], h[L // 2]], dim=-1)).unsqueeze(0))
            save_torch(bad, os.path.join(out, "bad_layer_count", f"data_{i}.ckpt"))
            save_torch(dict(legacy, hidden_states=legacy["hidden_states"][:3] + [bf16(post)]),
                       os.path.join(out, "bad_postnorm", f"data_{i}.pt"))
            save_torch({k: v for k, v in record.items() if k != "loss_mask"},
                       os.path.join(out, "bad_missing_key", f"data_{i}.ckpt"))
            save_torch(dict(record, aux_hidden_state=record["aux_hidden_state"][:, : T - 1].clone()),
                       os.path.join(out, "bad_shape", f"data_{i}.ckpt"))
    config = {"version": "2.0", "hidden_states": {"layer_ids": [a - 1 for a in aux] + [L - 1]}}
    for d in ("speculators_legacy", "bad_postnorm"):
        with open(os.path.join(out, d, "data_config.json"), "w") as f:
            json.dump(config, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
