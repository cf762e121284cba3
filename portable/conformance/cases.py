"""The conformance cases: ONNX backend test cases from the installed `onnx` package, on disk.

Suites:
- `node`: the ~1,900 node cases `onnx.backend.test.case.node` generates. The `onnx` wheel ships no
  `data/node` directory, so they are generated once per onnx version (about 10 s) into
  `<PORTABLE_CACHE_DIR>/conformance/onnx-<version>/node/<case>/` in the backend-test layout
  (model.onnx, test_data_set_0/input_*.pb, output_*.pb) plus a case.json (op, rtol, atol).
- `light`: the model tests in `onnx/backend/test/data/light` (AlexNet ... ZFNet-512): model and stored
  reference output ship with onnx; the input is the one onnx's own runner feeds (arange / n, float32).
- `strategies`: cases at the shapes where the code generator's strategies switch (strategies.py), generated once
  into `<PORTABLE_CACHE_DIR>/conformance/strategies-v<N>/`.
- `simple`, `pytorch-converted`, `pytorch-operator`: the small model directories that ship with onnx.
- any directory of cases in the same layout (<case>/model.onnx, <case>/test_data_set_N/{input,output}_K.pb).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import config

DEFAULT_SUITES = ("node", "light")
ALL_SUITES = ("node", "light", "strategies", "simple", "pytorch-converted", "pytorch-operator")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7
_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass(frozen=True)
class Case:
    """One test case: a model file and its data sets of input/output .pb files."""

    name: str
    suite: str
    model: str  # path of the .onnx file
    data_sets: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]  # (inputs, outputs) per data set
    op: str = ""  # the ONNX op the case tests (node suite), or the model name
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    extra: dict = field(default_factory=dict, compare=False, hash=False)


def onnx_data_dir() -> Path:
    import onnx.backend.test

    return Path(onnx.backend.test.__file__).resolve().parent / "data"


def onnx_version() -> str:
    import onnx

    return onnx.__version__


def node_dir() -> Path:
    """Where the generated node cases live (generated on first use)."""
    shipped = onnx_data_dir() / "node"
    if shipped.is_dir() and any(shipped.iterdir()):
        return shipped
    root = config.cache_dir() / "conformance" / f"onnx-{onnx_version()}" / "node"
    if not (root / "DONE").exists():
        _generate_node_cases(root)
    return root


def _write_value(path: Path, value, type_proto, name: str) -> None:
    from onnx import TensorProto, numpy_helper

    if type_proto is not None and type_proto.HasField("sequence_type"):
        data = numpy_helper.from_list(value, name).SerializeToString()
    elif type_proto is not None and type_proto.HasField("optional_type"):
        data = numpy_helper.from_optional(value, name).SerializeToString()
    elif type_proto is not None and type_proto.HasField("map_type"):
        data = numpy_helper.from_dict(value, name).SerializeToString()
    elif isinstance(value, TensorProto):
        data = value.SerializeToString()
    else:
        data = numpy_helper.from_array(np.asarray(value), name).SerializeToString()
    path.write_bytes(data)


def _case_op(case, single_ops: dict[str, str]) -> str:
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    base = _EXPANDED.sub("", case.name)
    if base in single_ops:
        return single_ops[base]
    return nodes[0].op_type if nodes else "?"


def write_cases(testcases, root: Path) -> None:
    """Write onnx TestCase objects (kind node/simple) to `root` in the backend-test directory layout."""
    single = {c.name: c.model.graph.node[0].op_type for c in testcases if len(c.model.graph.node) == 1}
    root.mkdir(parents=True, exist_ok=True)
    for c in testcases:
        d = root / c.name
        d.mkdir(exist_ok=True)
        (d / "model.onnx").write_bytes(c.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(c.data_sets):
            ds = d / f"test_data_set_{i}"
            ds.mkdir(exist_ok=True)
            gin, gout = c.model.graph.input, c.model.graph.output
            for j, v in enumerate(inputs):
                _write_value(ds / f"input_{j}.pb", v, gin[j].type if j < len(gin) else None,
                             gin[j].name if j < len(gin) else f"input_{j}")
            for j, v in enumerate(outputs):
                _write_value(ds / f"output_{j}.pb", v, gout[j].type if j < len(gout) else None,
                             gout[j].name if j < len(gout) else f"output_{j}")
        meta = {"op": _case_op(c, single), "rtol": c.rtol, "atol": c.atol}
        (d / "case.json").write_text(json.dumps(meta))


def write_node_cases(root: Path, modules: list[str]) -> list[str]:
    """Generate only the node cases of some modules of onnx.backend.test.case.node (e.g. ["relu", "add"]) into
    `root`; fast, for tests. A module imported before in this process yields nothing new. Returns case names."""
    import importlib

    import onnx.backend.test.case.node as node_cases

    start = len(node_cases._NodeTestCases)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mod in modules:
            importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    new = node_cases._NodeTestCases[start:]
    write_cases(new, root)
    return [c.name for c in new]


def _generate_node_cases(root: Path) -> None:
    """Write every case of onnx.backend.test.case.node to `root` (atomically: a temp dir, then rename)."""
    import onnx.backend.test.case.node as node_cases

    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".node-", dir=root.parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        cases = node_cases.collect_testcases()
    write_cases(cases, tmp)
    (tmp / "DONE").write_text(onnx_version())
    try:
        if root.exists():  # another process won the race or an old partial copy: keep the complete one
            if (root / "DONE").exists():
                shutil.rmtree(tmp, ignore_errors=True)
                return
            shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (root / "DONE").exists():
            raise


def _dir_case(d: Path, suite: str) -> Case | None:
    model = d / "model.onnx"
    if not model.is_file():
        return None
    sets = []
    for ds in sorted(d.glob("test_data_set_*"), key=lambda p: int(p.name.rsplit("_", 1)[1])):
        ins = sorted(ds.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        outs = sorted(ds.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        sets.append((tuple(map(str, ins)), tuple(map(str, outs))))
    meta = {}
    if (d / "case.json").exists():
        meta = json.loads((d / "case.json").read_text())
    op = meta.get("op") or ""
    if not op:
        op = d.name.removeprefix("test_")
    return Case(name=d.name, suite=suite, model=str(model), data_sets=tuple(sets), op=op,
                rtol=float(meta.get("rtol", DEFAULT_RTOL)), atol=float(meta.get("atol", DEFAULT_ATOL)))


def _light_cases() -> list[Case]:
    """The light model tests; their input is generated the way onnx's runner does it (and cached)."""
    src = onnx_data_dir() / "light"
    if not src.is_dir():
        return []
    tolerances = {"densenet121": 2e-3}
    out_root = config.cache_dir() / "conformance" / f"onnx-{onnx_version()}" / "light"
    cases = []
    for model in sorted(src.glob("light_*.onnx")):
        name = model.stem
        outs = sorted(src.glob(f"{name}_output_*.pb"))
        if not outs:
            continue
        ins = _light_inputs(model, out_root / name)
        if ins is None:
            continue
        short = name.removeprefix("light_")
        cases.append(Case(name=name, suite="light", model=str(model), data_sets=((ins, tuple(map(str, outs))),),
                          op=short, rtol=tolerances.get(short, DEFAULT_RTOL), atol=DEFAULT_ATOL))
    return cases


