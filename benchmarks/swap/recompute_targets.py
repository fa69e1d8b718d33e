#!/usr/bin/env python3
"""Issue 22's targets as a markdown table: per trace and preset, at 50% and 33% of the no_swap
peak, each policy's predicted iteration time and its slowdown over no_swap with room for
everything (stash-plan --json --budget P% output, one JSON document per file argument). A point
whose budget is below the memory bound (no keep / swap / recompute schedule fits it) is marked
"infeasible (bound)" rather than "no".
Every time is predicted by stash's cost model, not measured."""
import json
import sys

POLICIES = ["search", "checkpoint", "dtr", "search_swap", "vdnn_all"]
TARGET = {"50%": 10.0, "33%": 30.0}


def rows(path, pct):
    doc = json.load(open(path))
    for r in (doc if isinstance(doc, list) else [doc]):
        s = r["swap"]
        base = s["baseline_ms"]
        name = r["file"].split("/")[-1].replace(".trace", "")
        cells = {}
        for p in r["policies"]:
            if p.get("fits"):
                cells[p["name"]] = (p["iteration_ms"], (p["iteration_ms"] / base - 1) * 100,
                                    p.get("recompute_entries", 0))
        infeasible = s.get("memory_bound_bytes") is not None and \
            s["budget_bytes"] < s["memory_bound_bytes"]
        yield name, s["hardware"], base, cells, infeasible


def main(args):
    print("| trace | preset | budget | no_swap ms (room for all) | " +
          " | ".join(POLICIES) + " | target | met |")
    print("|---|---|---:|---:|" + "---:|" * len(POLICIES) + "---:|---|")
    met = total = infeasible_points = 0
    for spec in args:
        pct, path = spec.split("=", 1)
        for name, hw, base, cells, infeasible in rows(path, pct):
            out = []
            for p in POLICIES:
                c = cells.get(p)
                out.append("-" if c is None else "%.2f (%+.1f%%)" % (c[0], c[1]))
            s = cells.get("search")
            ok = s is not None and s[1] <= TARGET[pct]
            met += ok
            total += 1
            infeasible_points += infeasible
            verdict = "yes" if ok else ("infeasible (bound)" if infeasible else "no")
            print("| %s | %s | %s | %.2f | %s | +%d%% | %s |" %
                  (name, hw, pct, base, " | ".join(out), TARGET[pct], verdict))
    print()
    print("search meets the target at %d of %d points; %d points are infeasible under any "
          "keep / swap / recompute schedule (budget below memory_lower_bound_bytes, "
          "swap/swap_bounds.hpp), so %d of the %d feasible points." %
          (met, total, infeasible_points, met, total - infeasible_points))


if __name__ == "__main__":
    main(sys.argv[1:])
