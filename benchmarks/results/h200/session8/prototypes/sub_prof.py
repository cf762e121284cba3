"""Experiment (not shipped): where the host time of a per-submission run goes (cProfile), bmm plan."""
import cProfile, io, pstats, sys, time
from portable.bench import workloads as W
from portable.bench.aot import read_manifest
from portable.bench.peers.portable_peer import DeviceOnly
from portable.devices import open_device
from portable.executable import Executable

man = read_manifest(".h200-s8")
out = io.StringIO()
for dev in ("vulkan:0", "opencl:0"):
    live = open_device(dev)
    exe = Executable.load(".h200-s8/" + man["workloads"]["bmm_attention"]["portable_by_api"][live.info.api])
    d = DeviceOnly(exe, live.backend, W.build("bmm_attention", "gpu").make_inputs())
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        d.run()
    pr = cProfile.Profile()
    t = time.perf_counter()
    pr.enable()
    for _ in range(2000):
        d.run()
    pr.disable()
    print(f"== {dev}: {(time.perf_counter() - t) / 2000 * 1e6:.1f} us per submission under the profiler", file=out)
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(14)
    d.close()
open(sys.argv[1], "w").write(out.getvalue())
print(out.getvalue()[:6000])
