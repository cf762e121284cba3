"""Classifier heads at batch 1 (x[1, K] @ W[K, 1000] + bias, constant weights), as ResNet-50 (K = 2048) and
MobileNetV2 (K = 1280) end, compiled for the nvidia profile with split_k.MIN_SLICE 16 and 8:
`python make_heads.py OUT_DIR` writes {model}_s{16,8}.{vulkan,opencl}.ptx for benchmarks/gpu_time_probe.py."""

import sys

import numpy as np

import portable
import portable.compiler.pipeline as pipeline
from portable import profiles


def main() -> None:
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    opts = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    for name, k in (("resnet50", 2048), ("mobilenetv2", 1280)):
        g = portable.Graph(name)
        x = g.input((1, k))
        w = g.constant(rng.standard_normal((k, 1000)).astype(np.float32) * 0.02)
        g.output(g.add(g.matmul(x, w), g.constant(rng.standard_normal(1000).astype(np.float32))))
        for rows in (16, 8):
            pipeline.split_k.MIN_SLICE = rows
            for api in ("vulkan", "opencl"):
                exe = pipeline.compile_module(g.to_mlir(), opts, (api,))
                exe.profile = "nvidia"
                exe.save(f"{out}/{name}_s{rows}.{api}.ptx")
                print(name, rows, api, [d.grid for d in exe.dispatches])


if __name__ == "__main__":
    main()
