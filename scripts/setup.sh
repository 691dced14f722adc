#!/usr/bin/env bash
# Installs every Debian package dflow's build, tests and main job need.
# Idempotent: installs only what is missing, and runs `apt-get update` only then.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libopenblas-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  libssl-dev openssl
  clang-14 libclang-rt-14-dev llvm-14  # scripts/sanitize.sh: sanitizers, libFuzzer, symbolizer
  dataset-fashion-mnist
)
# AES-GCM with VAES/AVX-512 for the TLS data plane (packaged for x86-64 only;
# elsewhere OpenSSL's serves).
if [[ $(dpkg --print-architecture) == amd64 ]]; then packages+=(libipsec-mb-dev); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
else
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# TensorFlow's Python client, the reference for the interop tests (they are
# skipped, saying why, where it cannot be installed). DFLOW_NO_TF=1 skips it.
if [[ -z "${DFLOW_NO_TF:-}" ]] && ! python3 -c "import tensorflow" 2>/dev/null; then
  echo "setup: installing tensorflow-cpu with pip (for the interop tests)"
  python3 -m pip install -q --disable-pip-version-check tensorflow-cpu ||
    echo "setup: tensorflow-cpu could not be installed; the interop tests will be skipped"
fi
# cryptography (AES-GCM) for tests/security_test.py's own client of the TLS
# data plane's sealed records.
if ! python3 -c "import cryptography.hazmat.primitives.ciphers.aead" 2>/dev/null; then
  echo "setup: installing cryptography with pip (for tests/security_test.py)"
  python3 -m pip install -q --disable-pip-version-check cryptography ||
    echo "setup: cryptography could not be installed; security_test.py will fail its sealed-records check"
fi
# tf-keras (Keras 2) for the TF1 programs that use tf.compat.v1.layers and rnn_cell,
# at TensorFlow's own minor version.
if [[ -z "${DFLOW_NO_TF:-}" ]] && python3 -c "import tensorflow" 2>/dev/null &&
    ! python3 -c "import tf_keras" 2>/dev/null; then
  tf_minor=$(python3 -c "import tensorflow as tf; print('.'.join(tf.__version__.split('.')[:2]))")
  echo "setup: installing tf-keras ${tf_minor} with pip (for the TF1 program corpus)"
  python3 -m pip install -q --disable-pip-version-check "tf-keras~=${tf_minor}.0" ||
    echo "setup: tf-keras could not be installed; corpus programs that need it will be skipped"
fi
