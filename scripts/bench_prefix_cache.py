# Prefix cache figures (docs/serving.md): a 20-turn chat's TTFT per turn, and 16 clients sharing a system prompt.
# Usage: python3 scripts/bench_prefix_cache.py BINARY MODEL LABEL [serve flags...]
import json, re, signal, subprocess, sys, threading, time, urllib.request
import served
binary, model, label = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
p, url = served.start(binary, ["-m", model, "-c", "4096", "--max-batch", "16", "-t", "2"] + extra, ("KV pool",))

def stream(prompt, max_tokens):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.time()
    r = urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                                      {"Content-Type": "application/json"}), timeout=1800)
    ttft, text, usage = None, "", None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]": continue
        d = json.loads(line[6:])
        if d.get("choices"):
            if ttft is None: ttft = time.time() - t0
            text += d["choices"][0].get("text", "")
        if d.get("usage"): usage = d["usage"]
    return ttft, text, usage, time.time() - t0

def metric(name):
    m = urllib.request.urlopen(url + "/metrics").read().decode()
    for l in m.splitlines():
        if l.startswith(name + " "): return float(l.split()[1])

# A: 20 turns; the history starts at ~1K tokens and each turn adds ~100 (84 of question, 16 answered).
history = "".join(f"record_{i} = {{'id': {i}, 'name': 'item{i}', 'size': {i * 3}}}\n" for i in range(45))
ttfts, rows = [], []
for turn in range(20):
    history += "".join(f"# turn {turn}: step {j} of the task reads value_{j * turn}\n" for j in range(5))
    ttft, text, usage, e2e = stream(history, 16)
    history += text
    ttfts.append(ttft)
    rows.append((turn + 1, usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"], ttft))
for r in rows: print(f"{label} chat turn {r[0]:2d}: prompt {r[1]:5d} tokens, cached {r[2]:5d}, TTFT {r[3] * 1e3:7.0f} ms")
print(f"{label} chat: TTFT mean {sum(ttfts) / len(ttfts) * 1e3:.0f} ms over 20 turns, turns 2-20 "
      f"{sum(ttfts[1:]) / 19 * 1e3:.0f} ms; total {sum(ttfts):.1f} s")

# B: 16 clients at once, each a shared ~1K-token system prompt and a question of its own.
system = "".join(f"RULE_{i} = 'answer with code that is short, typed and tested ({i})'\n" for i in range(62))
q0, h0 = metric("eaglet:prompt_tokens_total"), metric("eaglet:prefix_cache_hits_total")
out = [None] * 16
def client(i):
    out[i] = stream(system + f"# question {i}: write function_{i} that returns {i} squared\ndef function_{i}(", 16)
t0 = time.time()
ths = [threading.Thread(target=client, args=(i,)) for i in range(16)]
for t in ths: t.start()
for t in ths: t.join()
wall = time.time() - t0
prompt = sum(o[2]["prompt_tokens"] for o in out)
cached = sum(o[2]["prompt_tokens_details"]["cached_tokens"] for o in out)
print(f"{label} shared system prompt, 16 clients: prompt tokens {prompt} ({out[0][2]['prompt_tokens']} each), cached "
      f"{cached}, prefill tokens computed {prompt - cached}; TTFT mean {sum(o[0] for o in out) / 16:.1f} s, max "
      f"{max(o[0] for o in out):.1f} s; all answered in {wall:.1f} s")
print(f"{label} metrics: prompt_tokens_total +{metric('eaglet:prompt_tokens_total') - q0:.0f}, prefix_cache_hits_total "
      f"+{metric('eaglet:prefix_cache_hits_total') - h0:.0f}")
p.send_signal(signal.SIGKILL); p.wait()
