# Inter-token latency of running streams while long prompts arrive (docs/serving.md, chunked prefill): 4 streams of
# short prompts decode; once all have begun, LONG-token prompts arrive one after another; every token gap of the 4
# streams from the first long prompt's arrival until the last one's first token is counted.
# Usage: python3 scripts/bench_chunked_prefill.py BINARY MODEL LABEL [serve flags...]
import json, random, re, signal, subprocess, sys, threading, time, urllib.request
import served
binary, model, label = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
STREAMS, LONG, ARRIVALS = 4, 4000, 2
p, url = served.start(binary, ["-m", model, "-c", "8192", "--max-batch", "8", "-t", "2"] + extra, ("KV pool", "prefill"))

def request(body):
    return urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                                         {"Content-Type": "application/json"}), timeout=3600)

stop = threading.Event()
arrivals = [[] for _ in range(STREAMS)]  # (time, tokens in the chunk)
def stream(i):
    rng = random.Random(100 + i)
    r = request({"prompt": [rng.randrange(3, 32000) for _ in range(64)], "max_tokens": 4000, "temperature": 0,
                 "ignore_eos": True, "stream": True, "return_token_origin": True})
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]": continue
        d = json.loads(line[6:])
        n = len(d.get("eaglet_tokens", []))
        if n: arrivals[i].append((time.time(), n))
        if stop.is_set(): r.close(); return

ths = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
for t in ths: t.start()
while not all(len(a) >= 8 for a in arrivals): time.sleep(0.2)
window = [time.time(), None]
ttfts = []
for k in range(ARRIVALS):
    rng = random.Random(k)
    t0 = time.time()
    r = request({"prompt": [rng.randrange(3, 32000) for _ in range(LONG)], "max_tokens": 1, "temperature": 0,
                 "stream": True})
    for raw in r:
        if raw.decode().startswith("data: {"): break
    ttfts.append(time.time() - t0)
    for _ in r: pass
window[1] = time.time()
time.sleep(1.0)
stop.set()
for t in ths: t.join()
gaps = []
for a in arrivals:
    for (t_prev, _), (t, n) in zip(a, a[1:]):
        if window[0] <= t <= window[1]: gaps += [(t - t_prev) / n] * n
gaps.sort()
q = lambda f: gaps[min(len(gaps) - 1, int(f * len(gaps)))] * 1e3
print(f"{label}: {len(gaps)} tokens of {STREAMS} streams over {window[1] - window[0]:.1f} s while {ARRIVALS} prompts of "
      f"{LONG} tokens arrived: ITL p50 {q(0.5):.0f} ms, p99 {q(0.99):.0f} ms, max {gaps[-1] * 1e3:.0f} ms; long "
      f"prompts' TTFT {', '.join(f'{x:.1f}' for x in ttfts)} s")
p.send_signal(signal.SIGKILL); p.wait()
