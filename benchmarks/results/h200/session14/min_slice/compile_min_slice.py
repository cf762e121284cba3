"""The small decoder's Vulkan kernels for the nvidia profile with split_k.MIN_SLICE (rows of the weight per
slice of a matrix-vector product) set to another value, saved for `python -m models.generate --model X.ptx`:
`python compile_min_slice.py dec.onnx s8.ptx 8`."""

import sys

import portable.compiler.pipeline as pipeline
from portable import profiles
from portable.api import graph_text


def main() -> None:
    source, out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pipeline.split_k.MIN_SLICE = rows
    exe = pipeline.compile_module(graph_text(source), profiles.codegen_options(profiles.all_profiles()["nvidia"]),
                                  ("vulkan",))
    exe.profile = "nvidia"
    exe.save(out)
    print(len(exe.dispatches), "dispatches; grids", sorted({d.grid for d in exe.dispatches}))


if __name__ == "__main__":
    main()
