"""Variants of exported softmax/layernorm kernels with streaming cache hints on the row's loads/stores."""
import dataclasses, json, re, shutil, subprocess, sys, tempfile
from pathlib import Path
from portable.executable import Executable
src, dst = Path(sys.argv[1]), Path(sys.argv[2])

def spv_variant(spirv: bytes, loads: bool, stores: bool) -> bytes:
    d = Path(tempfile.mkdtemp())
    (d / "k.spv").write_bytes(spirv)
    text = subprocess.run(["spirv-dis", "--raw-id", str(d / "k.spv")], capture_output=True, text=True, check=True).stdout
    # pointers into the row buffers (bindings 0 = x, 1 = out): access chains based on those variables
    var = {}
    for m in re.finditer(r"OpDecorate (%\w+) Binding (\d+)", text):
        var[m.group(1)] = int(m.group(2))
    ptrs = set()
    for m in re.finditer(r"(%\w+) = OpAccessChain %\w+ (%\w+)", text):
        if var.get(m.group(2)) in (0, 1):
            ptrs.add((m.group(1), var[m.group(2)]))
    pl = {p for p, b in ptrs if b == 0}; ps = {p for p, b in ptrs if b == 1}
    out, nl, ns = [], 0, 0
    for line in text.splitlines():
        m = re.match(r"\s*%\w+ = OpLoad %\w+ (%\w+)$", line)
        if loads and m and m.group(1) in pl:
            line += " Nontemporal"; nl += 1
        m = re.match(r"\s*OpStore (%\w+) %\w+$", line)
        if stores and m and m.group(1) in ps:
            line += " Nontemporal"; ns += 1
        out.append(line)
    (d / "k.s").write_text("\n".join(out) + "\n")
    subprocess.run(["spirv-as", "--target-env", "vulkan1.2", str(d / "k.s"), "-o", str(d / "o.spv")], check=True)
    subprocess.run(["spirv-val", "--target-env", "vulkan1.2", str(d / "o.spv")], check=True)
    print("  spirv", nl, "loads", ns, "stores")
    return (d / "o.spv").read_bytes()

LD = {"cs": "ld.global.cs.v4.f32", "na": "ld.global.L1::no_allocate.v4.f32", "lu": "ld.global.lu.v4.f32"}
def cl_variant(code: str, load: str | None, store: bool) -> str:
    helpers = ""
    if load:
        helpers += ('float4 pt_ldx(__global const float* p) {\n    float4 v;\n'
                    f'    asm("{LD[load]} {{%0, %1, %2, %3}}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"((ulong)p));\n'
                    '    return v;\n}\n')
        code, n = re.subn(r"\(\*\(__global const float4\*\)\((a0 \+ [^)]*)\)\)", r"pt_ldx(\1)", code)
        print("  cl loads", n)
    if store:
        helpers += ('void pt_sty(__global float* p, float4 v) {\n'
                    '    asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"((ulong)p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");\n}\n')
        code, n = re.subn(r"\*\(__global float4\*\)\((a1 \+ [^)]*)\) = (v\d+);", r"pt_sty(\1, \2);", code)
        print("  cl stores", n)
    i = code.index("__kernel")
    return code[:i] + helpers + "\n" + code[i:]

VARIANTS = {"v0_base": (False, False, None, False), "v1_ld": (True, False, "cs", False),
            "v2_st": (False, True, None, True), "v3_both": (True, True, "cs", True), "v4_na": (False, False, "na", False),
            "v5_lu": (False, False, "lu", False)}
for name, (sl, ss, cl_ld, cl_st) in VARIANTS.items():
    out = dst / name
    shutil.rmtree(out, ignore_errors=True); (out / "portable").mkdir(parents=True)
    man = json.loads((src / "manifest.json").read_text())
    for w in man["workloads"].values():
        w.pop("iree", None)
    (out / "manifest.json").write_text(json.dumps(man))
    for p in (src / "portable").glob("*.ptx"):
        exe = Executable.load(p)
        print(name, p.name)
        ks = []
        for k in exe.kernels:
            if k.spirv is not None and (sl or ss):
                k = dataclasses.replace(k, spirv=spv_variant(k.spirv, sl, ss))
            if k.opencl is not None and (cl_ld or cl_st):
                k = dataclasses.replace(k, opencl=cl_variant(k.opencl, cl_ld, cl_st))
            ks.append(k)
        dataclasses.replace(exe, kernels=ks).save(out / "portable" / p.name)
