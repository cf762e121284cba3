"""Read-only kernel buffers read through uniform texel buffers (OpImageFetch) instead of storage buffers, on Vulkan
drivers whose profile sets `texel_reads` (lavapipe).

llvmpipe (Mesa 22.3) loads a storage buffer one SIMD lane and one vector component at a time, each with a bounds
check; a texel fetch goes through its image path, which gathers a whole texel per lane. Measured with hand-written
GLSL (benchmarks/texel_probe.py, benchmarks/results/cpu-xeon/texel_probe.txt): c = a + b over 4 Mi floats takes
6.4-6.9 ms with texel-buffer loads and storage-buffer stores against 9.1-10.1 ms with storage buffers of
u64vec4 (the form wide_buffers.py gives), 2.5x faster at 64 Ki floats. Stores through texel buffers are slower
(imageStore: 2x), so only buffers a kernel never writes change.

A buffer qualifies when its elements are a whole number of 16-byte texels (vec4 of 32-bit values, vec2/vec4 of
64-bit ones: what vector_buffers.py and wide_buffers.py make of streamed buffers), or 8-byte elements (wide_buffers'
i64 of four halves) of an even count, and every use is an element load. Texels are R32G32B32A32_UINT (a format
every Vulkan device can fetch from a uniform texel buffer); a load of an element of k texels becomes k fetches at
index*k + j, each bitcast to the element's type; one of an 8-byte element a fetch at index >> 1 and its .xy or .zw
half by index & 1 (fixed where the index's parity is known). The runtime binds such a buffer through a buffer view
of that format (Kernel.texel_buffers); the bytes it holds do not change.
"""

from __future__ import annotations

import re

from ..ir.mlir import ir
from .vce import add_capability

TEXEL_BYTES = 16
_IMAGE = "!spirv.image<i32, Buffer, NoDepth, NonArrayed, SingleSampled, NeedSampler, Unknown>"
_ARRAY = re.compile(r"!spirv\.ptr<!spirv\.struct<[^(]*\(!spirv\.array<(\d+) x ((?:vector<(\d+)x)?[if](\d+)>?), "
                    r"stride=(\d+)> \[0\]\)>, StorageBuffer>$")


