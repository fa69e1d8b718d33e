#!/usr/bin/env python3
"""Checks stash's one-way component order over the #include lines (docs/architecture.md).

A header in include/stash/<component>/ may include only headers of components below it, and of
its own component; nothing includes another component's detail/ headers (examples, benchmarks,
tests and the stash_tools target included); tests, benchmarks and tools never include an
example's source by relative path (code they share with an example lives in stash_tools,
tools/include/stash_tools/). Exits 1 with one line per violation.
"""
import pathlib
import re
import sys

# Rank of each component: a component includes only strictly lower ranks (and itself).
# Components of one rank are siblings and do not include each other.
RANK = {
    "core": 0,
    "trace": 1,
    "pool": 2, "codec": 2,
    "sim": 3,
    "swap": 4,
    "offload": 5, "projection": 5,
    "allocator": 6,   # include/stash/allocator.hpp
    "testing": 7,     # conformance kits: may use everything they check
    "umbrella": 8,    # include/stash/stash.cuh
}
TOP_LEVEL = {"allocator.hpp": "allocator", "stash.cuh": "umbrella", "version.hpp": "core"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](stash/[^>"]+)[>"]')
# "../../examples/x.hpp", "../examples/x.hpp", ...: a relative path into examples/.
EXAMPLE_SOURCE = re.compile(r'^\s*#\s*include\s*"(\.\./)+examples/')


def component_of(rel):
    """Component of a path relative to include/ (stash/...), or None if unknown."""
    parts = rel.split("/")
    if len(parts) == 2:
        return TOP_LEVEL.get(parts[1])
    if parts[1] == "detail":  # include/stash/detail/: the facade's (allocator.hpp's) internals
        return "allocator"
    return parts[1] if parts[1] in RANK else None


def is_detail(rel):
    return "/detail/" in rel


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    errors = []
    headers = sorted((root / "include").rglob("*"))
    for path in headers:
        if not path.is_file():
            continue
        rel = path.relative_to(root / "include").as_posix()
        me = component_of(rel)
        if me is None:
            errors.append(f"{rel}: not in a known component ({', '.join(sorted(RANK))})")
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            other = component_of(target)
            where = f"include/{rel}:{n}"
            if other is None:
                errors.append(f"{where}: includes {target}, which is in no known component")
            elif other != me and is_detail(target):
                errors.append(f"{where}: {me} includes {other}'s private {target}")
            elif other != me and RANK[other] >= RANK[me]:
                errors.append(f"{where}: {me} (rank {RANK[me]}) includes {target} of {other} "
                              f"(rank {RANK[other]}): components include only lower ones")
    for folder in ("examples", "benchmarks", "tests", "tools"):
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or path.suffix not in {".hpp", ".cuh", ".cpp", ".cu", ".h"}:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and is_detail(m.group(1)) and folder != "tests":
                    errors.append(f"{path.relative_to(root)}:{n}: a client includes the private "
                                  f"{m.group(1)}")
                if folder != "examples" and EXAMPLE_SOURCE.match(line):
                    errors.append(f"{path.relative_to(root)}:{n}: includes an example's source by "
                                  f"relative path; move the shared code into stash_tools "
                                  f"(tools/include/stash_tools/)")
    for e in errors:
        print(e)
    print(f"check-layering: {len(errors)} violation(s) in {len(headers)} headers")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
