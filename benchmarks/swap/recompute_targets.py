#!/usr/bin/env python3
"""Issue 22's targets as a markdown table: per trace and preset, at 50% and 33% of the no_swap
peak, each policy's predicted iteration time and its slowdown over no_swap with room for
everything (stash-plan --json --budget P% output, one JSON document per file argument). A point
whose budget is below the memory bound (no keep / swap / recompute schedule fits it) is marked
"infeasible (bound)" rather than "no"; one whose iteration-time lower bound (stash-plan's
"time_lower_bound_ms", swap/swap_bounds.hpp iteration_time_lower_bound: no keep / swap /
recompute schedule is faster) is above the target is marked "unreachable (time bound)".
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
        bound = s.get("time_lower_bound_ms")
        bound = float("inf") if bound is None else float(bound)
        yield name, s["hardware"], base, cells, infeasible, bound


def main(args):
    print("| trace | preset | budget | no_swap ms (room for all) | " +
          " | ".join(POLICIES) + " | time bound | target | met |")
    print("|---|---|---:|---:|" + "---:|" * len(POLICIES) + "---:|---:|---|")
    met = total = infeasible_points = unreachable = cells = below = 0
    proven, still_open = [], []
    for spec in args:
        pct, path = spec.split("=", 1)
        for name, hw, base, cells_of, infeasible, bound in rows(path, pct):
            out = []
            for p in POLICIES:
                c = cells_of.get(p)
                out.append("-" if c is None else "%.2f (%+.1f%%)" % (c[0], c[1]))
            s = cells_of.get("search")
            ok = s is not None and s[1] <= TARGET[pct]
            met += ok
            total += 1
            infeasible_points += infeasible
            for c in cells_of.values():  # the bound (with recompute and wraps) holds for all
                cells += 1
                below += c[0] < bound * (1 - 1e-9)
            out_of_reach = not infeasible and bound > base * (1 + TARGET[pct] / 100)
            unreachable += out_of_reach
            if not ok and not infeasible:
                what = "%s %s %s: search %s, bound %+.1f%%" % (
                    name, hw, pct, "-" if s is None else "%+.1f%%" % s[1],
                    (bound / base - 1) * 100)
                (proven if out_of_reach else still_open).append(what)
            verdict = "yes" if ok else ("infeasible (bound)" if infeasible else
                                        "unreachable (time bound)" if out_of_reach else "no")
            cell = "-" if bound == float("inf") else "%.2f (%+.1f%%)" % (bound, (bound / base - 1) * 100)
            print("| %s | %s | %s | %.2f | %s | %s | +%d%% | %s |" %
                  (name, hw, pct, base, " | ".join(out), cell, TARGET[pct], verdict))
    print()
    print("search meets the target at %d of %d points; %d points are infeasible under any "
          "keep / swap / recompute schedule (budget below memory_lower_bound_bytes, "
          "swap/swap_bounds.hpp), so %d of the %d feasible points." %
          (met, total, infeasible_points, met, total - infeasible_points))
    print("At %d of the other points the time bound is above the target: no schedule reaches "
          "it; search meets %d of the %d points the bounds leave reachable." %
          (unreachable, met, total - infeasible_points - unreachable))
    print("Check: %d of the %d fitting policy cells above are below their point's time bound." %
          (below, cells))
    print()
    print("Missed points the time bound puts out of reach (no schedule meets the target): " +
          ("; ".join(proven) if proven else "none") + ".")
    print()
    print("Missed points still open (the bound is at or below the target; search may be "
          "improvable, or the bound loose): " + ("; ".join(still_open) if still_open else "none") +
          ".")
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
