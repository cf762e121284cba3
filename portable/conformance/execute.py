"""One case, in a worker process: import the ONNX model once, then compile, run and compare on each column.

A column is a device URI ("vulkan:0") or, with a profile, "<profile>@<device>" (compile for the profile,
validate SPIR-V with spirv-val, run on the device only where the profile's assumptions hold there).
Every outcome is a record dict: status pass | fail | unsupported | error | compiled-only, plus detail.
"""

from __future__ import annotations

import json
import os
import re
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError, PortableError, UnsupportedOp
from ..runtime_vk import spirv as spirv_module
from ..runtime_vk.spirv import CAPABILITY_NEEDS
from .cases import Case, load_tensor
from .compare import compare_outputs
from .repro import REPRO_LIMIT


def _record(status: str, **kw) -> dict:
    return {"status": status, **{k: v for k, v in kw.items() if v is not None}}


def classify_failure(e: BaseException, stage: str, phase: str) -> dict:
    """A record for an exception raised in `phase` (import | compile | run)."""
    msg = str(e).strip()
    if isinstance(e, UnsupportedOp):
        low = msg.lower()
        reason = "dtype" if "dtype" in low else "shape" if "data-dependent shape" in low or "no shape" in low \
            else "type" if "only tensors are supported" in low else "op"
        return _record("unsupported", phase=phase, reason=reason, stage=stage, message=msg[:4000])
    if isinstance(e, PortableError):
        return _record("error", phase=phase, stage=getattr(e, "stage", "") or stage, kind=type(e).__name__,
                       message=msg[:4000])
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
    return _record("error", phase=phase, stage=stage, kind=type(e).__name__,
                   message=f"{type(e).__name__}: {msg}"[:3000], traceback=tb[-3000:])


def _case_ops(model) -> list[str]:
    return sorted({n.op_type for n in model.graph.node})


# Formal input parameters (by their schema names) that carry shapes, axes, index arguments or fixed parameters,
# not data.
SHAPE_LIKE = {"shape", "axes", "starts", "ends", "steps", "pads", "repeats", "k", "sizes", "scales", "roi", "split",
              "depth", "start", "limit", "delta", "axis", "block_size", "output_shape", "kernel_shape",
              # Parameters that real models carry as initializers: a Pad's constant value, OneHot's off/on
              # values, quantization scales and zero points.
              "constant_value", "values", "a_scale", "a_zero_point", "b_scale", "b_zero_point", "x_scale",
              "x_zero_point", "y_scale", "y_zero_point", "w_scale", "w_zero_point"}


def shape_like_inputs(model) -> set[str]:
    """Graph inputs consumed at a shape-like parameter (see SHAPE_LIKE) of some node."""
    import onnx

    opsets = {(o.domain or ""): o.version for o in model.opset_import}
    graph_inputs = {vi.name for vi in model.graph.input}
    out: set[str] = set()
    for n in model.graph.node:
        dom = "" if n.domain in ("", "ai.onnx") else n.domain
        try:
            schema = onnx.defs.get_schema(n.op_type, opsets.get(dom, 1), dom)
        except Exception:  # noqa: BLE001 - unknown op: the import reports it
            continue
        formals = [f.name for f in schema.inputs]
        for i, name in enumerate(n.input):
            if name in graph_inputs and formals:
                if formals[min(i, len(formals) - 1)].lower() in SHAPE_LIKE:
                    out.add(name)
    return out


