"""Buffer access paths of a Vulkan CPU driver, measured on c = a + b (float32): is a storage buffer the fastest way
for llvmpipe (lavapipe) to stream?

    python benchmarks/texel_probe.py [--n 4194304] [--device vulkan:0]   # needs glslangValidator (glslang-tools)

llvmpipe runs each storage-buffer access as a loop over the SIMD lanes, one bounds-checked element per vector
component; texel buffers go through its image path instead. Each variant is a hand-written GLSL kernel compiled
here with glslangValidator and run through portable's Vulkan device (buffers, submission) with descriptors of its
own; 20 dispatches with a barrier between each, in one command buffer, after a warm-up; the median of 7 such
submissions per dispatch. Every variant's output is checked against numpy. An investigation tool, not part of
the compiler: what it found made lavapipe's profile read buffers through texel buffers (codegen_spirv/texel_reads.py).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

HEAD = "#version 450\n#extension GL_ARB_gpu_shader_int64 : require\nlayout(local_size_x = {wg}) in;\n"
# name -> (descriptor kinds of a, b, c; floats per invocation; body)
VARIANTS = {
    "ssbo_vec4": (("ssbo", "ssbo", "ssbo"), 4, """
layout(std430, binding = 0) readonly buffer A { vec4 a[]; };
layout(std430, binding = 1) readonly buffer B { vec4 b[]; };
layout(std430, binding = 2) writeonly buffer C { vec4 c[]; };
void main() { uint i = gl_GlobalInvocationID.x; c[i] = a[i] + b[i]; }
"""),
    "ssbo_u64vec4": (("ssbo", "ssbo", "ssbo"), 8, """
layout(std430, binding = 0) readonly buffer A { u64vec4 a[]; };
layout(std430, binding = 1) readonly buffer B { u64vec4 b[]; };
layout(std430, binding = 2) writeonly buffer C { u64vec4 c[]; };
uint64_t add2(uint64_t x, uint64_t y) {
  vec2 s = uintBitsToFloat(unpackUint2x32(x)) + uintBitsToFloat(unpackUint2x32(y));
  return packUint2x32(floatBitsToUint(s));
}
void main() {
  uint i = gl_GlobalInvocationID.x; u64vec4 x = a[i], y = b[i];
  c[i] = u64vec4(add2(x.x, y.x), add2(x.y, y.y), add2(x.z, y.z), add2(x.w, y.w));
}
"""),
    "image_rgba32f": (("image", "image", "image"), 4, """
layout(rgba32f, binding = 0) readonly uniform imageBuffer a;
layout(rgba32f, binding = 1) readonly uniform imageBuffer b;
layout(rgba32f, binding = 2) writeonly uniform imageBuffer c;
void main() { int i = int(gl_GlobalInvocationID.x); imageStore(c, i, imageLoad(a, i) + imageLoad(b, i)); }
"""),
    "texel_fetch_ssbo_store": (("sampler", "sampler", "ssbo"), 4, """
layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 2) writeonly buffer C { vec4 c[]; };
void main() { int i = int(gl_GlobalInvocationID.x); c[i] = texelFetch(a, i) + texelFetch(b, i); }
"""),
    "texel_fetch_u64vec4_store": (("sampler", "sampler", "ssbo"), 8, """
layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 2) writeonly buffer C { u64vec4 c[]; };
uint64_t pack(vec2 v) { return packUint2x32(floatBitsToUint(v)); }
void main() {
  int i = int(gl_GlobalInvocationID.x);
  vec4 lo = texelFetch(a, 2 * i) + texelFetch(b, 2 * i), hi = texelFetch(a, 2 * i + 1) + texelFetch(b, 2 * i + 1);
  c[i] = u64vec4(pack(lo.xy), pack(lo.zw), pack(hi.xy), pack(hi.zw));
}
"""),
    "texel_fetch_image_store": (("sampler", "sampler", "image"), 4, """
layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(rgba32f, binding = 2) writeonly uniform imageBuffer c;
void main() { int i = int(gl_GlobalInvocationID.x); imageStore(c, i, texelFetch(a, i) + texelFetch(b, i)); }
"""),
}


def _spirv(source: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.comp", Path(d) / "k.spv"
        src.write_text(source)
        subprocess.run(["glslangValidator", "-V", "--target-env", "vulkan1.1", str(src), "-o", str(out)],
                       check=True, capture_output=True)
        return out.read_bytes()


def main() -> None:
    from portable.devices import open_device
    from portable.runtime_vk._vk import vk
    from portable.runtime_vk.buffers import _create, _destroy

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4 << 20, help="floats per buffer")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--wg", type=int, default=64)
    a = ap.parse_args()
    live = open_device(a.device)
    dev = live.backend._device()
    h = dev.handle
    n, nbytes = a.n, a.n * 4
    usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT
             | vk.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
             | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(n).astype(np.float32) for _ in range(2)] + [np.zeros(n, np.float32)]
    bufs = [_create(dev, nbytes, usage, host, 0, f"probe {i}") for i in range(3)]

    def write(i, arr):
        p = vk.vkMapMemory(h, bufs[i][1], 0, nbytes, 0)
        np.frombuffer(p, np.float32, n)[:] = arr
        vk.vkUnmapMemory(h, bufs[i][1])

    def read(i):
        p = vk.vkMapMemory(h, bufs[i][1], 0, nbytes, 0)
        out = np.frombuffer(p, np.float32, n).copy()
        vk.vkUnmapMemory(h, bufs[i][1])
        return out

    for i in range(2):
        write(i, data[i])
    views = [vk.vkCreateBufferView(h, vk.VkBufferViewCreateInfo(
        buffer=b, format=vk.VK_FORMAT_R32G32B32A32_SFLOAT, offset=0, range=nbytes), None) for b, _ in bufs]
    kinds = {"ssbo": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "image": vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER,
             "sampler": vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER}
    pool = vk.vkCreateDescriptorPool(h, vk.VkDescriptorPoolCreateInfo(maxSets=len(VARIANTS), poolSizeCount=3,
        pPoolSizes=[vk.VkDescriptorPoolSize(type=t, descriptorCount=3 * len(VARIANTS)) for t in kinds.values()]),
        None)
    cmd_pool = vk.vkCreateCommandPool(h, vk.VkCommandPoolCreateInfo(queueFamilyIndex=dev.family), None)
    print(f"{live.info.name}: c = a + b over {n} float32, workgroups of {a.wg}, per dispatch (20 with barriers)")
    for name, (roles, per, body) in VARIANTS.items():
        try:
            code = _spirv(HEAD.format(wg=a.wg) + body)
        except subprocess.CalledProcessError as e:
            print(f"  {name:26s} glslang failed: {e.stdout.decode()[-300:]}")
            continue
        layout = vk.vkCreateDescriptorSetLayout(h, vk.VkDescriptorSetLayoutCreateInfo(bindingCount=3, pBindings=[
            vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=kinds[r], descriptorCount=1,
                                            stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT) for i, r in enumerate(roles)]),
            None)
        playout = vk.vkCreatePipelineLayout(h, vk.VkPipelineLayoutCreateInfo(setLayoutCount=1, pSetLayouts=[layout]),
                                            None)
        module = vk.vkCreateShaderModule(h, vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None)
        # The stage struct is kept in a variable: built inline, its cffi strings can be freed before the call.
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main")
        info = vk.VkComputePipelineCreateInfo(stage=stage, layout=playout)
        try:
            pipe = vk.vkCreateComputePipelines(h, None, 1, [info], None)[0]
        except vk.VkError as e:
            print(f"  {name:26s} pipeline not created: {type(e).__name__}")
            continue
        dset = vk.vkAllocateDescriptorSets(h, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=pool, descriptorSetCount=1, pSetLayouts=[layout]))[0]
        writes = []
        for i, r in enumerate(roles):
            if r == "ssbo":
                writes.append(vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=i, descriptorCount=1,
                              descriptorType=kinds[r], pBufferInfo=[vk.VkDescriptorBufferInfo(
                                  buffer=bufs[i][0], offset=0, range=nbytes)]))
            else:
                writes.append(vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=i, descriptorCount=1,
                              descriptorType=kinds[r], pTexelBufferView=[views[i]]))
        vk.vkUpdateDescriptorSets(h, len(writes), writes, 0, None)
        groups = n // per // a.wg
        cb = vk.vkAllocateCommandBuffers(h, vk.VkCommandBufferAllocateInfo(
            commandPool=cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cb, vk.VkCommandBufferBeginInfo())
        vk.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
        vk.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, playout, 0, 1, [dset], 0, None)
        barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                     dstAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_SHADER_READ_BIT)
        for _ in range(20):
            vk.vkCmdDispatch(cb, groups, 1, 1)
            vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                    vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, [barrier], 0, None, 0, None)
        vk.vkEndCommandBuffer(cb)
        fence = vk.vkCreateFence(h, vk.VkFenceCreateInfo(), None)
        times = []
        write(2, data[2])
        for rep in range(8):
            t = time.perf_counter()
            vk.vkQueueSubmit(dev.queue, 1, [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cb])], fence)
            vk.vkWaitForFences(h, 1, [fence], vk.VK_TRUE, 10 ** 11)
            vk.vkResetFences(h, 1, [fence])
            if rep:  # the first is the warm-up
                times.append((time.perf_counter() - t) * 1e3 / 20)
        ok = np.allclose(read(2), data[0] + data[1])
        print(f"  {name:26s} {statistics.median(times):8.3f} ms (min {min(times):.3f}) "
              f"{'ok' if ok else 'WRONG'}")
        for obj, fn in ((fence, vk.vkDestroyFence), (pipe, vk.vkDestroyPipeline), (module, vk.vkDestroyShaderModule),
                        (playout, vk.vkDestroyPipelineLayout), (layout, vk.vkDestroyDescriptorSetLayout)):
            fn(h, obj, None)
    vk.vkDestroyCommandPool(h, cmd_pool, None)
    vk.vkDestroyDescriptorPool(h, pool, None)
    for v in views:
        vk.vkDestroyBufferView(h, v, None)
    for b, m in bufs:
        _destroy(dev, b, m)


if __name__ == "__main__":
    main()
