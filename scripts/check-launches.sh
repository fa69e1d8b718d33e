#!/usr/bin/env bash
# Static checks of stash's device code, run in CI (ctest lint.launches, lint.launches.self_test):
#
# 1. Every `<<<...>>>(...)` launch is followed by its error check: the next statement reads the
#    launch's error (cudaGetLastError() or cudaPeekAtLastError(): `STASH_CUDA_TRY(cudaGetLastError())`,
#    `return cudaGetLastError();`, `if (cudaError_t const e = cudaGetLastError(); ...)`). A launch
#    whose configuration is wrong fails only there; unchecked, the error surfaces in an unrelated
#    later call, or never.
# 2. No device code reads the encode destination. Heuristic: in a `__global__` or `__device__`
#    function, a non-const pointer parameter named `out` is an encoder's destination, which the
#    offload transfers place in the mapped pinned host slot, where every load is a bus round trip
#    (issue 26: tables scanned in place there and then read back by every thread or warp). Device
#    code may only store to it; a load through it is flagged: `out[i]` not on the left of `=`
#    (compound assignments read), a cast of it to a pointer to const, `load_u16/32/64(out ...)`, or
#    `out` as memcpy's source. Tables an encoder needs go to device scratch and are written out
#    once. Not caught: a load through another name for the slot (an alias taken by a non-const
#    cast and read later, a helper called with `out`), and decoders, whose `src` is the slot only
#    under decode_from::mapped (the staged default copies it to device memory first).
#
# Comments and string literals are blanked before matching (line numbers kept).
#
#   scripts/check-launches.sh                 check include/, tests/, benchmarks/, examples/, tools/
#   scripts/check-launches.sh FILE...         check these files (any extension)
#   scripts/check-launches.sh --self-test     run on every fixture in scripts/fixtures/check_launches/
#                                             and compare with its `// expect: KIND [LINE]` marks
#                                             (no LINE: the line of the mark)
#
# Exit status: 0 clean, 1 findings (or a self-test mismatch), 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null 2>&1 || { echo "check-launches: python3 not found" >&2; exit 2; }

exec python3 - "$@" <<'EOF'
import os
import re
import sys

ROOTS = ["include", "tests", "benchmarks", "examples", "tools"]
EXTS = (".cu", ".cuh", ".hpp", ".h", ".cpp", ".cc", ".inl")
FIXTURES = "scripts/fixtures/check_launches"
CHECKS = ("cudaGetLastError", "cudaPeekAtLastError")


def blank(text):
    """Comments and string/char literals replaced by spaces; newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + (c if j - 1 > i else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def match_close(text, pos, open_c, close_c):
    """Index just past the bracket closing the one at text[pos]; -1 if unbalanced."""
    depth = 0
    for j in range(pos, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


COUNTS = {"launches": 0, "encoders": 0}


def unchecked_launches(code):
    found = []
    for m in re.finditer(r"<<<", code):
        COUNTS["launches"] += 1
        end = code.find(">>>", m.end())
        if end < 0:
            continue
        k = end + 3
        while k < len(code) and code[k].isspace():
            k += 1
        if k >= len(code) or code[k] != "(":
            continue
        k = match_close(code, k, "(", ")")
        if k < 0:
            continue
        semi = code.find(";", k)
        if semi < 0 or code[k:semi].strip():
            found.append((line_of(code, m.start()), "launch", "a launch that is not a statement"))
            continue
        nxt = code.find(";", semi + 1)
        statement = code[semi + 1:nxt if nxt >= 0 else len(code)]
        if not any(c in statement for c in CHECKS):
            found.append((line_of(code, m.start()), "launch",
                          "launch not followed by its error check (cudaGetLastError)"))
    return found


DEVICE_FN = re.compile(r"__(?:global|device)__[^;{]*?\b(\w+)\s*\(", re.S)
READS = [
    (re.compile(r"reinterpret_cast\s*<[^>]*\bconst\b[^>]*>\s*\(\s*out\b"), "a cast of it to const"),
    (re.compile(r"static_cast\s*<[^>]*\bconst\b[^>]*>\s*\(\s*out\b"), "a cast of it to const"),
    (re.compile(r"\bload_u(?:8|16|32|64)\s*\(\s*out\b"), "load_u*"),
    (re.compile(r"\bmemcpy\s*\([^,;]*,\s*out\b"), "memcpy from it"),
]


def const_pointer(param):
    head = param.split("*")[0]
    return re.search(r"\bconst\b", head) is not None


def mapped_reads(code):
    found = []
    for m in DEVICE_FN.finditer(code):
        popen = m.end() - 1
        pclose = match_close(code, popen, "(", ")")
        if pclose < 0:
            continue
        k = pclose
        while k < len(code) and code[k] not in "{;":
            k += 1
        if k >= len(code) or code[k] != "{":
            continue  # a declaration
        params = [p.strip() for p in code[popen + 1:pclose - 1].split(",")]
        if not any(re.search(r"\*\s*(?:__restrict__\s+)?out$", p) and not const_pointer(p)
                   for p in params):
            continue
        COUNTS["encoders"] += 1
        body_end = match_close(code, k, "{", "}")
        body = code[k:body_end if body_end > 0 else len(code)]
        for rx, what in READS:
            for r in rx.finditer(body):
                found.append((line_of(code, k + r.start()), "mapped-read",
                              "device code reads the encode destination `out` (" + what + ")"))
        for r in re.finditer(r"\bout\s*\[", body):
            close = match_close(body, r.end() - 1, "[", "]")
            rest = body[close:close + 80] if close > 0 else ""
            if re.match(r"\s*=(?!=)", rest):
                continue  # a store
            found.append((line_of(code, k + r.start()), "mapped-read",
                          "device code reads the encode destination `out` (out[...])"))
    return found


def check_file(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        code = blank(f.read())
    return sorted(set(unchecked_launches(code) + mapped_reads(code)))


def tree_files():
    files = []
    for root in ROOTS:
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith("build")]
            files += [os.path.join(d, x) for x in names if x.endswith(EXTS)]
    return sorted(files)


def report(files):
    bad = 0
    for path in files:
        for line, kind, msg in check_file(path):
            print(f"{path}:{line}: {kind}: {msg}")
            bad += 1
    return bad


def self_test():
    fixtures = sorted(os.path.join(FIXTURES, x) for x in os.listdir(FIXTURES))
    ok = True
    for path in fixtures:
        expected = set()
        with open(path, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                for m in re.finditer(r"expect:\s*([\w-]+)(?:\s+(\d+))?", text):
                    expected.add((int(m.group(2)) if m.group(2) else number, m.group(1)))
        got = {(line, kind) for line, kind, _ in check_file(path)}
        if got != expected:
            ok = False
            print(f"check-launches self-test: {path}: expected {sorted(expected)}, got {sorted(got)}")
    print(f"check-launches self-test: {len(fixtures)} fixtures, " + ("all as expected" if ok else "MISMATCH"))
    return 0 if ok else 1


args = sys.argv[1:]
if args == ["--self-test"]:
    sys.exit(self_test())
if any(a.startswith("-") for a in args):
    print("usage: scripts/check-launches.sh [--self-test | FILE...]", file=sys.stderr)
    sys.exit(2)
files = args or tree_files()
bad = report(files)
print(f"check-launches: {len(files)} files, {COUNTS['launches']} launches, "
      f"{COUNTS['encoders']} device functions with an `out` destination, {bad} finding(s)")
sys.exit(1 if bad else 0)
EOF
