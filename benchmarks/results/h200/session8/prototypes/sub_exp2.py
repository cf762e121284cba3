"""Experiment (not shipped): per-submission time of real plans, completion thread waiting in the driver (old
settle) vs waiting on the caller's claim (new settle), alternating blocks."""
import json, sys, time
import numpy as np
from portable import completion
from portable.bench import workloads as W
from portable.bench.aot import read_manifest
from portable.bench.peers.portable_peer import DeviceOnly
from portable.devices import open_device
from portable.executable import Executable


def old_settle(self):
    try:
        if self._caller_wait is None:
            with self._claim:
                self._wait()
                self._finish_once()
            return
        self._wait()
    except BaseException as e:  # noqa: BLE001
        with self._claim:
            if not self.done():
                self.set_exception(e)
        return
    with self._claim:
        self._finish_once()


def new_settle(self):
    try:
        if self._caller_wait is None:
            with self._claim:
                self._wait()
                self._finish_once()
            return
        if not self._claim.acquire(blocking=False):
            with self._claim:
                if self.done():
                    return
        else:
            self._claim.release()
        self._wait()
    except BaseException as e:  # noqa: BLE001
        with self._claim:
            if not self.done():
                self.set_exception(e)
        return
    with self._claim:
        self._finish_once()


man = read_manifest(".h200-s8")
res = []
for dev in ("vulkan:0", "opencl:0"):
    live = open_device(dev)
    api = live.info.api
    for wid in ("bmm_attention", "softmax_4096", "gemv_4096", "dwconv3x3_mobilenet"):
        exe = Executable.load(".h200-s8/" + man["workloads"][wid]["portable_by_api"][api])
        d = DeviceOnly(exe, live.backend, W.build(wid, "gpu").make_inputs())
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            d.run()
        for label, fn in (("driver_wait", old_settle), ("claim_wait", new_settle)) * 3:
            completion.Completion.settle = fn
            s = []
            for _ in range(300):
                t = time.perf_counter(); d.run(); s.append((time.perf_counter() - t) * 1e6)
            s = np.array(s)
            rec = {"device": dev, "workload": wid, "settle": label, "median_us": round(float(np.median(s)), 1),
                   "p10_us": round(float(np.percentile(s, 10)), 1), "p90_us": round(float(np.percentile(s, 90)), 1)}
            res.append(rec); print(json.dumps(rec), flush=True)
        d.close()
json.dump(res, open(sys.argv[1], "w"), indent=1)
