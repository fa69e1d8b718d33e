#!/usr/bin/env bash
# ctest tools.record_trace.resnet18: records resnet18's step (batch 32) with record_trace.py and
# compares it with data/traces/resnet18_b32.trace byte for byte. Skipped (exit 77) where no
# python3 has torch and torchvision (CI has neither; Debian: python3-torch python3-torchvision).
# Usage: check_reproduces.sh DATA_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=$1
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch, torchvision' 2>/dev/null; then
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
    "$py" "$here/record_trace.py" resnet18 --batch 32 --out "$out"
    cmp "$out" "$data/traces/resnet18_b32.trace"
    echo "record_trace.py reproduces data/traces/resnet18_b32.trace"
    exit 0
  fi
done
echo "skipped: no python3 with torch and torchvision (Debian: python3-torch python3-torchvision)"
exit 77
