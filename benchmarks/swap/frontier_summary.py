#!/usr/bin/env python3
"""Summarises stash-plan --json --frontier outputs (one JSON document per file argument) as a
markdown table: per trace and preset, the tightest budget each policy fits (as x the
activations-only swap bound), and search_swap's predicted time at 1.05x that bound against the
best other policy there and the swap-only time lower bound (no swap schedule is faster). Every time
is predicted by the cost model. Reads outputs from before the bounds' renaming too (there
swap_bound_bytes was the activations-only bound and the time bound was swap-only)."""
import json
import sys


def summarise(path):
    doc = json.load(open(path))
    r = doc if "frontier" in doc else doc[0]
    b = r["frontier_bounds"]
    act = b.get("swap_bound_activations_bytes", b["swap_bound_bytes"])
    pts = r["frontier"]
    policies = list(dict.fromkeys(p["policy"] for p in pts))
    tight = {}
    for p in policies:
        fit = [q["budget_bytes"] for q in pts if q["policy"] == p and q["fits"]]
        tight[p] = min(fit) / act if fit else None
    target = act + act // 20
    at = [q for q in pts if q["budget_bytes"] == target]
    lb = {x["budget_bytes"]: x.get("swap_ms", x["ms"]) for x in b["time_lower_bound_ms"]}.get(target)
    search = next((q for q in at if q["policy"] == "search_swap"), None)
    others = [q["iteration_ms"] for q in at if q["policy"] != "search_swap" and q["fits"]]
    name = r["file"].split("/")[-1].replace(".trace", "")
    return name, b["hardware"], tight, search, min(others) if others else None, lb, policies


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


rows = [summarise(p) for p in sys.argv[1:]]
policies = rows[0][6]
print("| trace | preset | " + " | ".join(policies) + " | search_swap ms @1.05x | best other ms | lower bound ms |")
print("|---|---|" + "---:|" * (len(policies) + 3))
for name, hw, tight, search, other, lb, _ in rows:
    s = search["iteration_ms"] if search and search["fits"] else None
    print(f"| {name} | {hw} | " + " | ".join(fmt(tight[p]) for p in policies) +
          f" | {fmt(s)} | {fmt(other)} | {fmt(lb)} |")
