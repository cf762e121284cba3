"""Just enough SPIR-V parsing to reject a bad module before the driver sees it: drivers may crash on
invalid SPIR-V rather than return an error, and a clear message beats VK_ERROR_UNKNOWN."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAGIC = 0x07230203
_OP_CAPABILITY, _OP_ENTRY_POINT, _OP_EXECUTION_MODE, _OP_FUNCTION = 17, 15, 16, 54
# SPIR-V capabilities a kernel may declare that only some devices have: capability -> (the DeviceInfo.limits key
# that says whether the device does, what it is called in Vulkan).
CAPABILITY_NEEDS = {
    9: ("fp16", "shaderFloat16"), 10: ("fp64", "shaderFloat64"), 11: ("int64", "shaderInt64"),
    22: ("int16", "shaderInt16"), 39: ("int8", "shaderInt8"),
    4434: ("storage_buffer_16bit", "storageBuffer16BitAccess"),
    4448: ("storage_buffer_8bit", "storageBuffer8BitAccess"),
    63: ("subgroup_arithmetic", "subgroup arithmetic in compute shaders"),
    6022: ("cooperative_matrix", "VK_KHR_cooperative_matrix"),
    5345: ("vulkan_memory_model", "vulkanMemoryModel"),
}
_GL_COMPUTE, _LOCAL_SIZE = 5, 17
_MODELS = {0: "Vertex", 4: "Fragment", 5: "GLCompute", 6: "Kernel"}


class SpirvError(ValueError):
    """The bytes are not a usable SPIR-V module; the message says why."""


@dataclass
class ModuleInfo:
    version: tuple[int, int]
    entry_points: dict[str, str] = field(default_factory=dict)  # name -> execution model
    local_size: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # name -> LocalSize
    capabilities: set[int] = field(default_factory=set)  # OpCapability operands


def _literal_string(words: np.ndarray) -> str:
    raw = words.astype("<u4").tobytes()
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def inspect(code: bytes) -> ModuleInfo:
    """Header, capabilities, entry points and LocalSize of a SPIR-V module (in host byte order, as Vulkan wants
    it)."""
    if len(code) < 20 or len(code) % 4:
        raise SpirvError(f"{len(code)} bytes is not a SPIR-V module (needs a 20-byte header and whole words)")
    words = np.frombuffer(code, dtype="<u4")
    if words[0] != MAGIC:
        swapped = int(words[0].byteswap()) == MAGIC
        raise SpirvError(f"bad SPIR-V magic number {int(words[0]):#010x}"
                         + (" (the module is big-endian; Vulkan needs little-endian words)" if swapped else ""))
    info = ModuleInfo(version=((int(words[1]) >> 16) & 0xFF, (int(words[1]) >> 8) & 0xFF))
    names: dict[int, str] = {}
    i, n = 5, len(words)
    while i < n:
        count, op = int(words[i]) >> 16, int(words[i]) & 0xFFFF
        if count == 0 or i + count > n:
            raise SpirvError(f"malformed instruction at word {i} (opcode {op}, word count {count})")
        if op == _OP_CAPABILITY and count >= 2:
            info.capabilities.add(int(words[i + 1]))
        elif op == _OP_ENTRY_POINT and count >= 4:
            name = _literal_string(words[i + 3:i + count])
            names[int(words[i + 2])] = name
            info.entry_points[name] = _MODELS.get(int(words[i + 1]), str(int(words[i + 1])))
        elif op == _OP_EXECUTION_MODE and count >= 6 and int(words[i + 2]) == _LOCAL_SIZE:
            target = names.get(int(words[i + 1]))
            if target is not None:
                info.local_size[target] = (int(words[i + 3]), int(words[i + 4]), int(words[i + 5]))
        elif op == _OP_FUNCTION:
            break  # entry points and execution modes all come before the first function
        i += count
    return info


def max_spirv_version(api_version: int, extensions: frozenset[str]) -> tuple[int, int]:
    """Highest SPIR-V version a device of this Vulkan version accepts."""
    minor = (api_version >> 12) & 0x3FF
    major = (api_version >> 22) & 0x7F
    if (major, minor) >= (1, 3):
        return (1, 6)
    if (major, minor) >= (1, 2):
        return (1, 5)
    if (major, minor) >= (1, 1):
        return (1, 4) if "VK_KHR_spirv_1_4" in extensions else (1, 3)
    return (1, 0)
