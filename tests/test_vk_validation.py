"""Vulkan kernels under the Khronos validation layer (Debian `vulkan-validationlayers`, scripts/setup.sh), with core
validation and synchronization validation on (runtime_vk/validation.py; the test session sets
PORTABLE_VK_VALIDATION=1). Core validation checks each SPIR-V module as the driver gets it (the layer's own
spirv-val), the kernel's interface against its pipeline layout (bindings, push-constant ranges, workgroup size
limits), descriptor updates and dispatches (grids within maxComputeWorkGroupCount); synchronization validation
reports hazards between dispatches and copies of a command buffer and across submissions (a missing or wrong
barrier). One case of each family of the strategies suite runs here on lavapipe and must give 0 reports and its
reference's numbers; a plan whose barrier is dropped must be reported.

GPU-assisted validation (PORTABLE_VK_GPU_AV=1) runs on a GPU host (scripts/gpu_av.py), not here: the packaged layer
(1.3.239) checks storage-buffer bounds only on a device with a descriptor-indexing feature enabled
(GpuAssisted::CheckForDescriptorIndexing), and lavapipe of Mesa 22.3 offers no VK_EXT_descriptor_indexing; with
GPU-assisted validation on, a kernel storing 400 bytes past a 4-byte buffer ran with no report. In-kernel
out-of-bounds accesses, races and uninitialised reads are checked by Oclgrind on the OpenCL kernels of a
sample of the suite (tests/test_oclgrind.py), not on the SPIR-V."""

from __future__ import annotations

import re

import numpy as np
import pytest

from portable.conformance import strategies

VULKAN = "vulkan:0"


def _need_vulkan():
    from conftest import AVAILABLE

    from portable import config

    if VULKAN not in AVAILABLE:
        pytest.skip("no Vulkan device")
    if not config.vk_validation():
        pytest.skip("PORTABLE_VK_VALIDATION is off")


def _families() -> list[str]:
    """The smallest case of each family of the suite (a family: the name up to its first size)."""
    smallest: dict[str, tuple[int, str]] = {}
    for s in strategies.specs():
        family = re.split(r"_\d", s.name)[0]
        size = sum(int(np.prod(shape)) for shape, _, _ in s.inputs.values())
        if family not in smallest or size < smallest[family][0]:
            smallest[family] = (size, s.name)
    return sorted(name for _, name in smallest.values())


def _validation_on(backend) -> None:
    """The layer is loaded with synchronization validation (its VK_EXT_validation_features), not just asked for."""
    from portable.runtime_vk import validation

    assert backend.validation_messages is backend._own.instance.validation_messages
    assert validation.FEATURES_EXTENSION in validation.layer_extensions()


@pytest.mark.parametrize("name", _families())
def test_strategy_kernels_validate_clean(name, tmp_path):
    import onnx
    from onnx import numpy_helper

    import portable
    from portable.conformance.compare import compare_outputs
    from portable.devices import open_device

    _need_vulkan()
    backend = open_device(VULKAN).backend
    _validation_on(backend)
    backend.validation_messages.clear()
    spec = {s.name: s for s in strategies.specs()}[name]
    strategies.write_case(spec, tmp_path, np.random.default_rng(strategies.SEED))
    d = tmp_path / f"test_{name}"
    ds = d / "test_data_set_0"
    ins = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in sorted(ds.glob("input_*.pb"))]
    want = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in sorted(ds.glob("output_*.pb"))]
    import json

    case = json.loads((d / "case.json").read_text())
    g = portable.compile(str(d / "model.onnx"), device=VULKAN)
    try:
        got = g(*ins)
    finally:
        g.close()
    msgs = list(backend.validation_messages)
    backend.validation_messages.clear()
    assert not msgs, "Vulkan validation layer reported:\n" + "\n".join(msgs)
    res = compare_outputs(list(got), want, case["rtol"], case["atol"])
    assert res["status"] == "pass", res


def test_a_dropped_barrier_is_reported(monkeypatch):
    """The check above is only as good as the layer's reports reaching it: two matmuls, the second reading the
    first's output, recorded with the runtime's barrier placement (memory/hazards.barriers) made to drop every
    barrier: synchronization validation must report the read-after-write between the two dispatches."""
    import portable
    import portable.runtime_vk.backend as vk_backend
    import portable.runtime_vk.replay as vk_replay
    from portable.devices import open_device

    _need_vulkan()
    backend = open_device(VULKAN).backend
    _validation_on(backend)
    g = portable.Graph()
    a, b = g.input((40, 56)), g.input((56, 56))
    g.output(g.matmul(g.matmul(a, b), b))
    exe = portable.compile(g, device=VULKAN)
    assert len(exe.executable.dispatches) == 2, exe.executable.plan_dict()
    for module in (vk_backend, vk_replay):
        monkeypatch.setattr(module, "barriers", lambda plan: [False] * len(plan))
    rng = np.random.default_rng(0)
    x, w = rng.random((40, 56), dtype=np.float32), rng.random((56, 56), dtype=np.float32)
    backend.validation_messages.clear()
    try:
        exe(x, w)
    finally:
        exe.close()
    msgs = list(backend.validation_messages)
    backend.validation_messages.clear()
    assert any("SYNC-HAZARD-READ" in m for m in msgs), msgs
