#!/usr/bin/env bash
# Runs the GPU bench from a bundle made by bundle.sh, on a machine with a GPU and no Rust
# toolchain: `./run.sh [--quick|--whole] [OUT_DIR]` from the bundle's directory (or anywhere:
# it finds its own). Needs a Vulkan (or Metal/DX12/GL) loader and driver.
#
# Default: the bench in parts, most wanted first, each under its own time limit so the whole
# run stays under 8 minutes and every finished part is kept (a GPU lease can end mid-run):
# OUT_DIR/<part>/gpu-bench.{md,json}, all tables in OUT_DIR/gpu-bench.md, the log (each row as
# it finishes, the subspace build's time) in OUT_DIR/log.txt. Part limits are from the first
# H200 run (2026-11-30); JELLO_PART_SCALE multiplies them (e.g. 2 on a slower GPU).
# --whole: one run of every case and solver (longer than 8 minutes on an H200: the 1M-tet
# box's CPU rows and subspace precompute). --quick: the CI case.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=parts
case "${1:-}" in
  --quick) mode=quick; shift ;;
  --whole) mode=whole; shift ;;
esac
out=${1:-$PWD/out}
export JELLO_MESH_DIR=${JELLO_MESH_DIR:-$here/meshes}
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
mkdir -p "$out"
case $mode in
  quick) exec "$here/gpu_bench" --quick --out "$out" ;;
  whole) exec "$here/gpu_bench" --out "$out" ;;
esac
scale=${JELLO_PART_SCALE:-1}
log=$out/log.txt
: > "$log"
all=jgs2,vbd,qn,dot,lbfgs-h,admm,newton
# name, seconds, cases, solvers, backends
parts=(
  "a114_jgs2_vbd 120 armadillo_114k jgs2,vbd device,cpu"
  "box1m_vbd 60 box_1m vbd device"
  "box1m_jgs2 100 box_1m jgs2 device"
  "a114_rest 90 armadillo_114k qn,dot,lbfgs-h,admm,newton device,cpu"
  "small 80 box,armadillo_18k $all device,cpu"
)
for p in "${parts[@]}"; do
  read -r name secs cases solvers backends <<<"$p"
  limit=$(awk -v s="$secs" -v k="$scale" 'BEGIN { printf "%d", s * k }')
  echo "=== $name: $cases / $solvers / $backends, limit ${limit} s ($(date -u +%T))" | tee -a "$log"
  JELLO_BENCH_CASES=$cases JELLO_BENCH_SOLVERS=$solvers JELLO_BENCH_BACKENDS=$backends \
    timeout -k 5 "$limit" "$here/gpu_bench" --out "$out/$name" >>"$log" 2>&1
  rc=$?
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && echo "=== $name: stopped at its limit; its finished rows are the 'row:' lines of $log" | tee -a "$log"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && echo "=== $name: exit status $rc" | tee -a "$log"
done
cat "$out"/*/gpu-bench.md > "$out/gpu-bench.md" 2>/dev/null
echo "tables: $out/gpu-bench.md; log: $log"
