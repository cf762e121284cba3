# GPU host side of benchmarks/h200_models.py and benchmarks/h200_llm.py, run from the repository root there with
# .gl (Vulkan/OpenCL loader and GLVND .debs), .whl (vulkan, cffi, pycparser, pyopencl, pytools, platformdirs,
# siphash24 wheels for Python 3.12) and .h200w carried. .h200w holds code/ (portable/ and benchmarks/ of the
# tree to measure), m/ (the export folder of h200_models.py less its .ptpk and .onnx files) and l/ (h200_llm.py's,
# less llm.onnx and the .ptpk) and, for VAR=1, v/ (a benchmarks/variants_gpu.py make folder), for AV=1 av/. Switches: CV=1 (whole models; MODELS, ITERS, CV_S), LLM=1 (decode; NEW, LLM_S),
# LPROF="l" (portable profile of decode steps), PROF="bert_base-b8 resnet50-b8" (portable profile of those restored packages until DEADLINE s). Everything lands in
# $OUT/r and $OUT/r.tgz. `python3 -P` keeps the checkout sent with the call off sys.path: .h200w/code is measured.
#   CV=1 LLM=1 PROF="bert_base-b8 resnet50-b8" bash .h200w/h200_run.sh
cd "$(dirname "$0")/.."  # the repository root: the script travels as .h200w/h200_run.sh
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
W=$PWD/.h200w
export PYTHONPATH=$W/code:/tmp/site PYTHONUNBUFFERED=1
# The NVIDIA Vulkan ICD manifest: where the device notes put it, else wherever this host's driver install did.
VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e $VK_DRIVER_FILES ] || VK_DRIVER_FILES=$(ls /usr/share/vulkan/icd.d/nvidia*.json /etc/vulkan/icd.d/nvidia*.json \
  /usr/local/nvidia/share/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/nvidia*.json 2>/dev/null | head -1)
export VK_DRIVER_FILES
mkdir -p /tmp/icd; echo /usr/lib/libnvidia-opencl.so > /tmp/icd/nvidia.icd
[ -e /usr/lib/libnvidia-opencl.so ] || echo $(ls /usr/local/nvidia/lib64/libnvidia-opencl.so* | head -1) > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd
R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf r.tgz r); }
trap pack EXIT
{ date -u; echo "VK_DRIVER_FILES=$VK_DRIVER_FILES"; ls /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -P -c "import portable,sys; print(portable.__file__)"; python3 -P -m portable devices; VK_LOADER_DEBUG=error,warn python3 -P -m portable devices 2>&1 | grep -i "loader\|error" | head -12; } 2>&1 | tee $R/env.txt
[ -n "$VAR" ] && timeout ${VAR_S:-120} python3 $W/code/benchmarks/variants_gpu.py run $W/v $R/variants.json ${VAR_DEV:-vulkan:0} 2>&1 | tee $R/variants.log
# AV=1: .h200w/av (scripts/gpu_av.py make) under GPU-assisted validation; needs the vulkan-validationlayers .deb in .gl.
[ -n "$AV" ] && { cat /etc/os-release | head -2; ldd /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so | grep -i "not found"; } 2>&1 | tee $R/av_env.txt
[ -n "$AV" ] && PORTABLE_VK_GPU_AV=1 timeout ${AV_S:-150} python3 $W/code/scripts/gpu_av.py run $W/av --device vulkan:0 --out $R/gpu_av.json 2>&1 | tee $R/gpu_av.log
[ -n "$CV" ] && timeout ${CV_S:-330} python3 $W/code/benchmarks/h200_models.py run $W/m --models ${MODELS:-resnet50,mobilenet_v3_large,bert_base} --iters ${ITERS:-20} --keep --out $R/h200_models.json 2>&1 | tee $R/models.log
# LLM_DIRS="l l2": export folders of two builds, run one after the other in this call (the second without PyTorch).
if [ -n "$LLM" ]; then
  peer=""
  for d in ${LLM_DIRS:-l}; do
    timeout ${LLM_S:-300} python3 $W/code/benchmarks/h200_llm.py run $W/$d --new ${NEW:-64} --out $R/h200_llm-$d.json $peer 2>&1 | tee $R/llm-$d.log
    peer="--no-torch"
  done
fi
# LPROF="l l2": portable profile of those folders' decode steps (restored from their skeletons; source maps from
# `h200_llm.py export --sources`).
if [ -n "$LPROF" ]; then
  for d in $LPROF; do
    python3 -P -c "from portable.bench import weightless; weightless.restore('$W/$d/llm-c256.skel', '/tmp/llm.ptpk')"
    for api in vulkan opencl; do
      timeout 90 python3 -P -m portable profile /tmp/llm.ptpk --device $api:0 --runs 10 --sources $W/$d/llm-c256.$api.sources.json --json $R/llm-$d-$api.profile.json > $R/llm-$d-$api.profile.txt 2>&1
      head -30 $R/llm-$d-$api.profile.txt
    done
    rm -f /tmp/llm.ptpk
  done
fi
for k in $PROF; do for api in vulkan opencl; do
  [ -e $W/m/$k.ptpk ] || continue
  left=$((${DEADLINE:-540} - SECONDS)); [ $left -gt 20 ] || continue
  timeout $(( left < 50 ? left : 50 )) python3 -P -m portable profile $W/m/$k.ptpk --device $api:0 --runs 5 --sources $W/m/$k.$api.sources.json --json $R/$k-$api.profile.json --top 15 2>&1 | tee $R/$k-$api.profile.txt
done; done
true
