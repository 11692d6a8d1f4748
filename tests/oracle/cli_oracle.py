#!/usr/bin/env python3
"""Reference answers for the eaglet CLI tests, from the PyTorch oracle (hf_reference.py).

  cli_oracle.py greedy --model DIR --ids 1,2,3 -n N [--eos 2,5]   -> JSON list of greedily generated ids
  cli_oracle.py perplexity --model DIR --ids 1,2,3 --ctx C        -> JSON {"perplexity": p, "scored": n}

Token ids come from eaglet's tokenizer (itself checked against transformers.js), so these test the model part.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference  # noqa: E402


def greedy(model_dir, ids, n, eos):
    model = hf_reference.load_model(model_dir, "fp32")
    cache = model.new_cache()
    logits, _ = model.forward(ids, cache=cache)
    out = []
    for _ in range(n):
        token = int(torch.argmax(logits[-1]))
        if token in eos:
            break
        out.append(token)
        logits, _ = model.forward([token], cache=cache)
    return out


def perplexity(model_dir, ids, ctx):
    model = hf_reference.load_model(model_dir, "fp32")
    nll, scored = 0.0, 0
    for w in range(len(ids) // ctx):
        window = ids[w * ctx:(w + 1) * ctx]
        logits, _ = model.forward(window)
        logp = torch.log_softmax(logits.double(), dim=-1)
        for i in range(ctx - 1):
            nll -= float(logp[i, window[i + 1]])
            scored += 1
    return {"perplexity": math.exp(nll / scored), "scored": scored}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("greedy", "perplexity"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--eos", default="")
    ap.add_argument("--ctx", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ids = [int(t) for t in a.ids.split(",") if t.strip()]
    if a.mode == "greedy":
        eos = {int(t) for t in a.eos.split(",") if t.strip()}
        print(json.dumps(greedy(a.model, np.array(ids), a.n, eos)))
    else:
        print(json.dumps(perplexity(a.model, ids, a.ctx)))


if __name__ == "__main__":
    main()
