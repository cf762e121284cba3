import sys, time, traceback
from portable import profiles
from portable.api import graph_text
from portable.compiler.pipeline import compile_module
models = sys.argv[1:]
profs = profiles.all_profiles()
texts = {m: graph_text(m) for m in models}
for name, p in sorted(profs.items()):
    api_m = p.get("match", {}).get("api", ["vulkan", "opencl"])
    apis = [api_m] if isinstance(api_m, str) else list(api_m)
    for api in apis:
        for m, t in texts.items():
            t0 = time.time()
            try:
                e = compile_module(t, profiles.codegen_options(p), (api,))
                print(f"{name:22s} {api:7s} {m.split('/')[-1]:28s} ok {len(e.dispatches):4d} dispatches {time.time()-t0:5.1f}s", flush=True)
            except Exception as ex:
                print(f"{name:22s} {api:7s} {m.split('/')[-1]:28s} FAIL {type(ex).__name__}: {str(ex).splitlines()[0][:150]}", flush=True)
