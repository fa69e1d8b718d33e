#!/usr/bin/env bash
# Fails (and lists the files) when a C++/CUDA source of the repository is not formatted with the
# repository's .clang-format. clang-format 14 is the checked version: formatting differs between
# releases, so another version would report files that are fine.
#   bash scripts/check-format.sh          check
#   bash scripts/check-format.sh --fix    rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/.."

cf=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -qE 'version 14\.'; then cf=$c; break; fi
done
[ -n "$cf" ] || { echo "check-format: clang-format 14 not found (apt-get install clang-format-14)" >&2; exit 1; }

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.hpp' '*.cuh' '*.cpp' '*.cu' '*.h' '*.inl')
else
  mapfile -t files < <(find include tests examples benchmarks -type f \
    \( -name '*.hpp' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.cu' -o -name '*.h' -o -name '*.inl' \) | sort)
fi

if [ "${1:-}" = "--fix" ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted (fix: bash scripts/check-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
