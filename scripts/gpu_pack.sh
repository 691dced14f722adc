#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs (the CLI, the GPU tests and bench, and
# the non-system libraries they load, CUDA's aside) into one archive, for a
# GPU machine that has CUDA, cuBLAS and cuDNN but not dflow's build
# dependencies (protobuf, gRPC, Abseil, OpenBLAS):
#   scripts/build.sh && scripts/gpu_pack.sh .devpack
#   (there)  scripts/gpu_check.sh --prebuilt .devpack
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-.devpack}"
rm -rf "$dest" && mkdir -p "$dest/stage/bin" "$dest/stage/lib"
bins=(build/bin/dflow build/gpu_tests build/bench/gpu_bench build/bench/cnn_direct_bench)
for b in "${bins[@]}"; do
  [[ -x "$b" ]] || { echo "gpu_pack: $b is not built (scripts/build.sh)" >&2; exit 1; }
  cp "$b" "$dest/stage/bin/"
done
# Libraries from the build machine's system, except the C runtime (the
# target's newer one serves) and CUDA's own (the target's driver and toolkit).
ldd "${bins[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -vE 'libcu(da|blas|blasLt|dnn|dart)[^/]*\.so' |
  while read -r lib; do cp -L "$lib" "$dest/stage/lib/"; done
# Fashion-MNIST, so the GPU run trains on the same data as here.
if [[ -d /usr/share/datasets/fashion-mnist ]]; then
  mkdir -p "$dest/stage/data" && cp /usr/share/datasets/fashion-mnist/* "$dest/stage/data/"
fi
tar -C "$dest/stage" -cf - . | xz -T2 -6 > "$dest/pack.tar.xz"
rm -rf "$dest/stage"
ls -la "$dest"