def import_case(case: Case) -> tuple[dict, Any]:
    """(info, payload): payload is (mlir text, input arrays per data set, reference outputs) or a record."""
    import onnx

    from ..frontend.onnx_import import onnx_to_mlir, runtime_inputs

    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        model = onnx.load(case.model)
    except Exception as e:  # noqa: BLE001 - a bad file is a case result, not a crash
        return info, _record("error", phase="import", stage="onnx-load", message=f"{type(e).__name__}: {e}"[:2000])
    info["ops"] = _case_ops(model)
    inputs = runtime_inputs(model)
    for vi in list(inputs) + list(model.graph.output):
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            return info, _record("unsupported", phase="import", reason="type", stage="onnx-import",
                                 message=f"'{vi.name}' is a {kind.replace('_type', '')}: only tensors are supported")
    data_sets = []
    try:
        for ins, outs in case.data_sets:
            data_sets.append(([load_tensor(p) for p in ins], [load_tensor(p) for p in outs]))
    except Exception as e:  # noqa: BLE001
        return info, _record("unsupported", phase="import", reason="type", stage="load-data",
                             message=f"{type(e).__name__}: {e}"[:2000])
    if not data_sets:
        return info, _record("error", phase="import", stage="load-data", message="the case has no test_data_set")
    feeds, refs = data_sets[0]
    if len(feeds) != len(inputs):
        return info, _record("error", phase="import", stage="load-data",
                             message=f"the data set has {len(feeds)} inputs, the model {len(inputs)}")
    info["dtypes"] = sorted({str(a.dtype) for a in feeds} | {str(r.dtype) for r in refs})
    shapes = {vi.name: tuple(a.shape) for vi, a in zip(inputs, feeds)}
    # Compile per shape: graph inputs that feed a shape-like parameter (Reshape's shape, ReduceSum's axes,
    # Slice's starts, TopK's k, Resize's scales) are constants in real models; fold them into the graph.
    params = shape_like_inputs(model)
    values = {vi.name: a for vi, a in zip(inputs, feeds) if vi.name in params and a.size <= 64}
    folded: list[str] = sorted(values)
    if folded:
        info["folded_inputs"] = folded
    try:
        text = onnx_to_mlir(model, {k: v for k, v in shapes.items() if k not in values}, input_values=values)
    except Exception as first:  # noqa: BLE001
        # Compile per shape: inputs that decide shapes or index arguments (Reshape's shape, TopK's k, Slice's
        # starts, ReduceSum's axes, Compress's condition) are folded into constants, so the graph is specialized
        # to this data set.
        dynamic = "data-dependent shape" in str(first)
        more = {vi.name: a for vi, a in zip(inputs, feeds) if vi.name not in values
                and ((a.dtype.kind in "iu" and a.ndim <= 1 and a.size <= 64) or (dynamic and a.ndim == 0)
                     or (dynamic and a.dtype == np.bool_ and a.ndim == 1 and a.size <= 64))}
        values = {**values, **more}
        if not more or not isinstance(first, PortableError):
            return info, classify_failure(first, "onnx-import", "import")
        try:
            text = onnx_to_mlir(model, {k: v for k, v in shapes.items() if k not in values}, input_values=values)
            folded = sorted(values)
            info["folded_inputs"] = folded
        except Exception as second:  # noqa: BLE001
            rec = classify_failure(first, "onnx-import", "import")
            again = (str(second).strip().splitlines() or [""])[0][:300]
            rec["message"] = f"{rec['message']}\n(with {', '.join(sorted(values))} folded to constants: {again})"
            return info, rec
    info["import_s"] = round(time.perf_counter() - t0, 3)
    if folded:
        info["folded_inputs"] = folded
    keep = [i for i, vi in enumerate(inputs) if vi.name not in folded]
    sets = [([f[i] for i in keep], r) for f, r in data_sets]
    return info, (text, sets)


def run_on_device(case: Case, text: str, sets, device: str) -> dict:
    import portable

    t0 = time.perf_counter()
    try:
        exe = portable.compile(text, device=device)
    except Exception as e:  # noqa: BLE001
        return classify_failure(e, "compile", "compile")
    t1 = time.perf_counter()
    rec = run_and_compare(case, exe, sets)
    rec.update(compile_s=round(t1 - t0, 3), run_s=round(time.perf_counter() - t1, 3),
               kernels=len(exe.executable.kernels))
    exe.close()
    return rec


def _signless(arr: np.ndarray, dtype: str) -> np.ndarray:
    """MLIR integers are signless, so an ONNX uint8 input becomes an i8 (int8) one: reinterpret the bits."""
    want = np.dtype(dtype)
    if arr.dtype != want and arr.dtype.kind in "iu" and want.kind in "iu" and arr.dtype.itemsize == want.itemsize:
        return arr.view(want)
    return arr


