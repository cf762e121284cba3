"""Device profiles (device_profiles/*.toml): every file loads with the sections the compiler and runtime read, real
devices of every family are matched to the right profile (unknown hardware to 'generic'), and the files ship in the
wheel. What the profiles make the compiler do: test_profile_codegen.py. No device is needed."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from portable import profiles
from portable.backend import DeviceInfo

FAMILIES = ("amd-rdna2", "amd-rdna3", "arm-mali-valhall", "arm-mali-bifrost", "qualcomm-adreno-6xx",
            "qualcomm-adreno-7xx", "intel-xe")
ALL = tuple(sorted(profiles.all_profiles()))
# Types of the [limits] and [codegen] keys the compiler, runtime and conformance tools read (other keys may be
# added by other parts of the project; these must keep their types).
INT, BOOL, STR = int, bool, str
LIMIT_TYPES = {"subgroup_size": INT, "shared_memory_bytes": INT, "max_workgroup_invocations": INT,
               "max_storage_buffer_range": INT, "max_buffer_bytes": INT, "preferred_vector_width": INT,
               "fp16": BOOL, "int8": BOOL, "int16": BOOL, "int64": BOOL, "fp64": BOOL, "storage_buffer_16bit": BOOL,
               "storage_buffer_8bit": BOOL, "cooperative_matrix": BOOL, "max_texel_buffer_elements": INT}
CODEGEN_TYPES = {"workgroup_invocations": INT, "matmul_workgroup_invocations": INT, "elementwise_per_thread": INT,
                 "reduction_threads": INT, "im2col_max_bytes": INT, "vectorize": BOOL, "spirv_version": STR,
                 "texel_reads": BOOL, "opencl_subgroups": BOOL}
MATCH_KEYS = {"api", "vendor_id", "driver", "device_name", "device_id"}
# SPIR-V version -> the spirv-val environment of the Vulkan version that first requires accepting it.
TARGET_ENV = {"v1.0": "vulkan1.0", "v1.3": "vulkan1.1", "v1.5": "vulkan1.2", "v1.6": "vulkan1.3"}


# ---- loading ------------------------------------------------------------------------------------------
def test_every_file_loads_with_its_sections():
    files = sorted(profiles.PROFILE_DIR.glob("*.toml"))
    assert {p.stem for p in files} >= set(FAMILIES) | {"generic", "lavapipe", "pocl", "nvidia"}
    for p in files:
        with open(p, "rb") as f:
            prof = tomllib.load(f)
        assert prof.get("name") == p.stem, f"{p.name}: name must equal the file name"
        assert isinstance(prof.get("description"), str) and prof["description"]
        for section in ("match", "limits", "codegen"):
            assert isinstance(prof.get(section), dict), f"{p.name}: no [{section}]"
        # profiles.match ignores keys it does not know: a misspelt one would silently widen the match.
        assert set(prof["match"]) <= MATCH_KEYS, f"{p.name}: unknown match keys {set(prof['match']) - MATCH_KEYS}"
        for section, types in (("limits", LIMIT_TYPES), ("codegen", CODEGEN_TYPES)):
            for key, typ in types.items():
                if key in prof[section]:
                    v = prof[section][key]
                    assert isinstance(v, typ) and (typ is not INT or not isinstance(v, bool)), f"{p.name}: {key}"
        for key in ("subgroup_sizes", "max_workgroup_count"):
            assert all(isinstance(v, int) for v in prof["limits"].get(key, [])), f"{p.name}: {key}"
        for key in ("spirv_caps", "spirv_exts"):
            assert all(isinstance(v, str) for v in prof["codegen"].get(key, [])), f"{p.name}: {key}"
        # Butterfly shuffles at the profile's subgroup width, or the device's own reduction at any width.
        assert prof["codegen"].get("subgroup_reduce", False) in (True, False, "varying"), p.name
        if prof["codegen"].get("subgroup_reduce") == "varying":
            assert "GroupNonUniformArithmetic" in prof["codegen"]["spirv_caps"], p.name
        if p.stem != "generic":
            assert prof["match"], f"{p.name}: an empty [match] never matches"
            assert {"vendor_id", "driver"} & set(prof["match"]), f"{p.name}: needs vendor_id or driver"
        if "quirks" in prof:
            assert all(isinstance(q, str) and q for q in prof["quirks"])
    assert set(profiles.all_profiles()) == {p.stem for p in files}


def _toml_form(v):
    """A typed profile value in the form TOML wrote it (tuples as lists, a single value as itself)."""
    if isinstance(v, profiles.Section):
        return v.given()
    return [_toml_form(x) for x in v] if isinstance(v, tuple) else v


@pytest.mark.parametrize("name", ALL)
def test_typed_fields_hold_the_toml_values(name):
    """Every key of every section of a shipped file is a typed field with the value the file gives."""
    prof = profiles.all_profiles()[name]
    assert isinstance(prof, profiles.Profile) and prof.path == profiles.PROFILE_DIR / f"{name}.toml"
    with open(prof.path, "rb") as f:
        data = tomllib.load(f)
    assert prof.name == data["name"] and prof.description == data["description"]
    assert list(prof.quirks) == data.get("quirks", [])
    for section in ("match", "limits", "codegen", "package"):
        typed = getattr(prof, section)
        assert isinstance(typed, profiles.SECTIONS[section])
        for key, value in data.get(section, {}).items():
            got = _toml_form(getattr(typed, key))
            assert got == (value if isinstance(value, list) or section != "match" else [value]), f"{name} {key}"
            if isinstance(value, int) and not isinstance(value, bool) and section != "match":
                assert type(getattr(typed, key)) is int
        assert typed.given() == {k: v if isinstance(v, list) or section != "match" else [v]
                                 for k, v in data.get(section, {}).items()}


def test_typed_fields_read_as_values():
    nvidia, lavapipe = profiles.all_profiles()["nvidia"], profiles.all_profiles()["lavapipe"]
    assert nvidia.codegen.thread_tile == (8, 4) and nvidia.limits.subgroup_size == 32
    assert nvidia.codegen.matmul_promote_tiles == ((128, 64, 16, 4), (64, 64, 8, 4))
    assert lavapipe.match.api == ("vulkan",) and lavapipe.match.vendor_id == (0x10005,)
    assert lavapipe.codegen.texel_reads is True and lavapipe.codegen.coop_stage_k is None  # not given: None
    assert profiles.all_profiles()["pocl"].package.variants[0].native_float_vector_width == 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        nvidia.codegen.thread_tile = (1, 1)  # type: ignore[misc]


def _write(tmp_path, text):
    p = tmp_path / "mydevice.toml"
    p.write_text('name = "mydevice"\ndescription = "test"\n' + text)
    return p


@pytest.mark.parametrize("text, key, near", [
    ("[codegen]\nthread_tiles = [4, 4]\n", "thread_tiles", "thread_tile"),
    ("[limits]\nsubgroup_szie = 32\n", "subgroup_szie", "subgroup_size"),
    ("[match]\nvendorid = 4318\n", "vendorid", "vendor_id"),
    ("[codgen]\nvectorize = true\n", "codgen", "codegen"),
])
def test_a_misspelt_key_is_refused_with_the_nearest_one(tmp_path, text, key, near):
    p = _write(tmp_path, text)
    with pytest.raises(profiles.ProfileError) as e:
        profiles.load(p)
    msg = str(e.value)
    assert str(p) in msg and repr(key) in msg and f"did you mean {near!r}" in msg
    assert isinstance(e.value, profiles.PortableError)


@pytest.mark.parametrize("text, key, expected", [
    ("[codegen]\nworkgroup_invocations = \"64\"\n", "workgroup_invocations", "int"),
    ("[codegen]\nvectorize = 1\n", "vectorize", "bool"),
    ("[limits]\nshared_memory_bytes = true\n", "shared_memory_bytes", "int"),
    ("[codegen]\nspirv_caps = [\"Shader\", 3]\n", "spirv_caps", "str"),
])
def test_a_value_of_the_wrong_type_is_refused(tmp_path, text, key, expected):
    p = _write(tmp_path, text)
    with pytest.raises(profiles.ProfileError) as e:
        profiles.load(p)
    msg = str(e.value)
    assert str(p) in msg and key in msg and f"should be {expected}" in msg


def test_a_valid_file_outside_devices_loads(tmp_path):
    prof = profiles.load(_write(tmp_path, "[codegen]\nsubgroup_reduce = \"varying\"\nthread_tile = [2, 2]\n"))
    assert prof.codegen.subgroup_reduce == "varying" and prof.codegen.thread_tile == (2, 2)
    assert profiles.codegen_options(prof)["thread_tile"] == (2, 2)


@pytest.mark.parametrize("name", ["nvidia", "lavapipe", "pocl"])
def test_driver_profiles_state_every_limit(name):
    """The NVIDIA, lavapipe and PoCL profiles state the same limits as the family profiles (read on the H200 and on
    this host's drivers) and list their quirks."""
    lim = profiles.all_profiles()[name]["limits"]
    for key in ("subgroup_size", "subgroup_sizes", "max_workgroup_invocations", "max_workgroup_size",
                "shared_memory_bytes", "max_storage_buffer_range", "max_workgroup_count", "fp16", "int8", "int64",
                "storage_buffer_16bit", "storage_buffer_8bit", "cooperative_matrix", "preferred_vector_width"):
        assert key in lim, f"{name}: [limits] lacks {key}"
    assert lim["subgroup_size"] in lim["subgroup_sizes"]
    assert profiles.all_profiles()[name].get("quirks"), f"{name}: no quirks listed"


@pytest.mark.parametrize("name", FAMILIES)
def test_family_profiles_are_complete(name):
    """The GPU-family profiles state every limit the issue asks for, tell families of one vendor apart by
    device name, and list their driver quirks."""
    prof = profiles.all_profiles()[name]
    m, lim, cg = prof["match"], prof["limits"], prof["codegen"]
    assert set(m) >= {"api", "vendor_id", "driver", "device_name"}
    for key in ("subgroup_size", "subgroup_sizes", "max_workgroup_invocations", "shared_memory_bytes",
                "max_storage_buffer_range", "max_workgroup_count", "fp16", "int8", "int64",
                "storage_buffer_16bit", "storage_buffer_8bit", "cooperative_matrix", "preferred_vector_width"):
        assert key in lim, f"{name}: [limits] lacks {key}"
    assert lim["subgroup_size"] in lim["subgroup_sizes"]
    assert lim["shared_memory_bytes"] >= 16384 and lim["max_workgroup_invocations"] >= 128  # Vulkan minimums
    assert lim["max_storage_buffer_range"] >= 1 << 27
    assert len(lim["max_workgroup_count"]) == 3 and min(lim["max_workgroup_count"]) >= 65535
    assert cg["spirv_version"] in TARGET_ENV and cg["vectorize"] is True and len(cg["thread_tile"]) == 2
    assert prof.get("quirks"), f"{name}: no quirks listed"


# ---- matching -----------------------------------------------------------------------------------------
def info(name, driver, vendor_id, api="vulkan", device_id=0, device_type="gpu"):
    return DeviceInfo(api=api, index=0, name=name, driver=driver, driver_version="", vendor_id=vendor_id,
                      device_id=device_id, device_type=device_type)


QCOM_VK = "Qualcomm Technologies Inc. Adreno Vulkan Driver"
CASES = [
    # AMD RDNA2: RADV (family name in the device name), Windows, ROCm OpenCL (gfx target as the name)
    (info("AMD Radeon RX 6800 (RADV NAVI21)", "radv", 0x1002, device_id=0x73BF), "amd-rdna2"),
    (info("AMD Radeon RX 6500 XT (RADV NAVI24)", "radv", 0x1002), "amd-rdna2"),
    (info("AMD Custom GPU 0405 (RADV VANGOGH)", "radv", 0x1002), "amd-rdna2"),
    (info("AMD Radeon 680M (RADV REMBRANDT)", "radv", 0x1002), "amd-rdna2"),
    (info("AMD Radeon RX 6700 XT", "AMD proprietary driver", 0x1002), "amd-rdna2"),
    (info("gfx1030", "AMD Accelerated Parallel Processing", 0x1002, api="opencl"), "amd-rdna2"),
    # AMD RDNA3 / 3.5
    (info("AMD Radeon RX 7900 XTX (RADV NAVI31)", "radv", 0x1002, device_id=0x744C), "amd-rdna3"),
    (info("AMD Radeon 780M (RADV PHOENIX)", "radv", 0x1002), "amd-rdna3"),
    (info("AMD Radeon 890M (RADV GFX1150)", "radv", 0x1002), "amd-rdna3"),
    (info("AMD Radeon RX 7600", "AMD proprietary driver", 0x1002), "amd-rdna3"),
    (info("gfx1100", "AMD Accelerated Parallel Processing", 0x1002, api="opencl"), "amd-rdna3"),
    # AMD outside RDNA2/3: Polaris "RX 640" must not read as "RX 64xx", RDNA1 and GCN FirePro stay generic
    (info("AMD Radeon RX 640", "AMD proprietary driver", 0x1002), "generic"),
    (info("AMD Radeon RX 5700 XT (RADV NAVI10)", "radv", 0x1002), "generic"),
    (info("AMD FirePro W7100", "AMD proprietary driver", 0x1002), "generic"),
    # Arm Mali Valhall: Arm driver names, panvk, OpenCL (per-GPU vendor id, matched by platform name)
    (info("Mali-G710", "Mali-G710", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G715-Immortalis MC11", "Mali-G715-Immortalis MC11", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G78 MC14", "Mali-G78 MC14", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G57 MC2", "Mali-G57 MC2", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G310", "Mali-G310", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G510 MC2", "Mali-G510 MC2", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G610 (Panfrost)", "panvk", 0x13B5), "arm-mali-valhall"),
    (info("Mali-G78", "ARM Platform", 0x92020010, api="opencl"), "arm-mali-valhall"),
    # Arm Mali Bifrost
    (info("Mali-G76", "Mali-G76", 0x13B5), "arm-mali-bifrost"),
    (info("Mali-G76 MC4", "Mali-G76 MC4", 0x13B5), "arm-mali-bifrost"),
    (info("Mali-G52 MC2", "Mali-G52 MC2", 0x13B5), "arm-mali-bifrost"),
    (info("Mali-G71", "Mali-G71", 0x13B5), "arm-mali-bifrost"),
    (info("Mali-G31", "Mali-G31", 0x13B5), "arm-mali-bifrost"),
    (info("Mali-G52", "ARM Platform", 0x72120000, api="opencl"), "arm-mali-bifrost"),
    (info("Mali-T860", "Mali-T860", 0x13B5), "generic"),  # Midgard: no profile
    # Qualcomm Adreno 6xx: proprietary Vulkan, Turnip, OpenCL with the model, rusticl, the a6xx-class A702 and 7c
    (info("Adreno (TM) 640", QCOM_VK, 0x5143, device_id=0x6040001), "qualcomm-adreno-6xx"),
    (info("Adreno (TM) 610", QCOM_VK, 0x5143), "qualcomm-adreno-6xx"),
    (info("Turnip Adreno (TM) 650", "turnip Mesa driver", 0x5143), "qualcomm-adreno-6xx"),
    (info("QUALCOMM Adreno(TM) 643", "QUALCOMM Snapdragon(TM)", 0x5143, api="opencl"), "qualcomm-adreno-6xx"),
    (info("FD630", "rusticl", 0x5143, api="opencl"), "qualcomm-adreno-6xx"),
    (info("Adreno (TM) 702", QCOM_VK, 0x5143), "qualcomm-adreno-6xx"),
    (info("Adreno 7c+ Gen 3", "turnip Mesa driver", 0x5143), "qualcomm-adreno-6xx"),
    # Qualcomm Adreno 7xx and Snapdragon X
    (info("Adreno (TM) 740", QCOM_VK, 0x5143, device_id=0x43050A01), "qualcomm-adreno-7xx"),
    (info("Turnip Adreno (TM) 750", "turnip Mesa driver", 0x5143), "qualcomm-adreno-7xx"),
    (info("QUALCOMM Adreno(TM) 740", "QUALCOMM Snapdragon(TM)", 0x5143, api="opencl"), "qualcomm-adreno-7xx"),
    (info("Qualcomm(R) Adreno(TM) X1-85 GPU", "Qualcomm Technologies Inc. Adreno Vulkan Driver", 0x5143),
     "qualcomm-adreno-7xx"),
    (info("Adreno X1-85", "turnip Mesa driver", 0x5143), "qualcomm-adreno-7xx"),
    # Qualcomm devices the name cannot place: bare OpenCL name, Adreno 8xx
    (info("QUALCOMM Adreno(TM)", "QUALCOMM Snapdragon(TM)", 0x5143, api="opencl"), "generic"),
    (info("Adreno (TM) 830", QCOM_VK, 0x5143), "generic"),
    # Intel Xe-LP: Windows, ANV (codename suffix), NEO (marketing, PCI-id and codename names)
    (info("Intel(R) Iris(R) Xe Graphics", "Intel Corporation", 0x8086, device_id=0x9A49, device_type="integrated-gpu"),
     "intel-xe"),
    (info("Intel(R) Xe Graphics (TGL GT2)", "Intel open-source Mesa driver", 0x8086, device_id=0x9A49), "intel-xe"),
    (info("Intel(R) UHD Graphics 770 (ADL-S GT1)", "Intel open-source Mesa driver", 0x8086), "intel-xe"),
    (info("Intel(R) UHD Graphics 770", "Intel Corporation", 0x8086), "intel-xe"),
    (info("Intel(R) Iris(R) Xe Graphics", "Intel(R) OpenCL Graphics", 0x8086, api="opencl"), "intel-xe"),
    (info("Intel(R) Graphics [0x46a6]", "Intel(R) OpenCL HD Graphics", 0x8086, api="opencl"), "intel-xe"),
    (info("Intel(R) RaptorLake-S Mobile Graphics Controller", "Intel(R) OpenCL Graphics", 0x8086, api="opencl"),
     "intel-xe"),
    # Intel outside Xe-LP: Gen9 UHD 630 and Arc stay generic
    (info("Intel(R) UHD Graphics 630 (CFL GT2)", "Intel open-source Mesa driver", 0x8086), "generic"),
    (info("Intel(R) Arc(TM) A770 Graphics (DG2)", "Intel open-source Mesa driver", 0x8086), "generic"),
    # NVIDIA (Vulkan and OpenCL), the CPU drivers, unknown hardware
    (info("NVIDIA H200", "NVIDIA", 0x10DE, device_id=0x2335), "nvidia"),
    (info("NVIDIA GeForce RTX 3090", "NVIDIA", 0x10DE), "nvidia"),
    (info("NVIDIA H200", "NVIDIA CUDA", 0x10DE, api="opencl"), "nvidia"),
    (info("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe", 0x10005, device_type="cpu"), "lavapipe"),
    (info("pthread-skylake-avx512-AMD EPYC", "Portable Computing Language", 0x8086, api="opencl", device_type="cpu"),
     "pocl"),
    # PoCL names the CPU; a CPU whose name mentions its iGPU must still be PoCL
    (info("pthread-AMD Ryzen 7 7840HS w/ Radeon 780M Graphics", "Portable Computing Language", 0x1022,
          api="opencl", device_type="cpu"), "pocl"),
    (info("cpu-haswell-12th Gen Intel(R) Core(TM) i7-1260P", "Portable Computing Language", 0x8086, api="opencl",
          device_type="cpu"), "pocl"),
    # PCI device ids place parts whose names cannot: Windows' "AMD Radeon(TM) Graphics" iGPUs, NEO's
    # "Intel(R) Graphics"; an id outside every list (Renoir's Vega, Meteor Lake's Arc) stays generic, an id no
    # list knows yet still matches by name, and an id counts only with its profile's vendor id
    (info("AMD Radeon(TM) Graphics", "AMD proprietary driver", 0x1002, device_id=0x164E), "amd-rdna2"),
    (info("AMD Radeon(TM) Graphics", "AMD proprietary driver", 0x1002, device_id=0x15BF), "amd-rdna3"),
    (info("AMD Radeon(TM) Graphics", "AMD Accelerated Parallel Processing", 0x1002, api="opencl",
          device_id=0x150E), "amd-rdna3"),
    (info("AMD Radeon(TM) Graphics", "AMD proprietary driver", 0x1002, device_id=0x1636), "generic"),
    (info("AMD Radeon RX 7900 XTX (RADV NAVI31)", "radv", 0x1002, device_id=0x7FFF), "amd-rdna3"),
    (info("Intel(R) Graphics", "Intel Corporation", 0x8086, device_id=0xA7A0), "intel-xe"),
    (info("Intel(R) Graphics", "Intel(R) OpenCL Graphics", 0x8086, api="opencl", device_id=0x46D1), "intel-xe"),
    (info("Intel(R) Arc(TM) Graphics", "Intel(R) OpenCL Graphics", 0x8086, api="opencl", device_id=0x7D55),
     "generic"),
    (info("Intel(R) Graphics", "Intel(R) OpenCL Graphics", 0x1234, api="opencl", device_id=0x46D1), "generic"),
    (info("PowerVR B-Series BXM-8-256", "PowerVR B-Series Vulkan Driver", 0x1010), "generic"),
    (info("Some Future GPU", "mystery", 0xABCD), "generic"),
    (info("Some Future GPU", "mystery", 0xABCD, api="opencl"), "generic"),
]


@pytest.mark.parametrize("dev,expected", CASES, ids=[f"{c[0].api}:{c[0].name}" for c in CASES])
def test_match(dev, expected):
    assert profiles.match(dev)["name"] == expected


def test_every_family_is_reachable_on_both_apis():
    """Each GPU-family profile is matched by some realistic Vulkan and some realistic OpenCL device above."""
    seen = {(d.api, want) for d, want in CASES}
    for name in FAMILIES:
        assert ("vulkan", name) in seen and ("opencl", name) in seen, name


def test_device_name_needs_vendor_or_driver():
    """device_name alone never matches: a Mali name on a non-Arm vendor and driver stays generic."""
    assert profiles.match(info("Mali-G710", "mystery", 0xABCD))["name"] == "generic"


def test_device_ids_name_one_profile_each():
    """Every listed PCI id is an integer in one profile only, and a device reporting it (whatever its name) gets
    that profile."""
    owner = {}
    for name, prof in profiles.all_profiles().items():
        m = prof.get("match", {})
        ids = m.get("device_id", [])
        if not ids:
            continue
        assert "vendor_id" in m, f"{name}: device ids without a vendor id"
        vendor = m["vendor_id"][0] if isinstance(m["vendor_id"], list) else m["vendor_id"]
        for i in ids:
            assert isinstance(i, int) and 0 < i <= 0xFFFF, f"{name}: device id {i!r} is not a 16-bit PCI id"
            assert owner.setdefault(i, name) == name, f"{i:#06x} is in {owner[i]} and {name}"
            for api in m["api"]:
                dev = info("Unnamed GPU", "unknown driver", vendor, api=api, device_id=i)
                assert profiles.match(dev)["name"] == name, f"{name}: {api} device {i:#06x}"
    assert {owner[i] for i in owner} == {"amd-rdna2", "amd-rdna3", "intel-xe"}


def test_live_devices_keep_their_profiles():
    """The CPU drivers on this host (lavapipe, PoCL) are matched as before."""
    from portable.devices import devices

    found, _ = devices()
    for d in found:
        if "llvmpipe" in d.info.driver.lower():
            assert d.profile == "lavapipe"
        if "portable computing language" in d.info.driver.lower():
            assert d.profile == "pocl"


def test_profiles_ship_in_the_wheel(tmp_path):
    """A runtime-only install (`pip install portable`) carries every profile: they are package data."""
    repo = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ and *.egg-info there
    shutil.copytree(repo / "portable", src / "portable", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, src / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                           str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "No module named pip" in done.stderr:
        pytest.skip("this interpreter has no pip to build the wheel with")
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("portable-*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("portable/device_profiles/")}
    want = {f"portable/device_profiles/{p.name}" for p in profiles.PROFILE_DIR.glob("*.toml")}
    assert want and want <= shipped, sorted(want - shipped)
