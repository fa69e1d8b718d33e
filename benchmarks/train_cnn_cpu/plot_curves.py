#!/usr/bin/env python3
"""Draws bench_train_cnn_cpu's curves (CSV: config,step,loss,accuracy) as one SVG: training loss
(left) and running training accuracy (right) against step, one line per configuration. Plain
Python (no plotting library): python3 plot_curves.py CURVES.csv OUT.svg"""
import csv
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf"]
W, H, PAD = 440, 300, 50


def panel(x0, series, key, title, ymax, fmt):
    out = [f'<g transform="translate({x0},0)">',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<rect x="{PAD}" y="30" width="{W - PAD - 10}" height="{H - 30 - PAD}" fill="none" stroke="#999"/>']
    smax = max(s for rows in series.values() for s, _, _ in rows)
    sx = lambda s: PAD + (W - PAD - 10) * s / smax
    sy = lambda v: 30 + (H - 30 - PAD) * (1 - min(v, ymax) / ymax)
    for i in range(5):
        v = ymax * i / 4
        out.append(f'<text x="{PAD - 4}" y="{sy(v) + 4}" text-anchor="end" font-size="10">{fmt(v)}</text>')
        out.append(f'<line x1="{PAD}" x2="{W - 10}" y1="{sy(v)}" y2="{sy(v)}" stroke="#eee"/>')
    out.append(f'<text x="{(W + PAD) / 2}" y="{H - 15}" text-anchor="middle" font-size="11">step (0..{smax})</text>')
    for n, (name, rows) in enumerate(series.items()):
        pts = " ".join(f"{sx(s):.1f},{sy(r[key]):.1f}" for s, *rest in rows for r in [dict(loss=rest[0], acc=rest[1])])
        out.append(f'<polyline fill="none" stroke="{COLORS[n % len(COLORS)]}" stroke-width="1.5" points="{pts}"/>')
    out.append("</g>")
    return out


def main():
    series = {}
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            series.setdefault(row["config"], []).append(
                (int(row["step"]), float(row["loss"]), float(row["accuracy"])))
    lmax = max(l for rows in series.values() for _, l, _ in rows)
    lmax = min(lmax, 3.0)
    legend_h = 18 * len(series) + 10
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + legend_h}" font-family="sans-serif">',
           f'<rect width="{2 * W}" height="{H + legend_h}" fill="white"/>']
    svg += panel(0, series, "loss", "training loss (mean over 10 steps)", lmax, lambda v: f"{v:.1f}")
    svg += panel(W, series, "acc", "training accuracy (running, per epoch)", 1.0, lambda v: f"{100 * v:.0f}%")
    for n, name in enumerate(series):
        y = H + 14 + 18 * n
        svg.append(f'<line x1="{PAD}" x2="{PAD + 24}" y1="{y - 4}" y2="{y - 4}" stroke="{COLORS[n % len(COLORS)]}" stroke-width="2"/>')
        svg.append(f'<text x="{PAD + 30}" y="{y}" font-size="11">{name}</text>')
    svg.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
