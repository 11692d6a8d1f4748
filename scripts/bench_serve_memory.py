# Server memory under load (docs/serving.md): 32 concurrent streaming clients, each PROMPT random token ids + N
# generated tokens; RSS and the KV pool's use sampled every 10 s until every answer is in.
# Usage: python3 scripts/bench_serve_memory.py BINARY MODEL LABEL [serve flags...]
import json, random, re, signal, subprocess, sys, threading, time, urllib.request
import served
binary, model, label = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
CLIENTS, PROMPT, N = 32, 1900, 100
p, url = served.start(binary, ["-m", model, "-c", "2048", "--max-batch", "32", "--max-queue", "64", "-t", "2"] + extra, ("KV pool",))

def rss_mb():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1]) / 1024

def metrics():
    out = {}
    for l in urllib.request.urlopen(url + "/metrics").read().decode().splitlines():
        if l.startswith("eaglet:") and " " in l and "{" not in l:
            k, v = l.split()[:2]; out[k] = float(v)
    return out

vocab = 32000
done = [None] * CLIENTS
def client(i):
    rng = random.Random(i)
    body = {"prompt": [rng.randrange(3, vocab) for _ in range(PROMPT)], "max_tokens": N, "temperature": 0,
            "ignore_eos": True, "stream": True}
    r = urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                                      {"Content-Type": "application/json"}), timeout=7200)
    for _ in r: pass
    done[i] = time.time()

idle = rss_mb()
print(f"{label}: idle RSS {idle:.0f} MB")
t0 = time.time()
ths = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in ths: t.start()
peak = idle
while any(t.is_alive() for t in ths):
    time.sleep(10)
    r, m = rss_mb(), metrics()
    peak = max(peak, r)
    print(f"{label} {time.time() - t0:6.0f} s: RSS {r:6.0f} MB, running {m.get('eaglet:num_requests_running', 0):.0f}, "
          f"waiting {m.get('eaglet:num_requests_waiting', 0):.0f}, KV use {m.get('eaglet:kv_cache_usage_perc', 0) * 100:.0f}%, "
          f"blocks used peak {m.get('eaglet:kv_cache_blocks_used_peak', 0):.0f} of "
          f"{m.get('eaglet:kv_cache_blocks_total', 0):.0f}, preemptions {m.get('eaglet:num_preemptions_total', 0):.0f}")
m = metrics()
print(f"{label}: all {CLIENTS} answered in {max(done) - t0:.0f} s; RSS peak {peak:.0f} MB (idle {idle:.0f}), "
      f"generated {m.get('eaglet:generation_tokens_total', 0):.0f} tokens, preemptions "
      f"{m.get('eaglet:num_preemptions_total', 0):.0f}")
p.send_signal(signal.SIGKILL); p.wait()
