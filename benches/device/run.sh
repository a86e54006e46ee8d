#!/usr/bin/env bash
# Runs the GPU bench from a bundle made by bundle.sh, on a machine with a GPU and no Rust
# toolchain: `./run.sh [--quick] [OUT_DIR]` from the bundle's directory (or anywhere: it finds
# its own). Writes OUT_DIR/gpu-bench.md and gpu-bench.json (default ./out) and prints the
# table. Needs a Vulkan (or Metal/DX12/GL) loader and driver; the full run is sized for under
# 8 minutes on a datacentre GPU (the 1M-tet body's CPU rows dominate; JELLO_BENCH_CASES and
# JELLO_BENCH_SOLVERS narrow it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
quick=()
if [ "${1:-}" = "--quick" ]; then quick=(--quick); shift; fi
out=${1:-$PWD/out}
export JELLO_MESH_DIR=${JELLO_MESH_DIR:-$here/meshes}
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
mkdir -p "$out"
"$here/gpu_bench" "${quick[@]}" --out "$out"
