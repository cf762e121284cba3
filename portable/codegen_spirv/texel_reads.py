"""Read-only kernel buffers read through uniform texel buffers (OpImageFetch) instead of storage buffers, on Vulkan
drivers whose profile sets `texel_reads` (lavapipe).

llvmpipe (Mesa 22.3) loads a storage buffer one SIMD lane and one vector component at a time, each with a bounds
check; a texel fetch goes through its image path, which gathers a whole texel per lane. Measured with hand-written
GLSL (benchmarks/texel_probe.py, benchmarks/results/cpu-xeon/texel_probe.txt): c = a + b over 4 Mi floats takes
6.4-6.9 ms with texel-buffer loads and storage-buffer stores against 9.1-10.1 ms with storage buffers of
u64vec4 (the form wide_buffers.py gives), 2.5x faster at 64 Ki floats. Stores through texel buffers are slower
(imageStore: 2x), so only buffers a kernel never writes change.

A buffer qualifies when its elements are a whole number of 16-byte texels (vec4 of 32-bit values, vec2/vec4 of
64-bit ones: what vector_buffers.py and wide_buffers.py make of streamed buffers) and every use is an element
load. Texels are R32G32B32A32_UINT (a format every Vulkan device can fetch from a uniform texel buffer); a load of
an element of k texels becomes k fetches at index*k + j, each bitcast to the element's type. The runtime binds
such a buffer through a buffer view of that format (Kernel.texel_buffers); the bytes it holds do not change.
"""

from __future__ import annotations

import re

from ..compiler.mlir import ir

TEXEL_BYTES = 16
_IMAGE = "!spirv.image<i32, Buffer, NoDepth, NonArrayed, SingleSampled, NeedSampler, Unknown>"
_ARRAY = re.compile(r"!spirv\.ptr<!spirv\.struct<[^(]*\(!spirv\.array<(\d+) x (vector<(\d+)x([if])(\d+)>), "
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
            count, elem, lanes, bits, stride = int(m[1]), m[2], int(m[3]), int(m[5]), int(m[6])
            size = lanes * bits // 8
            if size % TEXEL_BYTES or stride != size or count * size // TEXEL_BYTES > max_texels:
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


def _const(v: int, t: ir.Type) -> ir.Value:
    return ir.Operation.create("spirv.Constant", results=[t], attributes={"value": ir.IntegerAttr.get(t, v)}).result


def _require_sampled_buffer(spv: ir.Operation) -> None:
    """Declare the SampledBuffer capability (a Dim=Buffer image with Sampled=1) in the module's VCE triple: the
    rewrite runs after spirv-update-vce."""
    vce = str(spv.attributes["vce_triple"])
    if "SampledBuffer" not in vce:
        spv.attributes["vce_triple"] = ir.Attribute.parse(vce.replace("[Shader", "[Shader, SampledBuffer", 1))