def _light_inputs(model_path: Path, out: Path) -> tuple[str, ...] | None:
    import onnx
    from onnx import numpy_helper

    done = out / "DONE"
    if not done.exists():
        m = onnx.load(str(model_path), load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        out.mkdir(parents=True, exist_ok=True)
        k = 0
        for x in m.graph.input:
            if x.name in inits:
                continue
            if x.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
                return None
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            value = (np.arange(n).reshape(shape) / n).astype(np.float32)  # onnx runner's generate_dummy_data
            p = out / f"input_{k}.pb"
            tmp = p.with_suffix(".tmp")
            tmp.write_bytes(numpy_helper.from_array(value, x.name).SerializeToString())
            os.replace(tmp, p)
            k += 1
        done.write_text(str(k))
    n = int(done.read_text() or 0)
    return tuple(str(out / f"input_{k}.pb") for k in range(n))


def discover(suites: tuple[str, ...] = DEFAULT_SUITES, pattern: str | None = None) -> list[Case]:
    """Every case of the given suites whose name matches `pattern` (a regex searched in the name)."""
    rx = re.compile(pattern) if pattern else None
    found: list[Case] = []
    for suite in suites:
        if suite == "node":
            d = node_dir()
            cases = [c for c in (_dir_case(p, "node") for p in sorted(d.iterdir()) if p.is_dir()) if c]
        elif suite == "light":
            cases = _light_cases()
        elif suite == "strategies":
            from .strategies import strategies_dir

            d = strategies_dir()
            cases = [c for c in (_dir_case(p, "strategies") for p in sorted(d.iterdir()) if p.is_dir()) if c]
        elif suite in ALL_SUITES or Path(suite).is_dir():
            d = onnx_data_dir() / suite if suite in ALL_SUITES else Path(suite)
            label = suite if suite in ALL_SUITES else "dir"
            cases = [c for c in (_dir_case(p, label) for p in sorted(d.iterdir()) if p.is_dir()) if c] \
                if d.is_dir() else []
        else:
            raise ValueError(f"unknown suite {suite!r}: choose from {', '.join(ALL_SUITES)} or a directory of "
                             f"cases in the onnx backend-test layout")
        found.extend(c for c in cases if rx is None or rx.search(c.name))
    return found


def load_tensor(path: str):
    """A .pb file as a numpy array (TensorProto); raises TypeError for sequences/maps/optionals."""
    import onnx
    from onnx import numpy_helper

    data = Path(path).read_bytes()
    t = onnx.TensorProto()
    t.ParseFromString(data)
    if not t.dims and not t.raw_data and t.data_type == 0:
        raise TypeError(f"{path} is not a tensor (a sequence, map or optional)")
    return numpy_helper.to_array(t)
