#!/usr/bin/env bash
# Sourced by the GPU scripts: sets TG_CMAKE_ARGS and the library path for a machine whose CUDA
# toolkit lacks cuDNN/NCCL (found then in a Python install's nvidia/ folder) or that lacks Debian
# build dependencies (given as a prefix, or as a folder of .deb files unpacked into one).
# Usage: source bench/gpu_env.sh [DEPS]
TG_CMAKE_ARGS=()
tg_deps=${1:-}
if [ -n "$tg_deps" ] && compgen -G "$tg_deps/*.deb" >/dev/null; then
  tg_prefix=/tmp/tg_deps
  for f in "$tg_deps"/*.deb; do dpkg -x "$f" "$tg_prefix"; done
  tg_deps=$tg_prefix/usr
fi
if [ -n "$tg_deps" ]; then
  # Debian's Gloo package names its library by absolute path (/usr/lib/libgloo.so.0.5.0) in its
  # CMake targets: where the machine has none, that path points into the unpacked prefix.
  for f in "$tg_deps"/lib/libgloo.so*; do
    [ -e "$f" ] && [ ! -e "/usr/lib/$(basename "$f")" ] && ln -s "$f" "/usr/lib/$(basename "$f")" 2>/dev/null
  done
  tg_arch_lib=$tg_deps/lib/x86_64-linux-gnu
  TG_CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$tg_deps")
  export CMAKE_LIBRARY_PATH="$tg_arch_lib/openblas-pthread:${CMAKE_LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH="$tg_arch_lib:$tg_arch_lib/openblas-pthread:${LD_LIBRARY_PATH:-}"
fi
if [ ! -f /usr/local/cuda/include/cudnn.h ]; then
  tg_nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia
  if [ -d "$tg_nv/cudnn" ]; then
    TG_CMAKE_ARGS+=(-DCUDNN_ROOT="$tg_nv/cudnn" -DNCCL_ROOT="$tg_nv/nccl")
    export LD_LIBRARY_PATH="$tg_nv/cudnn/lib:$tg_nv/nccl/lib:${LD_LIBRARY_PATH:-}"
  fi
fi
