# Sourced by scripts/gpu-check.sh and scripts/gpu-lease.sh: makes CUDA's NVRTC and cuBLAS
# loadable by the names the CUDA backend asks for.
#
# The backend's cudarc bindings are CUDA 12.8's and dlopen `libnvrtc.so.12`, `libcublas.so.12`
# and `libcublasLt.so.12`. A machine with only CUDA 13 (a 13.x toolkit, or the `nvidia/cu13`
# wheels that PyTorch's CUDA 13 builds install) has the same C APIs under `.so.13` names. This
# links whichever version is found under the `.so.12` names in one folder and puts that folder
# first on LD_LIBRARY_PATH (and in TESSERA_NVRTC / TESSERA_CUBLAS).
#
# usage: cuda_libs_link DIR   (DIR: the folder that gets the links)

cuda_libs_link() {
  local dir=$1 site
  mkdir -p "$dir"
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
  for s in $site; do roots+=("$s/nvidia/cuda_nvrtc/lib" "$s/nvidia/cublas/lib" "$s/nvidia/cu13/lib"); done
  local lib found v
  for lib in libnvrtc libcublas libcublasLt; do
    found=
    for v in 12 13; do
      for r in "${roots[@]}"; do
        [ -f "$r/$lib.so.$v" ] && { found=$r/$lib.so.$v; break 2; }
      done
    done
    if [ -z "$found" ]; then
      echo "cuda-libs: no $lib.so.12 or .so.13 found in ${roots[*]}" >&2
      continue
    fi
    ln -sfn "$found" "$dir/$lib.so.12"
    # NVRTC loads its builtins library from its own folder by name.
    if [ "$lib" = libnvrtc ]; then
      for b in "$(dirname "$found")"/libnvrtc-builtins*.so*; do
        [ -f "$b" ] && ln -sfn "$b" "$dir/"
      done
    fi
    echo "cuda-libs: $lib.so.12 -> $found" >&2
  done
  export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TESSERA_NVRTC=$dir TESSERA_CUBLAS=$dir
}
