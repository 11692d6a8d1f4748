#!/bin/bash
# Sends each bad request of docs/serving.md's list to a live eaglet serve (started here on the default pair) and prints a
# Markdown row per case: the request, the HTTP status (and Retry-After), the error object's type, code and message.
# Needs curl and python3. Run from the repository root after a build: bash scripts/serve_bad_requests.sh
set -u
BIN=${BIN:-build/eaglet}
M=${MODEL:-../shared/models/pycode-llama-19m}
D=${DRAFTER:-drafters/pycode-llama-19m-eagle3}
PORT=${PORT:-18431}
WORK=$(mktemp -d)
$BIN serve -m $M -d $D --port $PORT -c 256 --max-batch 1 --max-queue 1 --api-key sekret -t 1 > $WORK/serve.log 2>&1 &
PID=$!
for i in $(seq 50); do curl -s localhost:$PORT/health >/dev/null && break; sleep 0.2; done
U=http://127.0.0.1:$PORT
AUTH="Authorization: Bearer sekret"
row() { # name, curl args...
  local name=$1; shift
  local out; out=$(curl -s -o $WORK/body -w '%{http_code} %header{retry-after}' "$@")
  local body; body=$(python3 -c 'import json,sys
try:
  j=json.load(open(sys.argv[1])); e=j.get("error",{}); print(e.get("type",""),"/",e.get("code",""),":",e.get("message","")[:160]) if e else print(json.dumps(j)[:120])
except Exception as x: print(open(sys.argv[1],errors="replace").read()[:120].replace("\n"," "))' "$WORK/body")
  echo "| $name | ${out% } | $body |"
}
echo "| request | status (Retry-After) | answer |"
echo "|---|---|---|"
row "no Authorization header" $U/v1/models
row "wrong API key" -H "Authorization: Bearer nope" $U/v1/models
row "/health without key" $U/health
row "malformed JSON" -H "$AUTH" -H 'Content-Type: application/json' -d '{"prompt": "x",' $U/v1/completions
row "body not an object" -H "$AUTH" -d '[1,2]' $U/v1/completions
row "prompt missing" -H "$AUTH" -d '{"max_tokens": 4}' $U/v1/completions
row "prompt a number" -H "$AUTH" -d '{"prompt": 5}' $U/v1/completions
row "max_tokens a string" -H "$AUTH" -d '{"prompt": "x", "max_tokens": "8"}' $U/v1/completions
row "max_tokens -1" -H "$AUTH" -d '{"prompt": "x", "max_tokens": -1}' $U/v1/completions
row "temperature -1" -H "$AUTH" -d '{"prompt": "x", "temperature": -1}' $U/v1/completions
row "top_p 1.5" -H "$AUTH" -d '{"prompt": "x", "top_p": 1.5}' $U/v1/completions
row "n 2" -H "$AUTH" -d '{"prompt": "x", "n": 2}' $U/v1/completions
row "logprobs 21" -H "$AUTH" -d '{"prompt": "x", "logprobs": 21}' $U/v1/completions
row "stop a number" -H "$AUTH" -d '{"prompt": "x", "stop": 3}' $U/v1/completions
row "token id beyond the vocabulary" -H "$AUTH" -d '{"prompt": [1, 99999999]}' $U/v1/completions
row "prompt + max_tokens beyond the context (256)" -H "$AUTH" -d '{"prompt": "x", "max_tokens": 1000}' $U/v1/completions
row "messages missing" -H "$AUTH" -d '{"model": "m"}' $U/v1/chat/completions
row "unknown role" -H "$AUTH" -d '{"messages": [{"role": "wizard", "content": "hi"}]}' $U/v1/chat/completions
row "content a number" -H "$AUTH" -d '{"messages": [{"role": "user", "content": 7}]}' $U/v1/chat/completions
row "top_logprobs without logprobs" -H "$AUTH" -d '{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3}' $U/v1/chat/completions
head -c 5000000 /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt": "/; s/$/"}/' > $WORK/big.json
row "body of 5 MB (limit 4 MiB)" -H "$AUTH" --data-binary @$WORK/big.json $U/v1/completions
row "unknown route" -H "$AUTH" $U/v1/nothing
row "tokenize without content" -H "$AUTH" -d '{}' $U/tokenize
row "detokenize with a string" -H "$AUTH" -d '{"tokens": "abc"}' $U/detokenize
# Queue full: one running, one waiting (--max-batch 1 --max-queue 1), the third is refused.
C=()
for k in 1 2; do curl -s -H "$AUTH" -d '{"prompt": "def f(x):", "max_tokens": 200, "ignore_eos": true}' $U/v1/completions > /dev/null & C+=($!); done
sleep 0.5
row "a third request while one runs and one waits (--max-batch 1 --max-queue 1)" -H "$AUTH" -d '{"prompt": "x", "max_tokens": 4}' $U/v1/completions
wait "${C[@]}"
# A streaming client that hangs up: the server's log shows the request cancelled.
curl -s -N --max-time 0.3 -H "$AUTH" -d '{"prompt": "def f(x):", "max_tokens": 240, "ignore_eos": true, "stream": true}' $U/v1/completions > /dev/null
sleep 1
echo "| streaming client hangs up after 0.3 s | - | server log: $(grep -i 'cancel\|abort\|disconnect' $WORK/serve.log | tail -1 | cut -c1-150) |"
# SIGTERM while a request runs.
curl -s -H "$AUTH" -d '{"prompt": "def f(x):", "max_tokens": 200, "ignore_eos": true}' $U/v1/completions > $WORK/sigterm_body &
CL=$!
sleep 0.3
kill -TERM $PID; wait $PID; rc=$?
wait $CL
echo "| SIGTERM while a request runs | exit $rc | running request answered with finish_reason $(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["choices"][0]["finish_reason"])' "$WORK/sigterm_body" 2>/dev/null) |"
rm -rf "$WORK"
