#!/usr/bin/env python3
"""stash's search planner against MiniMalloc's solver on MiniMalloc's 11 challenging instances,
in the same run: per instance and repetition, stash-plan then the MiniMalloc binary, one after
the other. Prints a Markdown table (medians over the repetitions).

    compare_minimalloc.py --minimalloc PATH [--stash-plan PATH] [--data DIR]
                          [--repeat N] [--search-nodes N]

MiniMalloc is not part of stash: build it from its public source, outside this repository, and
pass its `minimalloc` binary. Reported per side: the solver's own time (stash: the search
planner's plan time, greedy start included; MiniMalloc: the "Elapsed time" it prints), the
process's CPU time (less sensitive to the machine's load), and whether the plan fits the
capacity (stash: its best plan, checked by stash::check_plan; MiniMalloc: --validate PASS).
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_stash(stash_plan, path, nodes):
    cmd = [stash_plan, "--json", path]
    if nodes is not None:
        cmd[1:1] = ["--search-nodes", str(nodes)]
    c0 = child_cpu()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    cpu = child_cpu() - c0
    report = json.loads(out)
    search = next(p for p in report["planners"] if p["name"] == "search")
    return {
        "s": search["plan_ms"] / 1e3,
        "cpu": cpu,
        "nodes": search["search_nodes"],
        "within": bool(report["best"]["within_capacity"]),
    }


def run_minimalloc(binary, path, capacity):
    with tempfile.NamedTemporaryFile(suffix=".csv") as out:
        cmd = [binary, f"--capacity={capacity}", f"--input={path}", f"--output={out.name}",
               "--validate"]
        c0 = child_cpu()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        cpu = child_cpu() - c0
    text = proc.stdout + proc.stderr
    elapsed = re.search(r"Elapsed time ([0-9.]+)s", text)
    return {
        "s": float(elapsed.group(1)) if elapsed else float("nan"),
        "cpu": cpu,
        "within": proc.returncode == 0 and "Validation PASS" in text,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minimalloc", required=True, help="MiniMalloc's minimalloc binary")
    ap.add_argument("--stash-plan", default=os.path.join(ROOT, "build", "test", "examples",
                                                         "stash-plan"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "minimalloc"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--search-nodes", type=int, default=None,
                    help="stash's node budget (default: stash-plan's default)")
    args = ap.parse_args()

    rows = []
    for name in "ABCDEFGHIJK":
        path = os.path.join(args.data, f"{name}.1048576.csv")
        stash_runs, mm_runs = [], []
        for _ in range(args.repeat):
            stash_runs.append(run_stash(args.stash_plan, path, args.search_nodes))
            mm_runs.append(run_minimalloc(args.minimalloc, path, 1048576))
        rows.append((name, stash_runs, mm_runs))
        print(f"{name} done", file=sys.stderr)

    med = lambda runs, key: statistics.median(r[key] for r in runs)
    print("| inst | stash s | stash cpu s | stash nodes | stash within cap | MiniMalloc s | "
          "MiniMalloc cpu s | MiniMalloc within cap | faster (solver s) |")
    print("|---|---:|---:|---:|---|---:|---:|---|---|")
    wins = 0
    for name, st, mm in rows:
        s_within = all(r["within"] for r in st)
        m_within = all(r["within"] for r in mm)
        s_time, m_time = med(st, "s"), med(mm, "s")
        faster = "stash" if s_within and (not m_within or s_time < m_time) else "MiniMalloc"
        wins += faster == "stash"
        print(f"| {name} | {s_time:.3f} | {med(st, 'cpu'):.3f} | {st[0]['nodes']} | "
              f"{'yes' if s_within else 'NO'} | {m_time:.3f} | {med(mm, 'cpu'):.3f} | "
              f"{'yes' if m_within else 'NO'} | {faster} |")
    print(f"\nstash faster and within capacity on {wins} of {len(rows)} "
          f"(medians of {args.repeat} runs each)")


if __name__ == "__main__":
    main()
