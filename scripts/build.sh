#!/usr/bin/env bash
# Configures (once) and builds dflow into ./build with Ninja, ccache and -j2.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C build -j"${DFLOW_JOBS:-2}"
