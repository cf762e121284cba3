"""Print the cooperative-matrix shapes each Vulkan device offers (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR),
in the spelling of device_profiles/*.toml `cooperative_matrix_shapes` ("16x16x16 f16*f16+f32->f32"), as JSON.

    python benchmarks/coop_matrix_props.py [--out FILE]

Needs only the `vulkan` package: run it on a GPU host to fill or check a profile."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import vulkan as vk

_TYPES = {vk.VK_COMPONENT_TYPE_FLOAT16_KHR: "f16", vk.VK_COMPONENT_TYPE_FLOAT32_KHR: "f32",
          vk.VK_COMPONENT_TYPE_FLOAT64_KHR: "f64", vk.VK_COMPONENT_TYPE_SINT8_KHR: "s8",
          vk.VK_COMPONENT_TYPE_UINT8_KHR: "u8", vk.VK_COMPONENT_TYPE_SINT32_KHR: "s32",
          vk.VK_COMPONENT_TYPE_UINT32_KHR: "u32", vk.VK_COMPONENT_TYPE_SINT16_KHR: "s16",
          vk.VK_COMPONENT_TYPE_UINT16_KHR: "u16", vk.VK_COMPONENT_TYPE_SINT64_KHR: "s64",
          vk.VK_COMPONENT_TYPE_UINT64_KHR: "u64"}
_SCOPES = {vk.VK_SCOPE_DEVICE_KHR: "device", vk.VK_SCOPE_WORKGROUP_KHR: "workgroup",
           vk.VK_SCOPE_SUBGROUP_KHR: "subgroup", vk.VK_SCOPE_QUEUE_FAMILY_KHR: "queue-family"}


def shapes(instance, pd) -> list[dict]:
    raw = vk.lib.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if raw == vk.ffi.NULL:
        return []
    fn = vk.ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", raw)
    count = vk.ffi.new("uint32_t*")
    if fn(pd, count, vk.ffi.NULL) != vk.VK_SUCCESS or count[0] == 0:
        return []
    props = vk.ffi.new(f"VkCooperativeMatrixPropertiesKHR[{count[0]}]")
    for i in range(count[0]):
        props[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    fn(pd, count, props)
    out = []
    for p in props[0:count[0]]:
        t = {k: _TYPES.get(getattr(p, k), str(getattr(p, k))) for k in ("AType", "BType", "CType", "ResultType")}
        out.append({"shape": f"{p.MSize}x{p.NSize}x{p.KSize} {t['AType']}*{t['BType']}+{t['CType']}->"
                             f"{t['ResultType']}", "scope": _SCOPES.get(p.scope, str(p.scope)),
                    "saturating": bool(p.saturatingAccumulation)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    app = vk.VkApplicationInfo(pApplicationName="coop", apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    report = []
    for pd in vk.vkEnumeratePhysicalDevices(instance):
        props = vk.vkGetPhysicalDeviceProperties(pd)
        exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
        report.append({"device": props.deviceName, "VK_KHR_cooperative_matrix": "VK_KHR_cooperative_matrix" in exts,
                       "shapes": shapes(instance, pd) if "VK_KHR_cooperative_matrix" in exts else []})
    vk.vkDestroyInstance(instance, None)
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
