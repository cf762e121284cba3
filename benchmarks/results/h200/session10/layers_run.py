"""H200: device time of each exported ResNet-50 layer variant (sum over its dispatches), both APIs, and PyTorch's
conv2d+bias+relu on the same shapes (CUDA events, 20 back to back after a second of warm-up)."""
import json, sys, tempfile, time
from pathlib import Path
import numpy as np
sys.path.insert(0, "benchmarks")
import gpu_time_probe as P
d = Path(sys.argv[1]); out = Path(sys.argv[2])
man = json.loads((d / "layers.json").read_text())
res = {"portable": {}, "torch": {}}
for api in ("vulkan:0", "opencl:0"):
    for name in sorted(man):
        tmp = Path(tempfile.mkdtemp()) / "r.json"
        try:
            P.profile_dispatches(d / name, api, tmp)
            r = json.loads(tmp.read_text())
            res["portable"][f"{api}/{name}"] = {"total_ms": r["total_ms"], "ms": [x["ms"] for x in r["dispatches"]]}
        except Exception as e:
            res["portable"][f"{api}/{name}"] = {"error": str(e)[:300]}
        print(api, name, res["portable"][f"{api}/{name}"], flush=True)
try:
    import torch, torch.nn.functional as F
    torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
    for layer in sorted({v["layer"]: v["shape"] for v in man.values()}.items()):
        name, (c, hw, f, k, st) = layer
        x = torch.randn(1, c, hw, hw, device="cuda"); w = torch.randn(f, c, k, k, device="cuda"); b = torch.randn(f, device="cuda")
        fn = lambda: F.relu(F.conv2d(x, w, b, stride=st, padding=k // 2))
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0: fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(5):
            s.record()
            for _ in range(20): fn()
            e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 20)
        res["torch"][name] = {"ms": min(ts), "runs": ts}
        print("torch", name, min(ts), flush=True)
except ImportError as e:
    res["torch"] = {"skipped": str(e)}
out.write_text(json.dumps(res, indent=1))
