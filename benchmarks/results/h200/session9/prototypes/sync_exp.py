"""Vulkan per-submission time of recorded plans (H200): the current path (submit() -> Completion, the completion
thread also waiting) against a synchronous one (submit, poll the timeline in the caller, copy out; no Future, no
completion thread), alternating, several blocks of 300 submissions each."""
import sys, json, time, statistics
from pathlib import Path
import numpy as np
from portable.bench import workloads as W
from portable.bench.peers.portable_peer import DeviceOnly
from portable.executable import Executable
from portable.runtime_vk import replay
from portable.runtime_vk.replay import VulkanRecording, SPIN_S


def run_sync(self, inputs):
    self._idle.wait()
    self._idle.clear()
    what = f"a plan of {self.dispatches} dispatches"
    dev = self.device
    view = self.staging.view
    for arr, (off, n) in zip(inputs, self._in):
        if n:
            view[off:off + n] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)[:n]
    value = self.last_value
    for i, part in enumerate(self._parts):
        for j, lane in enumerate(part.waits):
            part.template.set_wait(value if lane is part.after else 0, j)
        value = dev.submit_recorded(part.template, what, self._fence, part.lane)
    self.last_value = value
    dev.wait_value(value, what, self._parts[-1].lane, spin_s=SPIN_S)
    return self._finish()


import os
N = int(os.environ.get("N", "300"))
from portable.devices import open_device
d = Path(sys.argv[1]); out = Path(sys.argv[2])
man = json.loads((d / "manifest.json").read_text())
live = open_device("vulkan:0")
res = []
for name in ["dwconv3x3_mobilenet", "gemv_4096", "softmax_4096", "bmm_attention", "conv1x1_mobilenet"]:
    w = W.build(name, man.get("size_class", "gpu")); ins = w.make_inputs()
    exe = Executable.load(d / man["workloads"][name]["portable_by_api"]["vulkan"])
    do = DeviceOnly(exe, live.backend, ins)
    rec = do.recording
    for _ in range(N):
        rec.submit([]).result()
    for block in range(4):
        for mode in ("future", "sync"):
            ts = []
            for _ in range(N):
                t = time.perf_counter()
                if mode == "future":
                    rec.submit([]).result()
                else:
                    run_sync(rec, [])
                ts.append(time.perf_counter() - t)
            r = {"workload": name, "mode": mode, "block": block, "median_us": round(statistics.median(ts) * 1e6, 1),
                 "p10_us": round(np.percentile(ts, 10) * 1e6, 1), "p90_us": round(np.percentile(ts, 90) * 1e6, 1)}
            res.append(r); print(json.dumps(r), flush=True)
    do.close()
out.write_text(json.dumps(res, indent=1))