def run_and_compare(case: Case, exe, sets) -> dict:
    worst: dict | None = None
    for feeds, refs in sets:
        sigs = list(exe.inputs)
        if len(sigs) == len(feeds):
            feeds = [_signless(a, s.dtype) for a, s in zip(feeds, sigs)]
        try:
            outs = exe(*feeds)
        except Exception as e:  # noqa: BLE001
            return classify_failure(e, "run", "run")
        outs = [_signless(np.asarray(o), np.asarray(r).dtype.name) if np.asarray(r).dtype.kind in "iu" else o
                for o, r in zip(outs, refs)]
        try:
            res = {"phase": "run", **compare_outputs(outs, refs, case.rtol, case.atol)}
        except Exception as e:  # noqa: BLE001 - outputs that cannot even be compared
            return classify_failure(e, "compare", "run")
        if worst is None or res["status"] != "pass":
            worst = res
        if res["status"] != "pass":
            break
    return worst or _record("error", phase="run", stage="run", message="no data set")


# ------------------------------------------------------------------------------------------- profiles
def run_profile(case: Case, text: str, sets, profile_name: str, devices: list[str],
                emit: Callable[[str, dict], None], begin: Callable[[str], None]) -> None:
    """Per column (profile@device): compile for the profile and the device's API (SPIR-V kernels through
    spirv-val in the profile's environment), then run on the device where the profile's assumptions hold."""
    from .. import profiles
    from ..api import CompiledGraph
    from ..compiler.pipeline import compile_module
    from ..devices import parse_uri

    profile = profiles.all_profiles()[profile_name]
    options = profiles.codegen_options(profile)
    env = spirv_target_env(options)
    built: dict[str, tuple[Any, dict | None, float]] = {}  # api -> (executable, failure record, seconds)
    for dev in devices:
        col = f"{profile_name}@{dev}"
        begin(col)
        api = parse_uri(dev)[0]
        if api not in built:
            t0 = time.perf_counter()
            exe, failure = None, None
            try:
                exe = compile_module(text, options, (api,))
                if api == "vulkan":
                    for k in exe.kernels:
                        _validate(k.spirv, kernel_target_env(k.spirv, env))
            except Exception as e:  # noqa: BLE001
                failure = classify_failure(e, "compile", "compile")
            built[api] = (exe, failure, round(time.perf_counter() - t0, 3))
        exe, failure, compile_s = built[api]
        if failure is not None:
            emit(col, dict(failure))
            continue
        export = os.environ.get(EXPORT_ENV)
        if export:
            _export(Path(export), case, exe, api, sets)
        if os.environ.get(COMPILE_ONLY_ENV):
            emit(col, _record("compiled-only", reason="--compile-only", compile_s=compile_s, kernels=len(exe.kernels),
                              spirv_validated=(api == "vulkan") or None))
            continue
        emit(col, _run_for_profile(case, exe, sets, profile, options, dev, compile_s, api == "vulkan",
                                   CompiledGraph))


# Set by `portable conformance --profile P --export DIR` (and --compile-only) for its worker processes.
EXPORT_ENV = "PORTABLE_CONFORMANCE_EXPORT"
COMPILE_ONLY_ENV = "PORTABLE_CONFORMANCE_COMPILE_ONLY"
EXPORT_MAX_WEIGHTS = 1 << 20  # bytes of constants in an exported case


