import sys, time, numpy as np
import portable
from portable.bench.workloads import build
from portable.bench.peers.portable_peer import DeviceOnly
from portable.runtime_cl.backend import OpenCLBackend
cb, ooo = sys.argv[1] == "1", {"n": None, "t": True, "f": False}[sys.argv[2]]
be = OpenCLBackend(0, out_of_order=ooo, command_buffer=cb)
out = []
for wid in sys.argv[3:]:
    w = build(wid, "cpu")
    exe = portable.compile(w.mlir, device="opencl:0")
    d = DeviceOnly(exe.executable, be, w.make_inputs())
    for _ in range(30): d.run()
    ts = []
    for _ in range(400):
        a = time.perf_counter(); d.run(); ts.append(time.perf_counter() - a)
    out.append(f"{wid} {np.median(ts)*1e3:.3f}")
    d.close()
print(f"cmdbuf={cb} ooo={ooo}->{be.out_of_order} mode={d.mode}: " + ", ".join(out))
