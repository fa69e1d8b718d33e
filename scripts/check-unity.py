#!/usr/bin/env python3
"""stash_tests is a unity build (tests/CMakeLists.txt): batches of test files compiled as one
translation unit; so is stash_gpu_tests (every tests/<component>/*.cu in one nvcc unit). A name one file defines in its anonymous namespace would meet another file's
there, as a redefinition or, worse, as a silent extra overload. So every stash_tests source wraps
its code, after its includes, in

    namespace STASH_UNITY_ID {
    ...
    }  // namespace STASH_UNITY_ID

(a name unique per file in a unity batch; an anonymous namespace in a plain build).

  scripts/check-unity.py          check every stash_tests source (ctest lint.unity)
  scripts/check-unity.py --fix    add the wrapper where it is missing
Exit status: 0 clean (or fixed), 1 findings.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The sources stash_tests leaves out (tests/CMakeLists.txt's filters).
EXCLUDED = re.compile(r"/tests/(install|support|arch_check|compile_fail|rmm|train_cnn_cpu|fuzz)/")
OPEN = "namespace STASH_UNITY_ID {"
CLOSE = "}  // namespace STASH_UNITY_ID"


def sources():
    for path in sorted([*(ROOT / "tests").glob("*/**/*.cpp"), *(ROOT / "tests").glob("*/**/*.cu")]):
        if not EXCLUDED.search("/" + path.relative_to(ROOT).as_posix()):
            yield path


def problem(lines):
    """What is wrong with a file's wrapper, or None."""
    opens = [i for i, line in enumerate(lines) if line == OPEN]
    if len(opens) != 1:
        return f"expected one line '{OPEN}', found {len(opens)}"
    body = [line for line in lines if line.strip()]
    if not body or body[-1] != CLOSE:
        return f"the last line must be '{CLOSE}'"
    late = [i + 1 for i, line in enumerate(lines) if line.startswith("#include") and i > opens[0]]
    if late:
        return f"#include inside the wrapper at line {late[0]}"
    return None


def wrap(lines):
    last = max(i for i, line in enumerate(lines) if line.startswith("#include"))
    while lines[last + 1].startswith("#endif"):
        last += 1
    start = last + 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = len(lines)
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[: last + 1] + ["", OPEN, ""] + lines[start:end] + ["", CLOSE]


def main(argv):
    fix = argv[1:] == ["--fix"]
    if argv[1:] and not fix:
        print(__doc__, file=sys.stderr)
        return 2
    findings = 0
    for path in sources():
        lines = path.read_text().splitlines()
        why = problem(lines)
        if why is None:
            continue
        if fix and not any(line.startswith("namespace STASH_UNITY_ID") for line in lines):
            path.write_text("\n".join(wrap(lines)) + "\n")
            print(f"wrapped {path.relative_to(ROOT)}")
            continue
        print(f"{path.relative_to(ROOT)}: {why}")
        findings += 1
    if findings:
        print(f"{findings} file(s) without the unity wrapper; scripts/check-unity.py --fix adds it")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
