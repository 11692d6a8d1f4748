#!/usr/bin/env bash
# The code follows .clang-format: every tracked C++ file under src/, tests/ and fuzz/ is already formatted.
# Usage: format_check.sh [--fix]. Exit 77 (ctest: skipped) where no clang-format is installed.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null 2>&1 || { echo "SKIP: clang-format is not installed"; exit 77; }
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'tests/*.cpp' 'tests/*.h' 'fuzz/*.cpp' 'fuzz/*.h' 2>/dev/null)
[ ${#files[@]} -gt 0 ] || { echo "SKIP: not a git checkout"; exit 77; }
if [ "${1:-}" = "--fix" ]; then clang-format -i "${files[@]}"; exit 0; fi
bad=()
for f in "${files[@]}"; do clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f"); done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted by .clang-format ($(clang-format --version)): ${bad[*]}"
  echo "fix: bash scripts/format_check.sh --fix"
  exit 1
fi
echo "${#files[@]} files formatted"