def _export(root: Path, case: Case, exe, api: str, sets) -> None:
    """Save what a host without MLIR needs to run the case (replay.py): the executable, the data sets, the
    tolerances. Cases with large weights (the model suites) stay home: what travels to a GPU host is limited."""
    if sum(np.asarray(a).nbytes for a in exe.constants.values()) > EXPORT_MAX_WEIGHTS:
        return
    arrays = {}
    for i, (feeds, refs) in enumerate(sets):
        arrays.update({f"in{i}_{j}": np.asarray(a) for j, a in enumerate(feeds)})
        arrays.update({f"out{i}_{j}": np.asarray(a) for j, a in enumerate(refs)})
    if any(a.dtype.kind not in "biuf" or a.dtype.itemsize > 8 for a in arrays.values()):
        return  # bfloat16 (ml_dtypes) and other dtypes .npz does not round-trip plainly
    d = root / case.name
    d.mkdir(parents=True, exist_ok=True)
    exe.save(d / f"{api}.ptx")
    np.savez_compressed(d / "data.npz", **arrays)
    (d / "case.json").write_text(json.dumps({"name": case.name, "op": case.op, "rtol": case.rtol, "atol": case.atol,
                                             "sets": [[len(f), len(r)] for f, r in sets]}))


def _run_for_profile(case: Case, exe, sets, profile: dict, options: dict, dev: str, compile_s: float,
                     validated: bool, compiled_graph) -> dict:
    from ..devices import open_device

    base = {"compile_s": compile_s, "kernels": len(exe.kernels), "spirv_validated": validated or None}
    try:
        live = open_device(dev)
    except PortableError as e:
        return _record("compiled-only", reason=f"device {dev}: {e}", **base)
    why = assumptions_fail(exe, profile, options, live.info)
    if why:
        return _record("compiled-only", reason="; ".join(why), **base)
    t1 = time.perf_counter()
    try:
        rec = run_and_compare(case, compiled_graph(exe, live), sets)
    except Exception as e:  # noqa: BLE001
        rec = classify_failure(e, "run", "run")
    rec.update(run_s=round(time.perf_counter() - t1, 3), **{k: v for k, v in base.items() if v is not None})
    return rec


def spirv_target_env(options: dict) -> str:
    """spirv-val's --target-env for the profile's SPIR-V version (SPIR-V 1.3 -> Vulkan 1.1, 1.5 -> 1.2, 1.6 -> 1.3)."""
    ver = str(options.get("spirv_version", "v1.3")).lstrip("v")
    return {"1.0": "vulkan1.0", "1.1": "vulkan1.1", "1.2": "vulkan1.1", "1.3": "vulkan1.1", "1.4": "vulkan1.1spv1.4",
            "1.5": "vulkan1.2", "1.6": "vulkan1.3"}.get(ver, "vulkan1.1")


COOPERATIVE_MATRIX = 6022  # CooperativeMatrixKHR


def _validate(spirv: bytes, target_env: str) -> None:
    """spirv-val the kernel; one on cooperative matrices passes unchecked where the installed spirv-val predates
    SPV_KHR_cooperative_matrix (Debian bookworm's: scripts/spirv_val.sh provides a newer one)."""
    from ..codegen_spirv import validate

    try:
        validate(spirv, target_env)
    except CompileError as e:
        if COOPERATIVE_MATRIX in spirv_capabilities(spirv) and "Invalid capability operand" in str(e):
            return
        raise


def kernel_target_env(spirv: bytes, profile_env: str) -> str:
    """The profile's environment, or Vulkan 1.3's for a kernel the code generator raised to SPIR-V 1.6 (its
    cooperative-matrix instructions exist from 1.6 on; such devices have Vulkan 1.3)."""
    minor = (int.from_bytes(spirv[4:8], "little") >> 8) & 0xFF
    return "vulkan1.3" if minor >= 6 else profile_env




def spirv_capabilities(spirv: bytes) -> set[int]:
    """The OpCapability operands of a SPIR-V module (none for a kernel without SPIR-V)."""
    return spirv_module.inspect(spirv).capabilities if spirv else set()


