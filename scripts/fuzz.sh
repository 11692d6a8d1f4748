#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD_DIR (built with -DEAGLET_FUZZ=ON) for SECONDS each under ASan/UBSan, starting
# from fuzz/corpus/<target> and fuzz/regressions/<target>; new corpus entries go to BUILD_DIR/fuzz-corpus/<target>,
# crashing inputs to BUILD_DIR/fuzz-artifacts/<target>/. Prints executions and time per target; exits 1 if any
# target found something.   usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]
set -uo pipefail
build="$1"; seconds="$2"; shift 2
root="$(cd "$(dirname "$0")/.." && pwd)"
# Inputs the targets read whole: a safetensors image, JSON files, text.
declare -A max_len=([safetensors_header]=16384 [tokenizer_json]=32768 [dataset_rows]=8192 [tokenizer_text]=4096)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for bin in "$build"/fuzz/*_fuzz; do targets+=("$(basename "$bin" _fuzz)"); done
fi
# The targets write the files they parse: on tmpfs that costs little.
tmp="${TMPDIR:-/tmp}"; [ -w /dev/shm ] && tmp=/dev/shm
summary=(); failed=0
for t in "${targets[@]}"; do
  scratch="$build/fuzz-corpus/$t"; artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$scratch" "$artifacts"
  seeds=("$root/fuzz/corpus/$t"); [ -d "$root/fuzz/regressions/$t" ] && seeds+=("$root/fuzz/regressions/$t")
  log="$build/fuzz-$t.log"
  echo "fuzz: $t for ${seconds}s (log $log)"
  start=$SECONDS
  TMPDIR="$tmp" nice -n 10 "$build/fuzz/${t}_fuzz" -max_total_time="$seconds" -max_len="${max_len[$t]:-8192}" -rss_limit_mb=2048 \
    -timeout=30 -dict="$root/fuzz/fuzz.dict" -print_final_stats=1 -artifact_prefix="$artifacts/" "$scratch" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}')
  secs=$((SECONDS - start))
  verdict="ok"
  if [ $rc -ne 0 ]; then
    verdict="FOUND (rc $rc): $(ls -t "$artifacts" | head -1) — see $log"; failed=1
  fi
  summary+=("$(printf '%-20s %12s runs %6s s   %s' "$t" "${runs:-?}" "${secs:-?}" "$verdict")")
done
echo; echo "fuzz summary (FUZZ_SECONDS=$seconds; new corpus entries under $build/fuzz-corpus/):"
printf '  %s\n' "${summary[@]}"
[ $failed -eq 0 ] || echo "fuzz: fix each finding, then copy its input to fuzz/regressions/<target>/ (make test replays it)"
exit $failed
