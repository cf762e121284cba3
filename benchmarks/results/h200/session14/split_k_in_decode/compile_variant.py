"""The small decoder compiled for the nvidia profile's Vulkan kernels without split_k (every matmul left whole),
saved as an executable that `python -m models.generate --model X.ptx` runs:
`python compile_variant.py dec.onnx nosplit.ptx` (dec.onnx from `python -m models.decoder --config small`)."""

import sys

import portable.compiler.pipeline as pipeline
from portable import profiles
from portable.api import graph_text


def main() -> None:
    source, out = sys.argv[1:3]
    pipeline.split_k.split_matmuls = lambda func, profile: 0  # leave every matmul whole
    opts = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    exe = pipeline.compile_module(graph_text(source), opts, ("vulkan",))
    exe.profile = "nvidia"
    exe.save(out)
    print(len(exe.dispatches), "dispatches")


if __name__ == "__main__":
    main()
