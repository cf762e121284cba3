"""The PNG: per device, throughput of portable and of each comparable peer (device-only medians, log scale),
compute-bound work in GFLOP/s and memory-bound work in GB/s, plus the fraction of the device's peak where
peaks.py knows it. Needs matplotlib (`pip install 'portable[bench]'`)."""

from __future__ import annotations

from pathlib import Path

from .peaks import fraction_of_peak, peak_for
from .report import index, median_ms, peers_for

COLORS = {"portable": "#d62728", "iree": "#1f77b4", "tinygrad": "#2ca02c", "torch": "#9467bd",
          "numpy": "#7f7f7f", "onnxruntime": "#bcbd22"}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devs = result["devices"]
    if not devs:
        return
    idx = index(result)
    ncols = 3 if any(peak_for(d["name"]) for d in devs) else 2
    fig, axes = plt.subplots(len(devs), ncols, figsize=(6.5 * ncols, 0.5 + 4.2 * len(devs)), squeeze=False)
    for row, dev in enumerate(devs):
        sc = dev["size_class"]
        ws = result["workloads"].get(sc, {})
        peers = [("portable", dev["uri"])] + peers_for(result, dev)
        for col, bound in enumerate(("compute", "memory")):
            ax = axes[row][col]
            ids = [wid for wid, w in ws.items() if w["bound"] == bound]
            if not ids:  # e.g. a models-only run: nothing memory-bound (an empty log axis cannot be drawn)
                ax.axis("off")
                ax.text(0.5, 0.5, f"no {bound}-bound workloads", ha="center", va="center")
                continue
            height = 0.8 / len(peers)
            for k, (p, where) in enumerate(peers):
                ys, xs = [], []
                for j, wid in enumerate(ids):
                    rec = idx.get((p, where, sc, wid))
                    ms = median_ms(rec)
                    if rec is not None and not ms and rec["status"] not in ("skipped",):
                        ax.text(0.01, j + k * height, f"{p}: {rec['status']}", fontsize=6, va="center",
                                color=COLORS.get(p, "#333333"), transform=ax.get_yaxis_transform())
                    if ms:
                        w = ws[wid]
                        per_s = (w["flops"] if bound == "compute" else w["bytes"]) / (ms / 1e3) / 1e9
                        ys.append(j + k * height)
                        xs.append(per_s)
                ax.barh(ys, xs, height=height, color=COLORS.get(p, "#333333"), label=p)
            ax.set_yticks([j + 0.4 - height / 2 for j in range(len(ids))])
            ax.set_yticklabels([ws[i]["label"] for i in ids], fontsize=7)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_xlabel("GFLOP/s" if bound == "compute" else "GB/s (min. traffic)")
            ax.set_title(f"{dev['uri']} {dev['name'][:40]}: {bound}-bound", fontsize=9)
            ax.grid(axis="x", alpha=0.3)
            if col == 0:
                ax.legend(fontsize=7, loc="best", framealpha=0.85)
        if ncols == 3:
            ax = axes[row][2]
            if peak_for(dev["name"]):
                ids = list(ws)
                height = 0.8 / len(peers)
                for k, (p, where) in enumerate(peers):
                    ys, xs = [], []
                    for j, wid in enumerate(ids):
                        ms = median_ms(idx.get((p, where, sc, wid)))
                        f = fraction_of_peak(dev["name"], ws[wid], ms / 1e3) if ms else None
                        if f is not None:
                            ys.append(j + k * height)
                            xs.append(100 * f)
                    ax.barh(ys, xs, height=height, color=COLORS.get(p, "#333333"), label=p)
                    for y, x in zip(ys, xs):  # small fractions are invisible as bars: print every value
                        ax.text(min(x, 100) + 0.5, y, f"{x:.3g}%", fontsize=5, va="center")
                ax.set_yticks([j + 0.4 - height / 2 for j in range(len(ids))])
                ax.set_yticklabels([ws[i]["label"] for i in ids], fontsize=7)
                ax.invert_yaxis()
                ax.set_xlim(0, 100)
                ax.set_xlabel("% of peak (FLOP/s of the dtype, or HBM bandwidth)")
                ax.set_title(f"{dev['uri']}: fraction of peak", fontsize=9)
                ax.grid(axis="x", alpha=0.3)
            else:
                ax.axis("off")
                ax.text(0.5, 0.5, "no published peak for this device", ha="center", va="center")
    fig.suptitle(f"portable vs peers, device-only medians ({result['started']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