def assumptions_fail(exe, profile: dict, options: dict, info) -> list[str]:
    """Why kernels compiled for `profile` cannot be trusted to run on the live device (empty if they can)."""
    why: list[str] = []
    lim = info.limits
    cap = lim.get("max_workgroup_invocations")
    dims = lim.get("max_workgroup_size")
    for k in exe.kernels:
        n = int(np.prod(k.workgroup_size))
        if cap and n > cap:
            why.append(f"kernel {k.name} workgroup {k.workgroup_size} > device max {cap} invocations")
            break
        if dims and any(a > b for a, b in zip(k.workgroup_size, dims)):
            why.append(f"kernel {k.name} workgroup {k.workgroup_size} > device max size {tuple(dims)}")
            break
    pshared = profile.get("limits", {}).get("shared_memory_bytes")
    if pshared and lim.get("shared_memory_bytes") and pshared > lim["shared_memory_bytes"]:
        if any(k.opencl and "__local" in k.opencl for k in exe.kernels):
            why.append(f"profile assumes {pshared} B shared memory, device has {lim['shared_memory_bytes']}")
    psub = profile.get("limits", {}).get("subgroup_size")
    if psub and psub > 1 and lim.get("subgroup_size") and psub != lim["subgroup_size"]:
        caps = set().union(*(spirv_capabilities(k.spirv) for k in exe.kernels if k.spirv))
        # Shuffles, clusters and quads are laid over the profile's width; subgroup reductions, votes and ballots
        # (GroupNonUniform 61-64: compiler/schedule/subgroup_reduce.py's "varying" form) hold at any width.
        if caps & {65, 66, 67, 68}:  # GroupNonUniformShuffle, ShuffleRelative, Clustered, Quad
            why.append(f"kernels use subgroups sized {psub}, device subgroup is {lim['subgroup_size']}")
    if info.api == "vulkan":
        for k in exe.kernels:
            for c in spirv_capabilities(k.spirv or b""):
                if c == COOPERATIVE_MATRIX and not lim.get("cooperative_matrix"):
                    why.append(f"kernel {k.name} multiplies on cooperative matrices, the device has none")
                    return why
                need, _ = CAPABILITY_NEEDS.get(c, (None, ""))
                if need and lim.get(need) is False:
                    why.append(f"kernel {k.name} needs SPIR-V capability {c} ({need}), the device lacks it")
                    return why
    elif info.api == "opencl":
        if not lim.get("fp16") and any(k.opencl and "cl_khr_fp16" in k.opencl for k in exe.kernels):
            why.append("kernels use half precision (cl_khr_fp16), the device lacks it")
        if not {"cl_khr_subgroups", "cl_intel_subgroups"} & set(lim.get("extensions") or ()) and \
                any(k.opencl and "cl_khr_subgroups" in k.opencl for k in exe.kernels):
            why.append("kernels use subgroup functions (cl_khr_subgroups), the device has neither that nor "
                       "cl_intel_subgroups")
        if any(k.opencl and re.search(r"\basm\b", k.opencl) for k in exe.kernels) and \
                "NVIDIA" not in f"{info.name} {info.driver}":
            why.append("kernels hold inline PTX (the profile's opencl_asm), which only NVIDIA's OpenCL compiles")
    return why


def run_case(case: Case, columns: list[str], profile: str | None, emit: Callable[[str, dict], None],
             begin: Callable[[str], None], repro_dir: str | None = None) -> None:
    """Import once, then one record per column through `emit`; `begin(column)` marks what runs now."""
    begin("import")
    info, payload = import_case(case)
    if isinstance(payload, dict):
        payload.update(info)
        for c in columns:
            emit(c, payload)
        return
    text, sets = payload
    failed = False

    def emit_info(col: str, rec: dict) -> None:
        nonlocal failed
        rec.update({k: v for k, v in info.items() if k not in rec})
        failed = failed or rec["status"] in ("error", "fail") or rec.get("phase") in ("compile", "run")
        emit(col, rec)

    if profile:
        devices = [c.split("@", 1)[1] for c in columns]
        run_profile(case, text, sets, profile, devices, emit_info, begin)
    else:
        for dev in columns:
            begin(dev)
            emit_info(dev, run_on_device(case, text, sets, dev))
    if failed and repro_dir and len(text) <= REPRO_LIMIT:
        from pathlib import Path

        p = Path(repro_dir)
        p.mkdir(parents=True, exist_ok=True)
        (p / f"{case.name}.mlir").write_text(text)
