#!/usr/bin/env bash
# Installs what trainrun needs from Debian 12's apt (only what is missing),
# and prints what it installs. Safe to run again.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap         # the build (Bazel 4.2.3)
  g++
  libopenblas-dev         # CPU GEMM
  libsleef-dev            # vectorized exp/log/tanh/erf
  libdnnl-dev             # oneDNN: float32 convolutions
  libfmt-dev
  nlohmann-json3-dev      # safetensors headers
  libdlpack-dev           # DLPack C ABI structs
  libuv1-dev              # the TCPStore server's event loop
  libgloo-dev             # c10d: the CPU collectives
  zlib1g-dev              # reading the digits data set (gzip)
  python3-sklearn         # ships the 8x8 digits data set the main job trains on
  libssl-dev              # HMAC-SHA256 for store authentication
  libcli11-dev            # the trainrun command line
  clang-14                # the store parser's fuzz test (libFuzzer)
  libclang-rt-14-dev
  iproute2                # tests: a private network namespace for the peer's wildcard-bound store
  libgtest-dev
  python3-pytest
  python3-numpy
  python3-dev             # headers for the trainrun._C extension
  pybind11-dev            # the Python bindings (python/csrc)
  python3-torch           # the peer: numerical oracle and benchmark baseline
  protobuf-compiler       # proto/: the checkpoint metadata schema
  libprotobuf-dev
  python3-protobuf
  python3-yaml            # the op list (tensor/ops.yaml) is read by its generator at build time
  libgrpc++-dev           # the launcher agent's gRPC service (health, status)
  protobuf-compiler-grpc  # grpc_cpp_plugin for proto/agent.proto
  python3-grpcio          # the agent service's tests talk to it from Python
  libcpp-httplib-dev      # the agent's /metrics page (--metrics-port)
  python3-prometheus-client  # the metrics tests parse the page with it
  prometheus              # promtool: the metrics tests check the page with it
  python3-matplotlib      # the main job's loss curve (examples/train_lm.py)
  python3-jsonschema      # deploy/validate.py checks custom resources against their CRDs
)

# deploy/validate.py checks core Kubernetes objects with npm's kubernetes-models
# (deploy/package.json, pinned by its lock file). Without node or the
# registry, the deploy tests skip and say why; nothing else needs it.
install_npm_packages() {
  local deploy
  deploy="$(cd "$(dirname "$0")/.." && pwd)/deploy"
  [ -d "$deploy/node_modules/kubernetes-models" ] && return 0
  command -v npm >/dev/null || { echo "setup: npm not found: the deploy schema checks will skip"; return 0; }
  if (cd "$deploy" && npm ci --no-audit --no-fund >/tmp/trainrun-npm.log 2>&1); then
    echo "setup: installed deploy/node_modules (kubernetes-models)"
  else
    echo "setup: npm ci failed (log: /tmp/trainrun-npm.log): the deploy schema checks will skip"
  fi
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  install_npm_packages
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/trainrun-apt.log 2>&1; then
  echo "setup: apt-get install failed; refreshing package lists and retrying"
  $SUDO apt-get update >>/tmp/trainrun-apt.log 2>&1
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/trainrun-apt.log 2>&1 || {
    tail -20 /tmp/trainrun-apt.log
    echo "setup: could not install ${missing[*]} (log: /tmp/trainrun-apt.log)" >&2
    exit 1
  }
fi
echo "setup: installed ${missing[*]}"
install_npm_packages
