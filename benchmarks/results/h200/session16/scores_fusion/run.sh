#!/bin/bash
# usage: run.sh PKG TAG [torch]
P=$1; T=$2
for f in .dev-gl/*.deb; do dpkg -x $f / ; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-whl-min/*.whl
export PYTHONPATH=/tmp/site:$PWD VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/icd && echo /usr/lib/libnvidia-opencl.so > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
if [ "$3" = torch ]; then
  python3 -m models.generate --model $P --device vulkan:0 --new 200 --no-reference --torch small --json $OUT/${T}_vulkan_torch.json 2>&1 | grep -E "tokens/s"
fi
python3 benchmarks/gpu_time_probe.py $P --device vulkan:0 --out $OUT/${T}_probe_vulkan.json > $OUT/${T}_probe_vulkan.log 2>&1 || echo probe failed
for i in 1 2 3; do
  python3 -m models.generate --model $P --device vulkan:0 --new 200 --no-reference --json $OUT/${T}_vulkan_$i.json 2>&1 | grep tokens/s
done
for i in 1 2; do
  python3 -m models.generate --model $P --device opencl:0 --new 200 --no-reference --json $OUT/${T}_opencl_$i.json 2>&1 | grep tokens/s
done
