"""Exports ResNet-50 batch-1 conv layers (bias + relu, weights as inputs) for the nvidia profile at several
split_k_threads values: python mk_layers.py OUTDIR T1,T2,..."""
import json, sys
from pathlib import Path
import numpy as np, portable
from portable import profiles
from portable.compiler.pipeline import compile_module
LAYERS = {  # name: (c_in, hw_in, c_out, k, stride)
    "l1_1x1_64_256": (64, 56, 256, 1, 1), "l1_3x3_64": (64, 56, 64, 3, 1),
    "l2_3x3_128": (128, 28, 128, 3, 1), "l2_1x1_512_128": (512, 28, 128, 1, 1),
    "l3_3x3_256": (256, 14, 256, 3, 1), "l3_1x1_256_1024": (256, 14, 1024, 1, 1), "l3_1x1_1024_256": (1024, 14, 256, 1, 1),
    "l4_3x3_512": (512, 7, 512, 3, 1), "l4_1x1_512_2048": (512, 7, 2048, 1, 1), "l4_1x1_2048_512": (2048, 7, 512, 1, 1),
    "l4_3x3_512_s2": (512, 14, 512, 3, 2),
}
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
base = profiles.codegen_options(profiles.all_profiles()["nvidia"])
man = {}
for name, (c, hw, f, k, st) in LAYERS.items():
    g = portable.Graph(name)
    x, w, b = g.input((1, c, hw, hw)), g.input((f, c, k, k)), g.input((f,))
    g.output(g.relu(g.conv2d(x, w, b, stride=st, padding=k // 2, layout="NCHW")))
    for t in sys.argv[2].split(","):
        exe = compile_module(g.to_mlir(), dict(base, split_k_threads=int(t)), ("vulkan", "opencl"))
        p = out / f"{name}_{t}.ptx"; exe.save(p)
        man[p.name] = {"layer": name, "split_k_threads": int(t), "shape": [c, hw, f, k, st],
                       "dispatches": [[list(exe.kernels[d.kernel].workgroup_size), list(d.grid)] for d in exe.dispatches]}
        print(p.name, man[p.name]["dispatches"], flush=True)
(out / "layers.json").write_text(json.dumps(man, indent=1))
