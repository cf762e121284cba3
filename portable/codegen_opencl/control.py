"""scf.for / scf.if / scf.while -> C `for`, `if` and `for (;;)` loops.

A loop's results and its iter_args share C variables (one per value, or one per row of an N-D vector),
assigned before the loop and at each scf.yield; scf.if results are declared before the `if` and assigned in
both branches.
"""

from __future__ import annotations

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from . import nd_vectors as nd


def _check_values(values) -> None:
    for v in values:
        if isinstance(v.type, ir.MemRefType):
            raise UnsupportedOp("memref values carried by scf ops")


def _declare_shared(em, values, block_args, inits=None) -> list[list[str]]:
    """C variables for each value (and the matching block arguments), initialised from `inits` if given."""
    _check_values(values)
    all_slots = []
    for i, v in enumerate(values):
        ct = em.slot_type(v.type)
        init_slots = em.slots(inits[i]) if inits is not None else None
        slots = []
        for k in range(nd.num_slots(v.type)):
            name = em.fresh()
            em.line(f"{ct} {name}{' = ' + init_slots[k] if init_slots else ''};")
            em.var_types[name] = ct
            slots.append(name)
        em.bind(v, slots)
        if block_args is not None:
            em.bind(block_args[i], slots)
        all_slots.append(slots)
    return all_slots


def _for(em, op) -> None:
    if "unsignedCmp" in op.attributes:
        raise UnsupportedOp("scf.for with unsigned comparison")
    lb, ub, step = (em.val(v) for v in op.operands[:3])
    body = op.regions[0].blocks[0]
    results = list(op.results)
    carried = _declare_shared(em, results, list(body.arguments)[1:], list(op.operands)[3:])
    iv = body.arguments[0]
    i = em.fresh("i")
    em.names[iv] = i
    em.line(f"for ({em.ct(iv.type)} {i} = {lb}; {i} < {ub}; {i} += {step}) {{")
    em.depth += 1
    em.emit_block(body, {"scf.yield": lambda y: em.assign(carried, y.operands)})
    em.depth -= 1
    em.line("}")


def _if(em, op) -> None:
    results = list(op.results)
    out = _declare_shared(em, results, None)
    yield_to = {"scf.yield": lambda y: em.assign(out, y.operands)}
    em.line(f"if ({em.val(op.operands[0])}) {{")
    em.depth += 1
    em.emit_block(op.regions[0].blocks[0], yield_to)
    em.depth -= 1
    else_blocks = op.regions[1].blocks
    if len(else_blocks) and (len(else_blocks[0].operations) > 1 or results):
        em.line("} else {")
        em.depth += 1
        em.emit_block(else_blocks[0], yield_to)
        em.depth -= 1
    em.line("}")


def _while(em, op) -> None:
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    results = list(op.results)
    state = _declare_shared(em, list(before.arguments), None, list(op.operands))
    out = _declare_shared(em, results, list(after.arguments))

    def condition(c) -> None:
        em.assign(out, list(c.operands)[1:])
        em.line(f"if (!{em.val(c.operands[0])}) break;")

    em.line("for (;;) {")
    em.depth += 1
    em.emit_block(before, {"scf.condition": condition})
    em.emit_block(after, {"scf.yield": lambda y: em.assign(state, y.operands)})
    em.depth -= 1
    em.line("}")



HANDLERS = {"scf.for": _for, "scf.if": _if, "scf.while": _while}