def texel_reads(module: ir.Module, access: tuple[str, ...], max_texels: int) -> tuple[int, ...]:
    """Rewrite the read-only buffers of the spirv.module in `module` that qualify (at most `max_texels` texels:
    the device's maxTexelBufferElements) into uniform texel buffers; returns their bindings, ascending."""
    changed: list[int] = []
    for spv in module.body.operations:
        if spv.operation.name != "spirv.module":
            continue
        body = spv.regions[0].blocks[0]
        addrs = _addressofs(spv.operation)
        for var in [op.operation for op in body.operations]:
            if var.name != "spirv.GlobalVariable" or "binding" not in var.attributes:
                continue
            binding = ir.IntegerAttr(var.attributes["binding"]).value
            if binding >= len(access) or access[binding] != "r":
                continue
            m = _ARRAY.match(str(ir.TypeAttr(var.attributes["type"]).value))
            if not m:
                continue
            count, elem, lanes, bits, stride = int(m[1]), m[2], int(m[3] or 1), int(m[4]), int(m[5])
            size = lanes * bits // 8
            # Half texels only of an even count: a view of whole texels then covers every element.
            half = size * 2 == TEXEL_BYTES and count % 2 == 0
            if (size % TEXEL_BYTES and not half) or stride != size or count * size // TEXEL_BYTES > max_texels:
                continue
            name = ir.StringAttr(var.attributes["sym_name"]).value
            loads = _element_loads(addrs.get(name, []))
            if loads is None:
                continue
            image_ptr = ir.Type.parse(f"!spirv.ptr<{_IMAGE}, UniformConstant>")
            var.attributes["type"] = ir.TypeAttr.get(image_ptr)
            for attr in ("restrict", "non_writable"):  # decorations of buffer memory, not of an image
                if attr in var.attributes:
                    del var.attributes[attr]
            for addr in addrs.get(name, []):
                addr.results[0].set_type(image_ptr)
            for chain, load in loads:
                if half:
                    _fetch_half(chain, load, ir.Type.parse(elem))
                else:
                    _fetch(chain, load, ir.Type.parse(elem), size // TEXEL_BYTES)
            for chain in {id(c): c for c, _ in loads}.values():
                chain.erase()
            changed.append(binding)
        if changed:
            _require_sampled_buffer(spv.operation)
    return tuple(sorted(changed))


def _addressofs(op: ir.Operation) -> dict[str, list[ir.Operation]]:
    """spirv.mlir.addressof ops under `op`, by the variable they name."""
    found: dict[str, list[ir.Operation]] = {}

    def walk(o: ir.Operation) -> None:
        for region in o.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = inner.operation
                    if inner.name == "spirv.mlir.addressof":
                        found.setdefault(ir.FlatSymbolRefAttr(inner.attributes["variable"]).value, []).append(inner)
                    walk(inner)

    walk(op)
    return found


def _element_loads(addrs: list[ir.Operation]) -> list[tuple[ir.Operation, ir.Operation]] | None:
    """(access chain, load) pairs when every use of the variable is `load(access_chain(var, [0, i]))`; else None
    (a buffer passed on, or indexed some other way, keeps its storage-buffer form)."""
    pairs = []
    for addr in addrs:
        for use in addr.results[0].uses:
            chain = use.owner
            if chain.name != "spirv.AccessChain" or len(chain.operands) != 3 or use.operand_number != 0:
                return None
            for u in chain.results[0].uses:
                if u.owner.name != "spirv.Load":
                    return None
                pairs.append((chain, u.owner))
    return pairs


def _fetch(chain: ir.Operation, load: ir.Operation, elem: ir.Type, texels: int) -> None:
    """Replace `load` (of `chain`'s element) by `texels` fetches from the image its variable now is."""
    i32 = ir.IntegerType.get_signless(32)
    uvec4 = ir.VectorType.get([4], i32)
    velem = ir.VectorType(elem)
    part = velem if texels == 1 else ir.VectorType.get([velem.shape[0] // texels], velem.element_type)
    with ir.InsertionPoint(load), load.location:
        image = ir.Operation.create("spirv.Load", results=[ir.Type.parse(_IMAGE)], operands=[chain.operands[0]]).result
        base = chain.operands[2]  # the element's index; its first texel's
        if texels > 1:
            base = ir.Operation.create("spirv.IMul", results=[i32], operands=[base, _const(texels, i32)]).result
        parts = []
        for j in range(texels):
            coord = base
            if j:
                coord = ir.Operation.create("spirv.IAdd", results=[i32], operands=[base, _const(j, i32)]).result
            texel = ir.Operation.create("spirv.ImageFetch", results=[uvec4], operands=[image, coord]).result
            if part != uvec4:
                texel = ir.Operation.create("spirv.Bitcast", results=[part], operands=[texel]).result
            parts.append(texel)
        value = parts[0] if texels == 1 else ir.Operation.create(
            "spirv.CompositeConstruct", results=[elem], operands=parts).result
    load.results[0].replace_all_uses_with(value)
    load.erase()


def _fetch_half(chain: ir.Operation, load: ir.Operation, elem: ir.Type) -> None:
    """Replace `load` of an 8-byte element by a fetch of texel index >> 1 and its .xy or .zw half by index & 1."""
    i32, i1 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
    uvec2, uvec4 = ir.VectorType.get([2], i32), ir.VectorType.get([4], i32)
    index = chain.operands[2]
    with ir.InsertionPoint(load), load.location:
        image = ir.Operation.create("spirv.Load", results=[ir.Type.parse(_IMAGE)], operands=[chain.operands[0]]).result
        coord = ir.Operation.create("spirv.ShiftRightLogical", results=[i32], operands=[index, _const(1, i32)]).result
        texel = ir.Operation.create("spirv.ImageFetch", results=[uvec4], operands=[image, coord]).result

        def half(j: int) -> ir.Value:
            return ir.Operation.create("spirv.VectorShuffle", results=[uvec2], operands=[texel, texel], attributes={
                "components": ir.ArrayAttr.get([ir.IntegerAttr.get(i32, 2 * j + k) for k in (0, 1)])}).result

        parity = _parity(index)
        if parity is None:  # SPIR-V 1.3's OpSelect of vectors takes a condition per component
            bit = ir.Operation.create("spirv.BitwiseAnd", results=[i32], operands=[index, _const(1, i32)]).result
            odd = ir.Operation.create("spirv.INotEqual", results=[i1], operands=[bit, _const(0, i32)]).result
            odd2 = ir.Operation.create("spirv.CompositeConstruct", results=[ir.VectorType.get([2], i1)],
                                       operands=[odd, odd]).result
            value = ir.Operation.create("spirv.Select", results=[uvec2], operands=[odd2, half(1), half(0)]).result
        else:
            value = half(parity)
        if elem != uvec2:
            value = ir.Operation.create("spirv.Bitcast", results=[elem], operands=[value]).result
    load.results[0].replace_all_uses_with(value)
    load.erase()


def _parity(v: ir.Value, depth: int = 0) -> int | None:
    """v & 1 where constants, products and sums decide it; else None."""
    if depth > 16 or isinstance(v, ir.BlockArgument):
        return None
    op = v.owner.operation
    if op.name == "spirv.Constant":
        return ir.IntegerAttr(op.attributes["value"]).value & 1
    if op.name not in ("spirv.IMul", "spirv.IAdd"):
        return None
    a, b = (_parity(x, depth + 1) for x in op.operands)
    if op.name == "spirv.IAdd":
        return None if None in (a, b) else a ^ b
    return 0 if 0 in (a, b) else 1 if a == b == 1 else None


def _const(v: int, t: ir.Type) -> ir.Value:
    return ir.Operation.create("spirv.Constant", results=[t], attributes={"value": ir.IntegerAttr.get(t, v)}).result


def _require_sampled_buffer(spv: ir.Operation) -> None:
    """Declare the SampledBuffer capability (a Dim=Buffer image with Sampled=1) in the module's VCE triple: the
    rewrite runs after spirv-update-vce."""
    add_capability(spv, "SampledBuffer")
