"""Control flow unrolled before import: compile per shape makes most If/Scan/Loop nodes static.

- If whose condition folds to a constant: the taken branch is inlined. If whose condition is computed at run time:
  both branches are inlined and each output is chosen with Where (ONNX ops have no side effects), provided both
  branches give it the same static shape.
- Scan: its length is a static dimension, so the body is instantiated once per iteration; scan inputs are sliced
  at the iteration (honouring their axes and directions) and scan outputs stacked with Unsqueeze + Concat.
- Loop with a constant trip count and a condition that stays constant, or that the onnx reference evaluator can
  compute from the iteration number and constants: unrolled the same way; scan outputs stacked on axis 0.

torch-mlir would turn these into scf.if/scf.for/scf.while, which the compiler does not take. Unrolled nodes are
named '<control node>/<iteration>/<body node>', so diagnostics still name the original node. After each sweep the
model is inferred and folded again: new constants propagate and nested control flow becomes top-level. Unrolling
is capped (MAX_ITERATIONS per node, MAX_UNROLLED_NODES in all) with an UnsupportedOp above the cap.
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError, UnsupportedOp
from .onnx_checks import node_desc
from .onnx_control_body import (
    MAX_ITERATIONS,
    MAX_UNROLLED_NODES,
    Emit,
    Pending,
    Sweep,
    attr,
    check_count,
    stack_results,
    subgraphs,
)
from .onnx_fold import fold_constants
from .onnx_weights import NONE

MAX_SWEEPS = 16  # sweeps over the top-level graph (each one unrolls a level of nesting)
_CONTROL = ("If", "Scan", "Loop")
_DATA_DEPENDENT = ("a data-dependent shape; portable compiles per shape: pass the graph inputs it is computed from "
                   "in input_values= to fold them")


# ------------------------------------------------------------------------------------------------------- If
def _if_branches(node):
    then, other = attr(node, "then_branch"), attr(node, "else_branch")
    for b in (then, other):
        if len(b.output) != len(node.output):
            raise CompileError(f"{node_desc(node)}: a branch has {len(b.output)} outputs, the node {len(node.output)}",
                               stage="onnx-control-flow")
    return then, other


def _inline_if(st: Sweep, node, taken: bool) -> list:
    then, other = _if_branches(node)
    branch = then if taken else other
    nodes, outs = st.instantiate(node, branch, {}, "", st.hoist_initializers(node, branch))
    e = Emit(st, node)
    for o, v in zip(node.output, outs):
        if o:
            e.identity(v, o)
    return nodes + e.nodes


def _select_if(st: Sweep, node) -> list:
    """Both branches computed, each output picked with Where on the run-time condition."""
    then, other = _if_branches(node)
    for vi in list(then.output) + list(other.output):
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            raise UnsupportedOp(f"{node_desc(node)}: its condition is computed at run time and a branch gives a "
                                f"{kind.replace('_type', '')}: only tensors are supported")
    then_nodes, then_outs = st.instantiate(node, then, {}, "then/", st.hoist_initializers(node, then))
    else_nodes, else_outs = st.instantiate(node, other, {}, "else/", st.hoist_initializers(node, other))
    e = Emit(st, node)
    cond = e.op("Reshape", [node.input[0], st.const(np.zeros(0, np.int64))], "cond_scalar")
    for o, t, f in zip(node.output, then_outs, else_outs):
        if o:
            e.op("Where", [cond, t, f], o, out=o)
            st.selects.append((node, t, f))
    return then_nodes + else_nodes + e.nodes


def _infer_selects(m, infer, selects):
    """Shape inference after a sweep; where Ifs were turned into selects, both of their branches must type-check and
    give one shape."""
    try:
        m = infer(m)
    except CompileError as e:
        if not selects:
            raise
        raise UnsupportedOp(f"{node_desc(selects[0][0])}: its condition is computed at run time, so both branches are "
                            f"computed, and one does not type-check for these shapes (which branch is taken is "
                            f"{_DATA_DEPENDENT}): {e}") from e
    _check_selects(m, selects)
    return m


def _check_selects(m, selects) -> None:
    shapes = {vi.name: vi.type.tensor_type.shape for vi in list(m.graph.value_info) + list(m.graph.output)
              + list(m.graph.input) if vi.type.tensor_type.HasField("shape")}
    for t in m.graph.initializer:
        shapes[t.name] = tuple(t.dims)

    def dims(name):
        s = shapes.get(name)
        if s is None or isinstance(s, tuple):
            return s
        return tuple(d.dim_value if d.HasField("dim_value") else None for d in s.dim)

    for node, t, f in selects:
        a, b = dims(t), dims(f)
        if a is None or b is None or a != b or None in a:
            raise UnsupportedOp(f"{node_desc(node)}: its condition is computed at run time and its branches give "
                                f"shapes {a} and {b}: which one it returns is {_DATA_DEPENDENT}")


# ----------------------------------------------------------------------------------------------------- Scan
def _scan_axes(node, name: str, count: int) -> list[int]:
    values = list(attr(node, name, []) or [])
    if values and len(values) != count:
        raise CompileError(f"{node_desc(node)}: '{name}' has {len(values)} entries for {count} values",
                           stage="onnx-control-flow")
    return values or [0] * count


def _unroll_scan(st: Sweep, node) -> list:
    """Scan from opset 9 on: states, then scan inputs sliced along scan_input_axes."""
    body = attr(node, "body")
    n_scan = attr(node, "num_scan_inputs")
    n_state = len(node.input) - n_scan
    n_out = len(body.output) - n_state
    if len(body.input) != len(node.input) or n_out < 0 or len(node.output) != len(body.output):
        raise CompileError(f"{node_desc(node)}: its body's inputs/outputs do not match the node's",
                           stage="onnx-control-flow")
    xs = list(node.input[n_state:])
    in_axes, in_dirs = _scan_axes(node, "scan_input_axes", n_scan), _scan_axes(node, "scan_input_directions", n_scan)
    out_axes = _scan_axes(node, "scan_output_axes", n_out)
    out_dirs = _scan_axes(node, "scan_output_directions", n_out)
    lengths = set()
    for j, x in enumerate(xs):
        shape = st.static_shape(x, node, "scan input")
        if not -len(shape) <= in_axes[j] < len(shape):
            raise CompileError(f"{node_desc(node)}: scan_input_axes {in_axes[j]} is out of range for '{x}' of rank "
                               f"{len(shape)}", stage="onnx-control-flow")
        in_axes[j] %= len(shape)
        lengths.add(shape[in_axes[j]])
    if len(lengths) > 1:
        raise CompileError(f"{node_desc(node)}: scan inputs have different lengths {sorted(lengths)}",
                           stage="onnx-control-flow")
    steps = lengths.pop() if lengths else 0
    check_count(node, steps)
    st.spend(steps * (2 * n_scan + 2 * n_out), node)
    shared = st.hoist_initializers(node, body)
    e = Emit(st, node)
    nodes: list = []
    states = list(node.input[:n_state])
    per_step: list[list[str]] = [[] for _ in range(n_out)]
    for t in range(steps):
        bind = {body.input[i].name: states[i] for i in range(n_state)}
        for j, x in enumerate(xs):
            index = t if in_dirs[j] == 0 else steps - 1 - t
            bind[body.input[n_state + j].name] = e.take(x, in_axes[j], index, f"{t}/scan_in{j}")
        nodes += e.nodes
        e.nodes = []
        body_nodes, outs = st.instantiate(node, body, bind, f"{t}/", shared)
        nodes += body_nodes
        states = outs[:n_state]
        for k in range(n_out):
            per_step[k].append(outs[n_state + k])
    stack_results(e, node, states, per_step, out_axes, out_dirs)
    return nodes + e.nodes


def _unroll_scan8(st: Sweep, node) -> list:
    """Scan of opset 8: inputs (sequence_lens, states..., scan inputs...) with a batch axis 0 on every value and the
    scan axis 1 on scan inputs; the body sees one batch entry."""
    body = attr(node, "body")
    n_scan = attr(node, "num_scan_inputs")
    n_state = len(node.input) - 1 - n_scan
    n_out = len(body.output) - n_state
    states, xs = list(node.input[1:1 + n_state]), list(node.input[1 + n_state:])
    dirs = _scan_axes(node, "directions", n_scan)
    shapes = [st.static_shape(v, node, "Scan input") for v in states + xs]
    batch = shapes[0][0]
    steps = shapes[n_state][1] if xs else 0
    if any(s[0] != batch for s in shapes) or any(s[1] != steps for s in shapes[n_state:]):
        raise CompileError(f"{node_desc(node)}: its inputs' batch or sequence lengths differ",
                           stage="onnx-control-flow")
    if node.input[0]:
        lens = st.consts.get(node.input[0])
        if lens is None or np.any(lens != steps):
            raise UnsupportedOp(f"{node_desc(node)}: sequence_lens other than the full length {steps} (or computed "
                                f"at run time) are not supported")
    check_count(node, batch * steps)
    shared = st.hoist_initializers(node, body)
    e = Emit(st, node)
    nodes: list = []
    finals: list[list[str]] = [[] for _ in range(n_state)]
    stacked: list[list[str]] = [[] for _ in range(n_out)]
    for b in range(batch):
        cur = [e.take(s, 0, b, f"{b}/state{i}") for i, s in enumerate(states)]
        rows = [e.take(x, 0, b, f"{b}/scan_in{j}") for j, x in enumerate(xs)]
        per_step: list[list[str]] = [[] for _ in range(n_out)]
        for t in range(steps):
            bind = {body.input[i].name: cur[i] for i in range(n_state)}
            for j, x in enumerate(rows):
                index = t if dirs[j] == 0 else steps - 1 - t
                bind[body.input[n_state + j].name] = e.take(x, 0, index, f"{b}/{t}/scan_in{j}")
            nodes += e.nodes
            e.nodes = []
            body_nodes, outs = st.instantiate(node, body, bind, f"{b}/{t}/", shared)
            nodes += body_nodes
            cur = outs[:n_state]
            for k in range(n_out):
                per_step[k].append(outs[n_state + k])
        for i in range(n_state):
            finals[i].append(cur[i])
        for k in range(n_out):
            if not per_step[k]:
                raise UnsupportedOp(f"{node_desc(node)}: zero iterations: empty scan outputs are not supported")
            stacked[k].append(e.stack(per_step[k], 0, f"{b}/scan_out{k}"))
    for o, items in zip(node.output, finals + stacked):
        if o:
            e.stack(items, 0, "batch", out=o)
    return nodes + e.nodes


# ----------------------------------------------------------------------------------------------------- Loop
class _LoopCondition:
    """Computes a Loop's condition iteration by iteration with the onnx reference evaluator, from the nodes of the
    body it depends on (and the loop-carried values those need), when they depend only on constants."""

    def __init__(self, st: Sweep, node, body, initial: list[str]):
        self.node = node
        cond_in, cond_out = body.input[1].name, body.output[0].name
        producers = {o: n for n in body.node for o in n.output}
        self.same = cond_out == cond_in or (cond_out in producers and producers[cond_out].op_type == "Identity"
                                            and producers[cond_out].input[0] == cond_in)
        if self.same:
            return
        carried_in = [vi.name for vi in body.input[2:]]
        carried_out = [vi.name for vi in body.output[1:1 + len(initial)]]
        wanted, needed = [cond_out], []
        while True:
            cone, leaves = self._cone(wanted, producers)
            more = [carried_in.index(v) for v in leaves if v in carried_in and carried_in.index(v) not in needed]
            if not more:
                break
            needed += more
            wanted += [carried_out[j] for j in more]
        own = {t.name: t for t in body.initializer if t.name in leaves}
        outer = sorted(v for v in leaves if v not in {vi.name for vi in body.input} and v not in own)
        for v in outer + [initial[j] for j in needed]:
            if v not in st.consts:
                raise Pending(f"its condition depends on '{v}', computed at run time (the iteration count is "
                               f"{_DATA_DEPENDENT})")
        if any(any(True for _ in subgraphs(n)) for n in cone):
            raise Pending("its condition is computed by nodes with subgraphs")
        self.needed, self.names = needed, [body.input[0].name, cond_in] + [carried_in[j] for j in needed]
        self.ranks = [len(vi.type.tensor_type.shape.dim) for vi in body.input[:2]]
        self.state = [st.consts[initial[j]] for j in needed]
        self.evaluator = self._evaluator(st, body, cone, outer, wanted, list(own.values()))

    @staticmethod
    def _cone(wanted: list[str], producers: dict) -> tuple[list, set[str]]:
        seen, stack, leaves = set(), list(wanted), set()
        while stack:
            v = stack.pop()
            n = producers.get(v)
            if n is None:
                leaves.add(v)
            elif id(n) not in seen:
                seen.add(id(n))
                stack += [i for i in n.input if i]
        return [n for n in producers.values() if id(n) in seen], leaves

    def _evaluator(self, st: Sweep, body, cone, outer, wanted, own: list):
        from onnx import helper, numpy_helper
        from onnx.reference import ReferenceEvaluator

        order = {id(n): i for i, n in enumerate(body.node)}
        nodes = sorted({id(n): n for n in cone}.values(), key=lambda n: order[id(n)])
        g = helper.make_graph(nodes, "condition", [helper.make_empty_tensor_value_info(v) for v in self.names],
                              [helper.make_empty_tensor_value_info(v) for v in wanted],
                              [numpy_helper.from_array(st.consts[v], v) for v in outer] + own)
        return ReferenceEvaluator(helper.make_model(g, opset_imports=list(st.m.opset_import)))

    def next(self, k: int, cond: bool) -> bool:
        if self.same:
            return cond
        it = np.array(k, np.int64).reshape((1,) * self.ranks[0])
        c = np.array(cond).reshape((1,) * self.ranks[1])
        try:
            outs = self.evaluator.run(None, dict(zip(self.names, [it, c] + self.state)))
        except Exception as e:  # noqa: BLE001 - the evaluator rejects the body: report it as the node's problem
            raise UnsupportedOp(f"{node_desc(self.node)}: its condition could not be computed before import "
                                f"({type(e).__name__}: {e})") from e
        self.state = list(outs[1:])
        return bool(np.asarray(outs[0]).reshape(-1)[0])


class _Ignored:
    same = True

    @staticmethod
    def next(k: int, cond: bool) -> bool:
        return cond


_IGNORED = _Ignored()


def _loop_constant(st: Sweep, node, name: str, what: str):
    if not name:
        return None
    if name not in st.consts:
        raise Pending(f"its {what} '{name}' is computed at run time (the iteration count is {_DATA_DEPENDENT})")
    v = st.consts[name]
    if v.size != 1:
        raise CompileError(f"{node_desc(node)}: its {what} has {v.size} elements, expected one",
                           stage="onnx-control-flow")
    return v.reshape(-1)[0]


def _unroll_loop(st: Sweep, node) -> list:
    body = attr(node, "body")
    initial = list(node.input[2:])
    n_state = len(initial)
    n_out = len(body.output) - 1 - n_state
    if len(body.input) != 2 + n_state or n_out < 0 or len(node.output) != n_state + n_out:
        raise CompileError(f"{node_desc(node)}: its body's inputs/outputs do not match the node's",
                           stage="onnx-control-flow")
    trip = _loop_constant(st, node, node.input[0] if len(node.input) else "", "trip count")
    cond0 = _loop_constant(st, node, node.input[1] if len(node.input) > 1 else "", "condition")
    cond = True if cond0 is None else bool(cond0)
    # Without a condition input the body's condition output is ignored (the spec's `for (i = 0; ; ++i)` forms).
    condition = _LoopCondition(st, node, body, initial) if cond0 is not None else _IGNORED
    if condition.same and cond and trip is None:
        raise UnsupportedOp(f"{node_desc(node)}: it has no trip count and its condition never changes: it does not "
                            f"terminate")
    if condition.same and cond:
        check_count(node, int(trip))
    ranks = [len(vi.type.tensor_type.shape.dim) for vi in body.input[:2]]
    shared = st.hoist_initializers(node, body)
    e = Emit(st, node)
    nodes: list = []
    states = initial
    per_step: list[list[str]] = [[] for _ in range(n_out)]
    k = 0
    while cond and (trip is None or k < trip):
        check_count(node, k + 1)
        bind = {body.input[0].name: st.const(np.array(k, np.int64).reshape((1,) * ranks[0]), f"{node.name}/iter"),
                body.input[1].name: st.const(np.array(cond).reshape((1,) * ranks[1]), f"{node.name}/cond")}
        bind.update({body.input[2 + i].name: states[i] for i in range(n_state)})
        body_nodes, outs = st.instantiate(node, body, bind, f"{k}/", shared)
        nodes += body_nodes
        states = outs[1:1 + n_state]
        for j in range(n_out):
            per_step[j].append(outs[1 + n_state + j])
        cond = condition.next(k, cond)
        k += 1
    stack_results(e, node, states, per_step, [0] * n_out, [0] * n_out)
    return nodes + e.nodes


# --------------------------------------------------------------------------------------------------- driver
def _rewrite(st: Sweep, node, select: bool) -> list | None:
    """Plain nodes replacing a control node, or None when it has to wait (a reason is recorded)."""
    if node.op_type == "If":
        if node.input[0] in st.consts:
            return _inline_if(st, node, bool(np.asarray(st.consts[node.input[0]]).reshape(-1)[0]))
        if not select:
            raise Pending(f"its condition '{node.input[0]}' is computed at run time")
        return _select_if(st, node)
    if node.op_type == "Scan":
        return _unroll_scan(st, node) if st.opset >= 9 else _unroll_scan8(st, node)
    return _unroll_loop(st, node)


def _sweep(m, budget: list[int], select: bool, weights) -> tuple[Sweep, dict]:
    """Rewrites, in place, every top-level control node it can; returns (the sweep, {node name: why it waits})."""
    st = Sweep(m, budget, weights)
    waiting: dict[str, str] = {}
    out: list = []
    for n in list(m.graph.node):
        if not is_control(n):
            out.append(n)
            continue
        try:
            out += _rewrite(st, n, select)
        except Pending as why:
            waiting[n.name] = str(why)
            out.append(n)
    del m.graph.node[:]
    m.graph.node.extend(out)
    return st, waiting


def is_control(n) -> bool:
    return n.domain in ("", "ai.onnx") and n.op_type in _CONTROL


def _has_control(graph) -> bool:
    return any(is_control(n) for n in graph.node)


def unroll_control_flow(m, infer, weights=NONE):
    """The model with its top-level If/Scan/Loop nodes (and those nested in them) replaced by plain nodes, folded
    again; `infer(m)` is the caller's shape inference (it returns a new model). Raises UnsupportedOp for control flow
    that cannot be made static."""
    if not _has_control(m.graph):
        return m
    budget, select = [0], False
    waiting: dict[str, str] = {}
    for _ in range(MAX_SWEEPS):
        before = len([n for n in m.graph.node if is_control(n)])
        st, waiting = _sweep(m, budget, select, weights)
        if len(waiting) == before:  # nothing rewritten: Ifs on run-time conditions become selects, else stop
            if select or not any(n.op_type == "If" for n in m.graph.node if n.name in waiting):
                break
            select = True
            continue
        m = _infer_selects(m, infer, st.selects)
        m = fold_constants(m, infer, weights=weights)
        select = False
        if not _has_control(m.graph):
            return m
    for n in m.graph.node:
        if is_control(n):
            why = waiting.get(n.name, "it is nested too deeply")
            raise UnsupportedOp(f"{node_desc(n)}: cannot unroll it before import: {why}")
    return m


def unroll_legacy_scans(m, infer):
    """Scan nodes of opset 8 unrolled before the opset upgrade: onnx's 8->9 version adapter only drops the batch
    dimension from the types it sees, which changes the graph's own input and output shapes."""
    from .onnx_checks import iter_nodes

    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset >= 9 or not any(n.op_type == "Scan" for n in iter_nodes(m.graph)):
        return m
    for n in m.graph.node:
        for g in subgraphs(n):
            for inner in iter_nodes(g):
                if inner.op_type == "Scan":
                    raise UnsupportedOp(f"{node_desc(inner)}: a Scan of opset 8 nested in a subgraph is not "
                                        f"supported (upgrade the model to opset 9 or later)")
    m = infer(m)
    st = Sweep(m, [0])
    out: list = []
    for n in list(m.graph.node):
        if n.op_type != "Scan" or n.domain not in ("", "ai.onnx"):
            out.append(n)
            continue
        try:
            out += _unroll_scan8(st, n)
        except Pending as why:
            raise UnsupportedOp(f"{node_desc(n)}: cannot unroll it before import: {why}") from None
    del m.graph.node[:]
    m.graph.node.extend(out)
    del m.graph.value_info[:]
    return m


__all__ = ["unroll_control_flow", "unroll_legacy_scans", "MAX_ITERATIONS", "MAX_UNROLLED_NODES"]
