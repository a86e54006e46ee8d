#!/usr/bin/env bash
# Builds the device bundle of the GPU bench (docs/src/benchmarks/gpu.md): the stripped bench
# binary, the meshes it reads and run.sh, in one directory (default target/gpu-bench-bundle),
# checked to be under 64 MiB. Run from the repository root on a machine with the toolchain.
set -euo pipefail
out=${1:-target/gpu-bench-bundle}
meshes=${JELLO_MESH_DIR:-../shared/meshes}
# Release build of the bench target; cargo prints the executable's path.
exe=$(cargo bench --bench gpu_bench --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*gpu_bench[^"]*\)".*/\1/p' | tail -1)
[ -n "$exe" ] || { echo "bundle.sh: no gpu_bench executable from cargo bench --no-run" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/meshes"
cp "$exe" "$out/gpu_bench"
strip "$out/gpu_bench"
for m in armadillo_18k armadillo_114k; do
  if [ -f "$meshes/$m.node" ]; then
    cp "$meshes/$m.node" "$meshes/$m.ele" "$out/meshes/"
  else
    echo "bundle.sh: $meshes/$m.node absent; the bench will skip $m" >&2
  fi
done
cp benches/device/run.sh "$out/run.sh"
size=$(du -sm "$out" | cut -f1)
echo "bundle: $out ($size MiB)"
[ "$size" -lt 64 ] || { echo "bundle.sh: $size MiB is over the 64 MiB budget" >&2; exit 1; }
