"""Graph nodes -> MLIR text. Pure text; no MLIR bindings. What comes out is the contract with the compiler:

module attributes {portable.graph = "<name>"} { func.func @main(%arg0: tensor<..>, ...) -> (tensor<..>, ...) }
  one public function, no other symbols; every shape static, every dim >= 1, rank 0 allowed (`tensor<f32>`);
  element types f32, f16, i32, i64. Results may repeat a value, or be an argument or a constant as is.
Ops, one per node (only nodes the results depend on):
  constant      arith.constant dense<...> : tensor<..>  (splat, short literal list, or exact hex bytes)
  elementwise   tensor.empty + linalg.generic, all iterators "parallel", output map the identity; each input
                map a projected permutation with dims in increasing order (broadcast = dims left out);
                an input's size-1 dims that broadcast are first dropped with tensor.collapse_shape.
                Body: arith.{addf,subf,mulf,divf,maximumf,minimumf,negf,addi,subi,muli,divsi,maxsi,minsi,
                constant,extf,truncf,fptosi,sitofp,extsi,trunci}, math.{exp,log,tanh,sqrt,rsqrt,erf,powf,absf,
                absi}; scalar constants are arith.constant inside the body.
  reduce        tensor.empty + linalg.fill(identity) + linalg.generic, input map identity, output map drops the
                reduced dims, iterators "reduction" there; body one arith.addf/addi/maximumf/maxsi/minimumf/
                minsi. Identities: sum 0; max -inf (0xFF800000 f32, 0xFC00 f16) or INT_MIN; min +inf or
                INT_MAX. keepdims adds a tensor.expand_shape; mean adds an elementwise multiply by 1/n.
  matmul        tensor.empty + linalg.fill(0) + linalg.matmul (2-D) or linalg.batch_matmul (3-D)
  conv2d        [tensor.pad] + tensor.empty + linalg.fill(0) + linalg.conv_2d_nhwc_hwcf or
                linalg.conv_2d_nchw_fchw {dilations, strides : tensor<2xi64>} [+ bias elementwise]
  pad           tensor.pad static low/high, body `tensor.yield` of an arith.constant
  reshape       tensor.collapse_shape and/or tensor.expand_shape (static output_shape)
  transpose     tensor.empty + linalg.transpose
"""

from __future__ import annotations

from collections.abc import Sequence

from .graph_ir import DTYPES, REDUCE_OP, Instr, Node, dense_literal, emit_instr, literal, reduce_identity, tensor_type


def affine_map(rank: int, results: Sequence[int]) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({dims}) -> ({', '.join(f'd{i}' for i in results)})>"


def reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Split two shapes of equal size into contiguous groups of dims with equal products; size-1 dims
    left over at the end join the last group. Every group is then one collapse and/or one expand."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        gi, gj, pi, pj = [i], [j], src[i], dst[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                gi.append(i)
                pi, i = pi * src[i], i + 1
            else:
                gj.append(j)
                pj, j = pj * dst[j], j + 1
        groups.append((gi, gj))
    if groups:
        groups[-1][0].extend(range(i, len(src)))
        groups[-1][1].extend(range(j, len(dst)))
    return groups


