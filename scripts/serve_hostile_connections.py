# The hostile connection cases of docs/serving.md ("Connections"), over raw sockets, as a Markdown table.
# Usage: python3 scripts/serve_hostile_connections.py build/eaglet ../shared/models/pycode-llama-19m
import json, re, socket, subprocess, sys, time
binary, model = sys.argv[1], sys.argv[2]
p = subprocess.Popen([binary, "serve", "-m", model, "-t", "1", "--port", "0", "--read-timeout", "2", "--max-connections", "8", "-c", "2048"], stderr=subprocess.PIPE, text=True)
port = None
log = []
for line in p.stderr:
    log.append(line)
    m = re.search(r"listening on http://[\d.]+:(\d+)", line)
    if m: port = int(m.group(1)); break
import threading
threading.Thread(target=lambda: [log.append(l) for l in p.stderr], daemon=True).start()
def conn(): return socket.create_connection(("127.0.0.1", port))
def req(body, extra=""):
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n{body}").encode()
def read_all(s, t=10):
    s.settimeout(t); out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except Exception: pass
    return out.decode(errors="replace")
def first_line(x): return x.split("\r\n")[0] if x else "(nothing; closed)"
rows = []
# non-streaming hang-up
s = conn(); s.sendall(req(json.dumps({"prompt": "import os\n", "max_tokens": 1900, "ignore_eos": True, "temperature": 0}))); time.sleep(0.3); s.close(); time.sleep(1.0)
fin = [l for l in log if "finish" in l][-1].strip()
rows.append(("non-streaming client hangs up after 0.3 s (max_tokens 1900)", "log: " + fin[fin.find("request"):][:120]))
# pipelined
body = json.dumps({"prompt": "x = 1", "max_tokens": 2})
s = conn(); s.sendall(req(body) * 3); out = read_all(s); s.close()
rows.append(("three pipelined requests on one connection", f"{out.count('HTTP/1.1 ')} answer ({first_line(out)}), then the connection closes"))
# duplicate / negative content-length
s = conn(); s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()); out = read_all(s); s.close()
rows.append(("two Content-Length headers", first_line(out) + " " + re.search(r'"message": ?"([^"]{0,90})', out).group(1) if "message" in out else first_line(out)))
s = conn(); s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{body}".encode()); out = read_all(s); s.close()
rows.append(("Content-Length: -5", first_line(out) + " " + (re.search(r'"message": ?"([^"]{0,90})', out).group(1) if "message" in out else "")))
# read timeout
s = conn(); s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"); t0 = time.time(); out = read_all(s); s.close()
rows.append(("request body never finished (--read-timeout 2)", f"{first_line(out)} after {time.time() - t0:.1f} s"))
# connection limit
idle = [conn() for _ in range(8)]; time.sleep(0.3)
s = conn(); s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); out = read_all(s); s.close()
rows.append(("a 9th connection while 8 are open (--max-connections 8)", first_line(out)))
for c in idle: c.close()
time.sleep(0.5)
s = conn(); s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); out = read_all(s); s.close()
rows.append(("/health once they closed", first_line(out)))
# stop strings too long
s = conn(); s.sendall(req(json.dumps({"prompt": "x", "stop": ["a" * 2000]}))); out = read_all(s); s.close()
rows.append(("one stop string of 2,000 bytes", first_line(out) + " " + (re.search(r'"message": ?"([^"]{0,90})', out).group(1) if "message" in out else "")))
print("| hostile case | answer now |\n|---|---|")
for a, b in rows: print(f"| {a} | {b} |")
p.kill()
