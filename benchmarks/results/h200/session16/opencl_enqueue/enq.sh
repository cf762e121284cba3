#!/bin/bash
for f in .dev-gl/*.deb; do dpkg -x $f / ; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-whl-min/*.whl
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/icd && echo /usr/lib/libnvidia-opencl.so > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd PYTHONUNBUFFERED=1
python3 .decR/enq.py 2>&1 | tee $OUT/enq.txt
python3 .decR/enq.py 2>&1 | tee -a $OUT/enq.txt