def _reassoc(groups: Sequence[Sequence[int]]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


class _Emitter:
    def __init__(self, nodes: Sequence[Node]):
        self.nodes = nodes
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"%{hint}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def ty(self, nid: int) -> str:
        n = self.nodes[nid]
        return tensor_type(n.shape, n.dtype)

    # -- helpers shared by several ops --------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str) -> str:
        name = self.fresh("empty")
        self.emit(f"{name} = tensor.empty() : {tensor_type(shape, dtype)}")
        return name

    def filled(self, shape: tuple[int, ...], dtype: str, value: float) -> str:
        """linalg.fill of a scalar on a tensor.empty: the init of reductions, matmul and conv."""
        e = self.empty(shape, dtype)
        cst, name, t = self.fresh("cst"), self.fresh("fill"), tensor_type(shape, dtype)
        self.emit(f"{cst} = arith.constant {literal(value, dtype)} : {DTYPES[dtype]}")
        self.emit(f"{name} = linalg.fill ins({cst} : {DTYPES[dtype]}) outs({e} : {t}) -> {t}")
        return name

    def reshape(self, value: str, src: tuple[int, ...], dst: tuple[int, ...], dtype: str) -> str:
        """collapse_shape and/or expand_shape between two static shapes of equal size."""
        if src == dst:
            return value
        groups = reshape_groups(src, dst)
        mid = tuple(int(_prod(src[k] for k in gi)) for gi, _ in groups)
        if mid != src:
            name = self.fresh("collapsed")
            self.emit(f"{name} = tensor.collapse_shape {value} {_reassoc([g for g, _ in groups])} : "
                      f"{tensor_type(src, dtype)} into {tensor_type(mid, dtype)}")
            value = name
        if mid != dst:
            name = self.fresh("expanded")
            self.emit(f"{name} = tensor.expand_shape {value} {_reassoc([g for _, g in groups])} "
                      f"output_shape [{', '.join(map(str, dst))}] : "
                      f"{tensor_type(mid, dtype)} into {tensor_type(dst, dtype)}")
            value = name
        return value

    # -- one method per node kind -------------------------------------------------------------------
    def node(self, nid: int) -> str:
        n = self.nodes[nid]
        return getattr(self, "op_" + n.kind)(n)

    def op_constant(self, n: Node) -> str:
        name = self.fresh("cst")
        self.emit(f"{name} = arith.constant {dense_literal(n.attrs['value'], n.dtype)} : "
                  f"{tensor_type(n.shape, n.dtype)}")
        return name

    def op_elementwise(self, n: Node) -> str:
        rank, src = len(n.shape), n.attrs["src"]
        operands, types, maps = [], [], []
        for vid, dims in zip(n.inputs, n.attrs["dims"]):
            kept = [d for d in dims if d is not None]
            shape = tuple(n.shape[d] for d in kept)
            operands.append(self.reshape(self.names[vid], self.nodes[vid].shape, shape, src))
            types.append(tensor_type(shape, src))
            maps.append(affine_map(rank, kept))
        out_t = tensor_type(n.shape, n.dtype)
        init = self.empty(n.shape, n.dtype)
        name = self.fresh("ew")
        iters = ", ".join(['"parallel"'] * rank)
        self.emit(f"{name} = linalg.generic {{indexing_maps = [{', '.join(maps + [affine_map(rank, range(rank))])}], "
                  f"iterator_types = [{iters}]}} "
                  f"ins({', '.join(operands)} : {', '.join(types)}) outs({init} : {out_t}) {{")
        body = self.body(n.attrs["prog"], len(operands), src, n.dtype)
        self.lines.extend(body)
        self.emit(f"}} -> {out_t}")
        return name

    def body(self, prog: Sequence[Instr], nargs: int, src: str, dst: str) -> list[str]:
        b = self.fresh("b")[1:]
        args = [f"%{b}_in{k}" for k in range(nargs)]
        lines = [f"    ^bb0({', '.join(f'{a}: {DTYPES[src]}' for a in args)}, %{b}_out: {DTYPES[dst]}):"]
        vals: list[str] = []
        for k, ins in enumerate(prog):
            if ins.op == "arg":
                vals.append(args[ins.attr])
                continue
            vals.append(f"%{b}_{k}")
            lines += ["      " + s for s in emit_instr(ins, [vals[a] for a in ins.args], src, dst, vals[-1])]
        lines.append(f"      linalg.yield {vals[-1]} : {DTYPES[dst]}")
        return lines

    def op_reduce(self, n: Node) -> str:
        x = self.nodes[n.inputs[0]]
        rank, axes, t = len(x.shape), n.attrs["axes"], DTYPES[n.dtype]
        kind = n.attrs["kind"]
        init = self.filled(n.shape, n.dtype, reduce_identity(kind, n.dtype))
        out_t = tensor_type(n.shape, n.dtype)
        kept = [d for d in range(rank) if d not in axes]
        iters = ", ".join('"reduction"' if d in axes else '"parallel"' for d in range(rank))
        name = self.fresh(kind)
        self.emit(f"{name} = linalg.generic {{indexing_maps = [{affine_map(rank, range(rank))}, "
                  f"{affine_map(rank, kept)}], iterator_types = [{iters}]}} "
                  f"ins({self.names[n.inputs[0]]} : {self.ty(n.inputs[0])}) outs({init} : {out_t}) {{")
        b = self.fresh("b")[1:]
        combine = Instr(REDUCE_OP[kind], (0, 1))
        self.lines.append(f"    ^bb0(%{b}_in: {t}, %{b}_acc: {t}):")
        body = emit_instr(combine, [f"%{b}_in", f"%{b}_acc"], n.dtype, n.dtype, f"%{b}_r")
        self.lines += ["      " + s for s in body]
        self.lines.append(f"      linalg.yield %{b}_r : {t}")
        self.emit(f"}} -> {out_t}")
        return name

    def _named(self, op: str, n: Node, attrs: str = "") -> str:
        init = self.filled(n.shape, n.dtype, 0)
        a, b = n.inputs
        out_t = tensor_type(n.shape, n.dtype)
        name = self.fresh(op.split("_")[0])
        self.emit(f"{name} = linalg.{op}{attrs} ins({self.names[a]}, {self.names[b]} : {self.ty(a)}, {self.ty(b)}) "
                  f"outs({init} : {out_t}) -> {out_t}")
        return name

    def op_matmul(self, n: Node) -> str:
        return self._named("matmul", n)

    def op_batch_matmul(self, n: Node) -> str:
        return self._named("batch_matmul", n)

    def op_conv2d(self, n: Node) -> str:
        op = "conv_2d_nhwc_hwcf" if n.attrs["layout"] == "NHWC" else "conv_2d_nchw_fchw"
        (sh, sw), (dh, dw) = n.attrs["stride"], n.attrs["dilation"]
        attrs = (f" {{dilations = dense<[{dh}, {dw}]> : tensor<2xi64>, "
                 f"strides = dense<[{sh}, {sw}]> : tensor<2xi64>}}")
        return self._named(op, n, attrs)

    def op_pad(self, n: Node) -> str:
        x, t = n.inputs[0], DTYPES[n.dtype]
        cst, name = self.fresh("cst"), self.fresh("padded")
        self.emit(f"{cst} = arith.constant {literal(n.attrs['value'], n.dtype)} : {t}")
        idx = ", ".join(f"%{name[1:]}_i{k}: index" for k in range(len(n.shape)))
        self.emit(f"{name} = tensor.pad {self.names[x]} low[{', '.join(map(str, n.attrs['low']))}] "
                  f"high[{', '.join(map(str, n.attrs['high']))}] {{")
        self.lines.append(f"    ^bb0({idx}):")
        self.lines.append(f"      tensor.yield {cst} : {t}")
        self.emit(f"}} : {self.ty(x)} to {tensor_type(n.shape, n.dtype)}")
        return name

    def op_reshape(self, n: Node) -> str:
        x = n.inputs[0]
        return self.reshape(self.names[x], self.nodes[x].shape, n.shape, n.dtype)

    def op_transpose(self, n: Node) -> str:
        x = n.inputs[0]
        init = self.empty(n.shape, n.dtype)
        name = self.fresh("transposed")
        perm = ", ".join(map(str, n.attrs["perm"]))
        self.emit(f"{name} = linalg.transpose ins({self.names[x]} : {self.ty(x)}) "
                  f"outs({init} : {tensor_type(n.shape, n.dtype)}) permutation = [{perm}]")
        return name


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def live_nodes(nodes: Sequence[Node], outputs: Sequence[int]) -> list[int]:
    """Ids of the nodes the outputs depend on, in creation (= topological) order."""
    live, stack = set(), list(outputs)
    while stack:
        nid = stack.pop()
        if nid not in live:
            live.add(nid)
            stack.extend(nodes[nid].inputs)
    return sorted(live)


def emit_module(nodes: Sequence[Node], inputs: Sequence[int], outputs: Sequence[int], name: str) -> str:
    """The whole module: inputs are func arguments in order, outputs the returned values in order."""
    e = _Emitter(nodes)
    for k, nid in enumerate(inputs):
        e.names[nid] = f"%arg{k}"
    for nid in live_nodes(nodes, outputs):
        if nodes[nid].kind != "input":
            e.names[nid] = e.node(nid)
    args = ", ".join(f"%arg{k}: {e.ty(nid)}" for k, nid in enumerate(inputs))
    results = ", ".join(e.ty(nid) for nid in outputs)
    name_attr = name.replace("\\", "\\\\").replace('"', '\\"')
    return "\n".join([
        f'module attributes {{portable.graph = "{name_attr}"}} {{',
        f"  func.func @main({args}) -> ({results}) {{",
        *e.lines,
        f"    return {', '.join(e.names[nid] for nid in outputs)} : {results}",
        "  }",
        "}",
        "",
    ])
