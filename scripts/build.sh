#!/usr/bin/env bash
# Configures (once) and builds dflow into ./build with Ninja, ccache and -j2.
set -euo pipefail
cd "$(dirname "$0")/.."
# Paths under the checkout reach ccache relative to it, so a fresh clone or a
# worktree elsewhere reuses the objects an earlier build cached.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C build -j"${DFLOW_JOBS:-2}"
