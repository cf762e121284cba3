"""Vulkan per-submission time of dwconv through bench_one, alone vs after the other workloads in one process (H200)."""
import sys, json, threading
from pathlib import Path
from portable.bench import workloads as W
from portable.bench.harness import bench_one
from portable.bench.peers.portable_peer import PortablePeer
dev, d = sys.argv[1], Path(sys.argv[2])
peer = PortablePeer(dev, d, json.loads((d / "manifest.json").read_text()))
def one(name):
    w = W.build(name, "gpu"); ins = w.make_inputs()
    p = peer.prepare(w, ins); ref = p.run_e2e(ins); p.close()
    r = bench_one(peer, w, ins, ref)
    return name, r["status"], round(r["device_ms"]["median_ms"] * 1e3, 1), round(r.get("kernel_ms", {}).get("median_ms", 0) * 1e3, 1)
res = [("alone",) + one("dwconv3x3_mobilenet"), ("alone",) + one("gemv_4096")]
for other in W.select(None)[:9]:
    res.append(("other",) + one(other))
res += [("after",) + one("dwconv3x3_mobilenet"), ("after",) + one("gemv_4096")]
for r in res: print(r)
