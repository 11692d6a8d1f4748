# Starts `eaglet serve` on a free port for the session scripts; prints the start-up lines that match `show`.
import re, subprocess, threading

def start(binary, args, show=("KV pool",)):
    p = subprocess.Popen([binary, "serve", "--port", "0"] + args, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if any(s in line for s in show): print(line.strip()[:400])
        m = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, f"http://127.0.0.1:{m.group(1)}"
    raise SystemExit("eaglet serve ended before it listened")
