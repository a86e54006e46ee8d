//! The multilevel solver's kernels (issue 13; `shaders/ml_*.wgsl`): each on the GPU against its
//! CPU twin, and each twin against the f64 solver's own routine — [`Level::lift`],
//! [`Level::restrict`] and the product with [`invert_blocks`]' 12×12 blocks — on a real SMS basis
//! (built by the precompute for a pinned beam) and on the beam's affine level.
//!
//! Every test draws fresh random inputs (seed printed; replay with `JELLO_TEST_SEED=<seed>`),
//! poisons outputs with NaN so unwritten entries show, and compares by relative norm. The
//! tolerance is the classical rounding bound of the sums the kernels form, computed from the
//! data: a sum over terms t_k formed with depth d (the longest chain of f32 roundings, input
//! rounding included) errs by at most d·u·Σ|t_k| (u = 2⁻²⁴), so
//! ‖got − exact‖ ≤ d·u·‖Σ|t_k|‖ and the relative tolerance is d·u·‖Σ|t_k|‖ / ‖exact‖. The same
//! bound covers GPU against twin: both run the same order and differ only by FMA contraction,
//! which rounds once instead of twice per step. A GPU test FAILS when no adapter is found
//! unless `JELLO_SKIP_GPU_TESTS=1`.
//!
//! Run on both software stacks:
//!   WGPU_BACKEND=vulkan cargo test --test gpu gpu_multilevel::   (Mesa lavapipe)
//!   WGPU_BACKEND=gl     cargo test --test gpu gpu_multilevel::   (Mesa llvmpipe via EGL)

use crate::common;

use common::kernels::{nan_v4, run_both, Data};
use jello::gpu::{GpuVec4, GpuVertexInfo, Kernel, Params};
use jello::material::MaterialModel;
use jello::problem::{HessianLayout, Model, StepProblem};
use jello::solver::multilevel::{
    build_solver, invert_blocks, pack_blocks, HessianOperator, Level, LevelArrays, MultilevelParams,
};
use jello_precompute::sms::{AffineBasis, HANDLE_DOFS};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// f32 unit round-off.
const U32: f64 = f32::EPSILON as f64 / 2.0;

/// Handles of the beam's SMS basis: few enough that every handle covers more vertices than
/// `ml_restrict`'s 64 invocations (each invocation sums several entries before the tree).
const HANDLES: usize = 6;

/// A clamped beam (25 × 5 × 5 = 625 vertices, the x = 0 face pinned), its SMS solver (basis
/// built now, not cached) and both levels.
struct Beam {
    model: Model,
    solver: jello::solver::multilevel::MultilevelSolver,
    levels: Vec<Level>,
}

fn beam() -> Beam {
    let model = common::clamped_beam(
        MaterialModel::StableNeoHookean,
        1e6,
        1.0,
        [24, 4, 4],
        Vec::new(),
    );
    let (solver, _) = build_solver(
        &model,
        MultilevelParams {
            handles: Some(HANDLES),
            ..MultilevelParams::default()
        },
        None,
    )
    .unwrap();
    let basis = solver.basis().unwrap().clone();
    let affine = AffineBasis::new(&model.mesh.positions, &model.mesh.tets).unwrap();
    let levels = vec![
        Level::affine(&affine, &model.pinned),
        Level::sms(&basis, &model.pinned),
    ];
    assert!(model.pinned.iter().any(|&p| p) && model.pinned.iter().any(|&p| !p));
    Beam {
        model,
        solver,
        levels,
    }
}

fn vinfo(m: &Model) -> Vec<GpuVertexInfo> {
    m.pinned
        .iter()
        .map(|&p| GpuVertexInfo {
            mass: 0.0,
            free: u32::from(!p),
        })
        .collect()
}

fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// f64 values as f32 vec4s (4 per vec4; a 3-vector per vertex gets w = 0).
fn vec4s(x: &[f64], stride: usize) -> Vec<GpuVec4> {
    x.chunks(stride)
        .map(|c| {
            let mut v = [0.0f32; 4];
            for (o, &x) in v.iter_mut().zip(c) {
                *o = x as f32;
            }
            v
        })
        .collect()
}

/// The xyz (or all four) words of an output read back as f32 words.
fn words(out: &[f32], stride: usize) -> Vec<f32> {
    out.chunks(4).flat_map(|c| c[..stride].to_vec()).collect()
}

fn norm(a: &[f64]) -> f64 {
    a.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Asserts ‖got − want‖ ≤ `tol`·‖want‖, printing the measured value.
fn check(got: &[f32], want: &[f64], tol: f64, what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = got.iter().position(|v| !v.is_finite()) {
        panic!("{what}: entry {i} is {} (unwritten or invalid)", got[i]);
    }
    let d: Vec<f64> = got.iter().zip(want).map(|(&g, &w)| g as f64 - w).collect();
    let e = norm(&d) / norm(want).max(f64::MIN_POSITIVE);
    eprintln!("{what}: relative error {e:.2e} (bound {tol:.2e})");
    assert!(e <= tol, "{what}: relative error {e:.3e} > {tol:.3e}");
    e
}

/// The lift of random subspace vectors on both levels: twin against [`Level::lift`] in f64,
/// GPU against twin; pinned vertices exactly zero. Depth of u_v's sum: its row's entries × 4
/// products (each a dot of 4, summed into the accumulator) + 2 input roundings (q and the
/// frame).
#[test]
fn lift_matches_the_f64_level() {
    let mut rng = common::rng("lift_matches_the_f64_level");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    for level in &b.levels {
        let a: LevelArrays = level.device_arrays().unwrap();
        let q = random(&mut rng, level.dim());
        let mut want = vec![0.0; 3 * n];
        level.lift(&q, &mut want);
        // Σ|terms| per DOF and the longest row.
        let mut abs = vec![0.0; 3 * n];
        let mut longest = 0;
        for v in 0..n {
            let (lo, hi) = (a.vertex_ptr[v] as usize, a.vertex_ptr[v + 1] as usize);
            longest = longest.max(hi - lo);
            if level.is_pinned(v) {
                continue;
            }
            for k in lo..hi {
                let h = a.vertex_handle[k] as usize;
                for r in 0..3 {
                    for c in 0..4 {
                        abs[3 * v + r] +=
                            (q[HANDLE_DOFS * h + 4 * r + c] * a.vertex_frame[k][c] as f64).abs();
                    }
                }
            }
        }
        let depth = (4 * longest + 2) as f64;
        let tol = depth * U32 * norm(&abs) / norm(&want);
        let data = [
            Data::V(vec4s(&q, 4)),
            Data::U(a.vertex_ptr.clone()),
            Data::U(a.vertex_handle.clone()),
            Data::V(a.vertex_frame.clone()),
            Data::I(vinfo(m)),
            nan_v4(n),
        ];
        let (cpu, gpu) = run_both(Kernel::MlLift, &data, Params::new(), n as u32);
        let name = level.name;
        let twin = words(&cpu[5], 3);
        check(&twin, &want, tol, &format!("{name} lift: twin vs f64"));
        for (v, _) in m.pinned.iter().enumerate().filter(|(_, &p)| p) {
            assert_eq!(&cpu[5][4 * v..4 * v + 4], &[0.0; 4], "{name}: pinned {v}");
        }
        if let Some(g) = gpu {
            let gw = words(&g[5], 3);
            let twin64: Vec<f64> = twin.iter().map(|&x| x as f64).collect();
            check(&gw, &twin64, tol, &format!("{name} lift: GPU vs twin"));
            for (v, _) in m.pinned.iter().enumerate().filter(|(_, &p)| p) {
                assert_eq!(&g[5][4 * v..4 * v + 4], &[0.0; 4], "{name} GPU: pinned {v}");
            }
        }
    }
}

/// The restriction of random full-space vectors on both levels: twin against
/// [`Level::restrict`] in f64, GPU against twin; a vector living only on pinned vertices
/// restricts to exactly zero. Depth: ⌈row / 64⌉ strided additions + 6 tree levels + the product
/// + 2 input roundings (y and the frame).
#[test]
fn restrict_matches_the_f64_level() {
    let mut rng = common::rng("restrict_matches_the_f64_level");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    for level in &b.levels {
        let a = level.device_arrays().unwrap();
        let nh = level.n_handles();
        let y = random(&mut rng, 3 * n);
        let mut want = vec![0.0; level.dim()];
        level.restrict(&y, &mut want);
        let mut abs = vec![0.0; level.dim()];
        let mut longest = 0;
        for h in 0..nh {
            let (lo, hi) = (a.handle_ptr[h] as usize, a.handle_ptr[h + 1] as usize);
            longest = longest.max(hi - lo);
            for k in lo..hi {
                let v = a.handle_vertex[k] as usize;
                if level.is_pinned(v) {
                    continue;
                }
                for r in 0..3 {
                    for c in 0..4 {
                        abs[HANDLE_DOFS * h + 4 * r + c] +=
                            (y[3 * v + r] * a.handle_frame[k][c] as f64).abs();
                    }
                }
            }
        }
        let shortest = (0..nh)
            .map(|h| (a.handle_ptr[h + 1] - a.handle_ptr[h]) as usize)
            .min()
            .unwrap();
        eprintln!(
            "{}: {nh} handles, rows of {shortest}–{longest} vertices",
            level.name
        );
        assert!(
            longest > 64,
            "{}: a handle row of {longest} entries does not exercise the strided sums",
            level.name
        );
        let depth = (longest.div_ceil(64) + 6 + 1 + 2) as f64;
        let tol = depth * U32 * norm(&abs) / norm(&want);
        let data = |y: &[f64]| {
            [
                Data::V(vec4s(y, 3)),
                Data::U(a.handle_ptr.clone()),
                Data::U(a.handle_vertex.clone()),
                Data::V(a.handle_frame.clone()),
                Data::I(vinfo(m)),
                nan_v4(3 * nh),
            ]
        };
        let (cpu, gpu) = run_both(Kernel::MlRestrict, &data(&y), Params::new(), nh as u32);
        let name = level.name;
        check(
            &cpu[5],
            &want,
            tol,
            &format!("{name} restrict: twin vs f64"),
        );
        if let Some(g) = gpu {
            let twin64: Vec<f64> = cpu[5].iter().map(|&x| x as f64).collect();
            check(
                &g[5],
                &twin64,
                tol,
                &format!("{name} restrict: GPU vs twin"),
            );
        }
        // Only pinned vertices carry y: the restriction skips them all.
        let pinned_only: Vec<f64> = y
            .iter()
            .enumerate()
            .map(|(k, &v)| if m.pinned[k / 3] { v } else { 0.0 })
            .collect();
        let (cpu, gpu) = run_both(
            Kernel::MlRestrict,
            &data(&pinned_only),
            Params::new(),
            nh as u32,
        );
        assert!(cpu[5].iter().all(|&x| x == 0.0), "{name}: twin sees pins");
        if let Some(g) = gpu {
            assert!(g[5].iter().all(|&x| x == 0.0), "{name}: GPU sees pins");
        }
    }
}

/// The block-Jacobi application with the solver's real inverted blocks (the Galerkin block
/// diagonal of a perturbed beam's H: inertia, cubature element Hessians, pins) on both levels:
/// twin against the f64 product, GPU against twin. Depth: 4 products and sums per dot + 2 dot
/// additions + 2 input roundings (block and r).
#[test]
fn block_apply_matches_the_f64_blocks() {
    let mut rng = common::rng("block_apply_matches_the_f64_blocks");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    let state = m.initial_state(&vec![[0.0; 3]; n]);
    let problem = StepProblem::new(m, &state, 0.01);
    // A small random perturbation (the tets are 4 cm): H away from rest, still feasible.
    let x: Vec<f64> = state
        .x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            if m.pinned[k / 3] {
                v
            } else {
                v + 1e-3 * rng.random_range(-1.0..1.0)
            }
        })
        .collect();
    let cub = b.solver.cubature_terms(m, &x);
    let layout = HessianLayout::new(m).unwrap();
    let mut base = layout.zeros();
    problem.add_vertex_hessian(&layout, &x, &mut base);
    let fixed: Vec<bool> = (0..3 * n).map(|k| m.pinned[k / 3]).collect();
    let op = HessianOperator {
        base: &base,
        elements: &cub,
        contact: &[],
        fixed: &fixed,
    };
    for level in &b.levels {
        let blocks = invert_blocks(&op.galerkin_diagonal(level));
        let nh = level.n_handles();
        let r = random(&mut rng, level.dim());
        let mut want = vec![0.0; level.dim()];
        let mut abs = vec![0.0; level.dim()];
        for (h, blk) in blocks.iter().enumerate() {
            for i in 0..HANDLE_DOFS {
                for j in 0..HANDLE_DOFS {
                    let t = blk[HANDLE_DOFS * i + j] * r[HANDLE_DOFS * h + j];
                    want[HANDLE_DOFS * h + i] += t;
                    abs[HANDLE_DOFS * h + i] += t.abs();
                }
            }
        }
        let tol = (4 + 2 + 2) as f64 * U32 * norm(&abs) / norm(&want);
        let data = [
            Data::V(pack_blocks(&blocks)),
            Data::V(vec4s(&r, 4)),
            nan_v4(3 * nh),
        ];
        let (cpu, gpu) = run_both(Kernel::MlBlockApply, &data, Params::new(), 3 * nh as u32);
        let name = level.name;
        check(
            &cpu[2],
            &want,
            tol,
            &format!("{name} block apply: twin vs f64"),
        );
        if let Some(g) = gpu {
            let twin64: Vec<f64> = cpu[2].iter().map(|&x| x as f64).collect();
            check(
                &g[2],
                &twin64,
                tol,
                &format!("{name} block apply: GPU vs twin"),
            );
        }
    }
}

/// The cubature element terms of H·x (`ml_element_hv`, then the existing `gather_gradient` over
/// the terms' vertex→(term, corner) CSR) against [`HessianOperator::apply`] with only those
/// terms (a zero `base`, no contact) in f64, GPU against twin per kernel. Depth: 12 products
/// summed per corner (3 per block, 4 blocks) + the scale + the gather's row + 2 input roundings
/// (Hessian and x).
#[test]
fn element_hessian_vector_product_matches_the_f64_operator() {
    use common::kernels::run_on;
    use jello::gpu::{Device, VertexCsr};
    let mut rng = common::rng("element_hessian_vector_product_matches_the_f64_operator");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    let state = m.initial_state(&vec![[0.0; 3]; n]);
    let x0: Vec<f64> = state
        .x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            if m.pinned[k / 3] {
                v
            } else {
                v + 1e-3 * rng.random_range(-1.0..1.0)
            }
        })
        .collect();
    let cub = b.solver.cubature_terms(m, &x0);
    assert!(!cub.is_empty());
    let layout = HessianLayout::new(m).unwrap();
    let zero = layout.zeros();
    let fixed: Vec<bool> = (0..3 * n).map(|k| m.pinned[k / 3]).collect();
    let op = HessianOperator {
        base: &zero,
        elements: &cub,
        contact: &[],
        fixed: &fixed,
    };
    // A random direction (m), pinned entries too: the kernel must ignore them.
    let d = random(&mut rng, 3 * n);
    let mut want = vec![0.0; 3 * n];
    op.apply(&d, &mut want);
    let mut abs = vec![0.0; 3 * n];
    // The same per corner (xyz of each term's four corners), for the element kernel alone.
    let mut abs_corner = vec![0.0; 12 * cub.len()];
    for (e, t) in cub.iter().enumerate() {
        for (a, &va) in t.vertices.iter().enumerate() {
            for i in 0..3 {
                let row = 3 * va as usize + i;
                if fixed[row] {
                    continue;
                }
                for (bb, &vb) in t.vertices.iter().enumerate() {
                    for j in 0..3 {
                        let col = 3 * vb as usize + j;
                        if !fixed[col] {
                            let term =
                                (t.scale * t.hessian[12 * (3 * a + i) + 3 * bb + j] * d[col]).abs();
                            abs[row] += term;
                            abs_corner[12 * e + 3 * a + i] += term;
                        }
                    }
                }
            }
        }
    }
    let tets: Vec<[u32; 4]> = cub.iter().map(|t| t.vertices).collect();
    let csr = VertexCsr::new(&tets, n).unwrap();
    let longest = (0..n)
        .map(|v| (csr.offsets[v + 1] - csr.offsets[v]) as usize)
        .max()
        .unwrap();
    let depth = (12 + 1 + longest + 2) as f64;
    let tol = depth * U32 * norm(&abs) / norm(&want);
    let hess: Vec<f32> = cub
        .iter()
        .flat_map(|t| t.hessian.iter().map(|&h| h as f32))
        .collect();
    let scale: Vec<f32> = cub.iter().map(|t| t.scale as f32).collect();
    let nt = cub.len();
    let elem = [
        Data::V(vec4s(&d, 3)),
        Data::T(tets.clone()),
        Data::F(hess),
        Data::F(scale),
        Data::I(vinfo(m)),
        nan_v4(4 * nt),
    ];
    let (cpu_e, gpu_e) = run_both(Kernel::MlElementHv, &elem, Params::new(), nt as u32);
    let gather = |dev: &mut Device, corners: &[f32]| {
        let corners: Vec<GpuVec4> = corners
            .chunks(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect();
        let data = [
            Data::V(corners),
            Data::U(csr.offsets.clone()),
            Data::U(csr.tets.clone()),
            Data::U(csr.local.clone()),
            nan_v4(n),
        ];
        run_on(dev, Kernel::GatherGradient, &data, Params::new(), n as u32).swap_remove(4)
    };
    let twin = words(&gather(&mut Device::cpu(), &cpu_e[5]), 3);
    check(&twin, &want, tol, "element H·x: twins vs f64");
    if let Some(g) = gpu_e {
        let twin_e = words(&cpu_e[5], 3);
        let twin_e64: Vec<f64> = twin_e.iter().map(|&x| x as f64).collect();
        // Per corner: 12 products + the scale + 2 input roundings.
        let tol_e = 15.0 * U32 * norm(&abs_corner) / norm(&twin_e64);
        check(
            &words(&g[5], 3),
            &twin_e64,
            tol_e,
            "ml_element_hv: GPU vs twin",
        );
        let mut dev = common::gpu_device().expect("the adapter run_both used");
        let gw = words(&gather(&mut dev, &g[5]), 3);
        let twin64: Vec<f64> = twin.iter().map(|&x| x as f64).collect();
        check(&gw, &twin64, tol, "element H·x: GPU vs twins");
    }
}

/// `|U| |q|`: the lift's sums in f64 with the absolute value of every product, for the
/// componentwise rounding bound of a chain of kernels.
fn abs_lift(a: &LevelArrays, level: &Level, q: &[f64]) -> Vec<f64> {
    let n = a.vertex_ptr.len() - 1;
    let mut u = vec![0.0; 3 * n];
    for v in (0..n).filter(|&v| !level.is_pinned(v)) {
        for k in a.vertex_ptr[v] as usize..a.vertex_ptr[v + 1] as usize {
            let h = a.vertex_handle[k] as usize;
            for r in 0..3 {
                for c in 0..4 {
                    u[3 * v + r] +=
                        (q[HANDLE_DOFS * h + 4 * r + c] * a.vertex_frame[k][c] as f64).abs();
                }
            }
        }
    }
    u
}

/// `|U|ᵀ |y|`: the restriction's sums with the absolute value of every product.
fn abs_restrict(a: &LevelArrays, level: &Level, y: &[f64]) -> Vec<f64> {
    let nh = a.handle_ptr.len() - 1;
    let mut q = vec![0.0; HANDLE_DOFS * nh];
    for h in 0..nh {
        for k in a.handle_ptr[h] as usize..a.handle_ptr[h + 1] as usize {
            let v = a.handle_vertex[k] as usize;
            if level.is_pinned(v) {
                continue;
            }
            for r in 0..3 {
                for c in 0..4 {
                    q[HANDLE_DOFS * h + 4 * r + c] +=
                        (y[3 * v + r] * a.handle_frame[k][c] as f64).abs();
                }
            }
        }
    }
    q
}

/// One Galerkin product of the element terms, `Uᵀ H_e U q`, recorded as one plan on the device
/// (lift → element terms → gather → restrict, no read-back in between) on both levels and
/// both backends, against the f64 chain `Level::lift` → [`HessianOperator::apply`] (element
/// terms only) → `Level::restrict`. Bound: the componentwise rounding bound of the whole chain,
/// `D·u·‖|U|ᵀ |H_e| |U| |q|‖ / ‖exact‖` with D the sum of the stages' depths (lift 4·row + 2,
/// element 12 + 2, gather its row, restrict ⌈row/64⌉ + 8). The restricted vector cancels
/// strongly — the element forces of any displacement sum to zero over an object, so the
/// translation rows of the affine level are zero in exact arithmetic — which is what the
/// bound's ‖|…|‖ / ‖exact‖ measures.
#[test]
fn element_galerkin_product_runs_as_one_plan() {
    use jello::gpu::{Device, Plan, VertexCsr};
    let mut rng = common::rng("element_galerkin_product_runs_as_one_plan");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    let state = m.initial_state(&vec![[0.0; 3]; n]);
    let x0: Vec<f64> = state
        .x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            if m.pinned[k / 3] {
                v
            } else {
                v + 1e-3 * rng.random_range(-1.0..1.0)
            }
        })
        .collect();
    let cub = b.solver.cubature_terms(m, &x0);
    let layout = HessianLayout::new(m).unwrap();
    let zero = layout.zeros();
    let fixed: Vec<bool> = (0..3 * n).map(|k| m.pinned[k / 3]).collect();
    let op = HessianOperator {
        base: &zero,
        elements: &cub,
        contact: &[],
        fixed: &fixed,
    };
    let tets: Vec<[u32; 4]> = cub.iter().map(|t| t.vertices).collect();
    let csr = VertexCsr::new(&tets, n).unwrap();
    let hess: Vec<f32> = cub
        .iter()
        .flat_map(|t| t.hessian.iter().map(|&h| h as f32))
        .collect();
    let scale: Vec<f32> = cub.iter().map(|t| t.scale as f32).collect();
    let gather_row = (0..n)
        .map(|v| (csr.offsets[v + 1] - csr.offsets[v]) as usize)
        .max()
        .unwrap();
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu_device());
    for level in &b.levels {
        let a = level.device_arrays().unwrap();
        let nh = level.n_handles();
        let q = random(&mut rng, level.dim());
        let (mut u, mut hu, mut want) = (vec![0.0; 3 * n], vec![0.0; 3 * n], vec![0.0; 12 * nh]);
        level.lift(&q, &mut u);
        op.apply(&u, &mut hu);
        level.restrict(&hu, &mut want);
        // The chain in absolute values.
        let ua = abs_lift(&a, level, &q);
        let mut ha = vec![0.0; 3 * n];
        for t in &cub {
            for (i, &vi) in t.vertices.iter().enumerate() {
                for (j, &vj) in t.vertices.iter().enumerate() {
                    for r in 0..3 {
                        for c in 0..3 {
                            let (row, col) = (3 * vi as usize + r, 3 * vj as usize + c);
                            if !(fixed[row] || fixed[col]) {
                                ha[row] +=
                                    (t.scale * t.hessian[12 * (3 * i + r) + 3 * j + c] * ua[col])
                                        .abs();
                            }
                        }
                    }
                }
            }
        }
        let abs = abs_restrict(&a, level, &ha);
        let row = |p: &[u32]| p.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap();
        let depth =
            4 * row(&a.vertex_ptr) + 2 + 14 + gather_row + row(&a.handle_ptr).div_ceil(64) + 8;
        let tol = depth as f64 * U32 * norm(&abs) / norm(&want);
        let mut outs = Vec::new();
        for dev in devs.iter_mut() {
            let qb = dev.upload("q", &vec4s(&q, 4)).unwrap();
            let vptr = dev.upload("vptr", &a.vertex_ptr).unwrap();
            let vhandle = dev.upload("vhandle", &a.vertex_handle).unwrap();
            let vframe = dev.upload("vframe", &a.vertex_frame).unwrap();
            let vi = dev.upload("vinfo", &vinfo(m)).unwrap();
            let ub = dev.upload("u", &vec![[f32::NAN; 4]; n]).unwrap();
            let tb = dev.upload("tets", &tets).unwrap();
            let hb = dev.upload("hess", &hess).unwrap();
            let sb = dev.upload("scale", &scale).unwrap();
            let cb = dev
                .upload("corners", &vec![[f32::NAN; 4]; 4 * tets.len()])
                .unwrap();
            let off = dev.upload("offsets", &csr.offsets).unwrap();
            let ct = dev.upload("csr tets", &csr.tets).unwrap();
            let cl = dev.upload("csr local", &csr.local).unwrap();
            let hub = dev.upload("Hu", &vec![[f32::NAN; 4]; n]).unwrap();
            let hptr = dev.upload("hptr", &a.handle_ptr).unwrap();
            let hvertex = dev.upload("hvertex", &a.handle_vertex).unwrap();
            let hframe = dev.upload("hframe", &a.handle_frame).unwrap();
            let out = dev.upload("UᵀHUq", &vec![[f32::NAN; 4]; 3 * nh]).unwrap();
            let mut plan = Plan::new();
            plan.dispatch(
                Kernel::MlLift,
                &[
                    qb.id(),
                    vptr.id(),
                    vhandle.id(),
                    vframe.id(),
                    vi.id(),
                    ub.id(),
                ],
                Params::new(),
                n as u32,
            )
            .dispatch(
                Kernel::MlElementHv,
                &[ub.id(), tb.id(), hb.id(), sb.id(), vi.id(), cb.id()],
                Params::new(),
                tets.len() as u32,
            )
            .dispatch(
                Kernel::GatherGradient,
                &[cb.id(), off.id(), ct.id(), cl.id(), hub.id()],
                Params::new(),
                n as u32,
            )
            .dispatch(
                Kernel::MlRestrict,
                &[
                    hub.id(),
                    hptr.id(),
                    hvertex.id(),
                    hframe.id(),
                    vi.id(),
                    out.id(),
                ],
                Params::new(),
                nh as u32,
            );
            dev.submit(&plan).unwrap();
            let got: Vec<f32> = dev.read(&out).unwrap().into_iter().flatten().collect();
            check(
                &got,
                &want,
                tol,
                &format!("{} UᵀH_eUq, one plan on {}", level.name, dev.info()),
            );
            outs.push(got);
        }
        if let [cpu, gpu] = &outs[..] {
            let cpu64: Vec<f64> = cpu.iter().map(|&x| x as f64).collect();
            check(
                gpu,
                &cpu64,
                tol,
                &format!("{} UᵀH_eUq: GPU vs twins", level.name),
            );
        }
    }
}

/// The twins refuse malformed lists with an error instead of panicking or reading out of
/// bounds (the GPU would read clamped garbage): a handle index past the subspace vector, a
/// vertex index past the vertex arrays, a block column past x, decreasing offsets, a short
/// block buffer.
#[test]
fn twins_reject_malformed_lists() {
    use jello::gpu::Device;
    let mut dev = Device::cpu();
    let free = GpuVertexInfo { mass: 0.0, free: 1 };
    let q = dev.upload("q", &[[1.0f32; 4]; 3]).unwrap(); // one handle
    let vi = dev.upload("vinfo", &[free; 2]).unwrap();
    let frame = dev.upload("frame", &[[1.0f32; 4]; 2]).unwrap();
    let ptr = dev.upload("ptr", &[0u32, 1, 2]).unwrap();
    let bad_ptr = dev.upload("decreasing ptr", &[0u32, 2, 1]).unwrap();
    let ok_idx = dev.upload("idx", &[0u32, 0]).unwrap();
    let far_idx = dev.upload("idx past the end", &[0u32, 5]).unwrap();
    let u = dev.upload("u", &[[0.0f32; 4]; 2]).unwrap();
    let lift = |dev: &mut Device, p: &jello::gpu::Buf<u32>, i: &jello::gpu::Buf<u32>| {
        dev.dispatch(
            Kernel::MlLift,
            &[q.id(), p.id(), i.id(), frame.id(), vi.id(), u.id()],
            Params::new(),
            2,
        )
    };
    lift(&mut dev, &ptr, &ok_idx).expect("well-formed lists run");
    assert!(lift(&mut dev, &ptr, &far_idx).is_err(), "handle 5 of 1");
    assert!(
        lift(&mut dev, &bad_ptr, &ok_idx).is_err(),
        "decreasing offsets"
    );
    // Restriction over 2 handles of one entry each; vertex 5 of 2 is refused.
    let y = dev.upload("y", &[[1.0f32; 4]; 2]).unwrap();
    let out = dev.upload("q out", &[[0.0f32; 4]; 6]).unwrap();
    let restrict = |dev: &mut Device, i: &jello::gpu::Buf<u32>| {
        dev.dispatch(
            Kernel::MlRestrict,
            &[y.id(), ptr.id(), i.id(), frame.id(), vi.id(), out.id()],
            Params::new(),
            2,
        )
    };
    restrict(&mut dev, &ok_idx).expect("well-formed lists run");
    assert!(restrict(&mut dev, &far_idx).is_err(), "vertex 5 of 2");
    // Block rows over 2 vertices: a column past x, decreasing offsets, too few blocks.
    let id = jello::gpu::GpuMat3::from_rows([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]);
    let blocks = dev.upload("bsr blocks", &[id; 2]).unwrap();
    let one_block = dev.upload("one bsr block", &[id]).unwrap();
    let bsr = |dev: &mut Device,
               p: &jello::gpu::Buf<u32>,
               c: &jello::gpu::Buf<u32>,
               b: &jello::gpu::Buf<jello::gpu::GpuMat3>| {
        dev.dispatch(
            Kernel::MlBsrHv,
            &[p.id(), c.id(), b.id(), y.id(), y.id(), u.id()],
            Params::new(),
            2,
        )
    };
    bsr(&mut dev, &ptr, &ok_idx, &blocks).expect("well-formed rows run");
    assert!(
        bsr(&mut dev, &ptr, &far_idx, &blocks).is_err(),
        "column 5 of 2"
    );
    assert!(
        bsr(&mut dev, &bad_ptr, &ok_idx, &blocks).is_err(),
        "decreasing offsets"
    );
    assert!(
        bsr(&mut dev, &ptr, &ok_idx, &one_block).is_err(),
        "one block for two"
    );
    // Block apply over one handle (3 rows) needs 36 block vec4s.
    let short = dev.upload("blocks", &[[0.0f32; 4]; 35]).unwrap();
    let z = dev.upload("z", &[[0.0f32; 4]; 3]).unwrap();
    assert!(dev
        .dispatch(
            Kernel::MlBlockApply,
            &[short.id(), q.id(), z.id()],
            Params::new(),
            3
        )
        .is_err());
}

/// Random PSD contact stencils `G Gᵀ` (G 12×6, entries up to 1e3 N/m scale) on random vertices,
/// a third of them with one corner on an obstacle vertex (id ≥ n, no DOF) — the shape
/// [`jello::problem::StepProblem::contact_hessian_blocks`] hands the operator.
fn random_stencils(
    rng: &mut ChaCha8Rng,
    n: usize,
    count: usize,
) -> Vec<([u32; 4], nalgebra::SMatrix<f64, 12, 12>)> {
    (0..count)
        .map(|s| {
            let mut ids: [u32; 4] = std::array::from_fn(|_| rng.random_range(0..n as u32));
            if s % 3 == 0 {
                ids[3] = (n + rng.random_range(0..8)) as u32;
            }
            let g = nalgebra::SMatrix::<f64, 12, 6>::from_fn(|_, _| rng.random_range(-30.0..30.0));
            (ids, g * g.transpose())
        })
        .collect()
}

/// The beam perturbed by up to 1 mm per free DOF (its tets are 4 cm): H away from rest, still
/// feasible.
fn perturbed(m: &Model, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    state
        .x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            if m.pinned[k / 3] {
                v
            } else {
                v + 1e-3 * rng.random_range(-1.0..1.0)
            }
        })
        .collect()
}

/// `|A| |x|` of a symmetric sparse matrix (both triangles), for the rounding bound.
fn abs_mul(a: &jello_precompute::sparse::SymSparse, x: &[f64]) -> Vec<f64> {
    let p = a.pattern();
    let (cp, ri, v) = (p.col_ptr(), p.row_idx(), a.values());
    let mut y = vec![0.0; x.len()];
    for c in 0..p.n() {
        for k in cp[c]..cp[c + 1] {
            let r = ri[k];
            y[r] += (v[k] * x[c]).abs();
            if r != c {
                y[c] += (v[k] * x[r]).abs();
            }
        }
    }
    y
}

/// The whole full-space H·x on the device — the block-sparse base (`ml_bsr_hv`, here a random
/// symmetric matrix on the elastic pattern so that every off-diagonal block is exercised), the
/// cubature element terms and the IPC-shaped contact stencils (`ml_element_hv` +
/// `gather_gradient`, added by `ml_bsr_hv`) recorded as one plan — against
/// [`HessianOperator::apply`] in f64 (twins) and against the twins (GPU). Bound: the
/// componentwise rounding bound `D·u·‖|H| |x|‖ / ‖Hx‖` with D = the element chain's depth
/// (12 products + scale + the gather's row + 2 input roundings) + the base row's 3 products per
/// block + 1 for the addition + 1 input rounding of the block.
#[test]
fn full_space_hessian_vector_product_matches_the_f64_operator() {
    use jello::gpu::{Device, Plan, VertexCsr};
    use jello::solver::multilevel::device::DeviceOperator;
    use jello::solver::multilevel::{BsrArrays, DeviceTerms};
    let mut rng = common::rng("full_space_hessian_vector_product_matches_the_f64_operator");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    let x0 = perturbed(m, &mut rng);
    let cub = b.solver.cubature_terms(m, &x0);
    let contact = random_stencils(&mut rng, n, 40);
    let layout = HessianLayout::new(m).unwrap();
    let mut base = layout.zeros();
    for v in base.values_mut() {
        *v = 1e3 * rng.random_range(-1.0..1.0);
    }
    let fixed: Vec<bool> = (0..3 * n).map(|k| m.pinned[k / 3]).collect();
    let op = HessianOperator {
        base: &base,
        elements: &cub,
        contact: &contact,
        fixed: &fixed,
    };
    let x = random(&mut rng, 3 * n);
    let mut want = vec![0.0; 3 * n];
    op.apply(&x, &mut want);
    // |H| |x| term by term: |base| |x| + the element and contact terms between free DOFs.
    let mut abs = abs_mul(&base, &x);
    let mut add_abs = |ids: &[u32; 4], h: &dyn Fn(usize, usize) -> f64| {
        for (a, &va) in ids.iter().enumerate() {
            for (bb, &vb) in ids.iter().enumerate() {
                if va as usize >= n || vb as usize >= n {
                    continue;
                }
                for i in 0..3 {
                    for j in 0..3 {
                        let (r, c) = (3 * va as usize + i, 3 * vb as usize + j);
                        if !(fixed[r] || fixed[c]) {
                            abs[r] += (h(3 * a + i, 3 * bb + j) * x[c]).abs();
                        }
                    }
                }
            }
        }
    };
    for t in &cub {
        add_abs(&t.vertices, &|r, c| t.scale * t.hessian[12 * r + c]);
    }
    for (ids, h) in &contact {
        add_abs(ids, &|r, c| h[(r, c)]);
    }
    let bsr = BsrArrays::from_sym(&base).unwrap();
    let terms = DeviceTerms::new(&cub, &contact, n);
    assert_eq!(
        terms.len(),
        cub.len() + contact.len(),
        "every stencil has a model vertex"
    );
    let row = |p: &[u32]| p.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap();
    let gather_row = row(&VertexCsr::new(&terms.tets, n).unwrap().offsets);
    let depth = (12 + 1 + gather_row + 2) + 3 * row(&bsr.row_ptr) + 1 + 1;
    let tol = depth as f64 * U32 * norm(&abs) / norm(&want);
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu_device());
    let mut outs = Vec::new();
    for dev in devs.iter_mut() {
        let h = DeviceOperator::new(dev, &bsr, &terms, &m.pinned).unwrap();
        let xb = dev.upload("x", &vec4s(&x, 3)).unwrap();
        let yb = dev.upload("Hx", &vec![[f32::NAN; 4]; n]).unwrap();
        let mut plan = Plan::new();
        h.record_apply(&mut plan, &xb, &yb);
        dev.submit(&plan).unwrap();
        let got = words(&dev.read(&yb).unwrap().concat(), 3);
        check(
            &got,
            &want,
            tol,
            &format!(
                "full-space H·x ({} terms, {} stencils) on {}",
                cub.len(),
                contact.len(),
                dev.info()
            ),
        );
        outs.push(got);
    }
    if let [cpu, gpu] = &outs[..] {
        let cpu64: Vec<f64> = cpu.iter().map(|&v| v as f64).collect();
        check(gpu, &cpu64, tol, "full-space H·x: GPU vs twins");
    }
}

/// The H of the PCG tests: the beam's per-vertex terms at a perturbed state (inertia m/ĥ²,
/// identity on pinned rows: SPD), the cubature element terms (PSD) and PSD contact stencils.
struct Spd {
    base: jello_precompute::sparse::SymSparse,
    cub: Vec<jello::solver::multilevel::ElementTerm>,
    contact: Vec<([u32; 4], nalgebra::SMatrix<f64, 12, 12>)>,
    fixed: Vec<bool>,
}

fn spd(b: &Beam, rng: &mut ChaCha8Rng) -> Spd {
    let m = &b.model;
    let n = m.num_vertices();
    let x0 = perturbed(m, rng);
    let state = m.initial_state(&vec![[0.0; 3]; n]);
    let problem = StepProblem::new(m, &state, 0.01);
    let layout = HessianLayout::new(m).unwrap();
    let mut base = layout.zeros();
    problem.add_vertex_hessian(&layout, &x0, &mut base);
    Spd {
        base,
        cub: b.solver.cubature_terms(m, &x0),
        contact: random_stencils(rng, n, 40),
        fixed: (0..3 * n).map(|k| m.pinned[k / 3]).collect(),
    }
}

impl Spd {
    fn op(&self) -> HessianOperator<'_> {
        HessianOperator {
            base: &self.base,
            elements: &self.cub,
            contact: &self.contact,
            fixed: &self.fixed,
        }
    }
}

/// The stop rule of both PCGs in these tests (the multilevel levels' default).
const PCG_TOL: f64 = 1e-4;

/// Compares a device PCG's outcome with the f64 one's: the iteration counts within
/// max(2, 15%) — f32 round-off perturbs the recurrence, so its residual crosses the tolerance a
/// little earlier or later, but a loss of conjugacy would show as many more iterations — and
/// the device solution's true residual ‖b − A x‖/‖b‖, recomputed in f64, within 10× the
/// tolerance (the recurrence's f32 residual drifts from the true one by ~u·κ-sized amounts,
/// far below 1e-4 here, so this bound would catch a wrong α or β, not round-off).
fn compare_pcg(what: &str, dev_it: usize, cpu_it: usize, true_res: f64) {
    eprintln!(
        "{what}: device {dev_it} iterations, f64 {cpu_it}; device true residual {true_res:.2e}"
    );
    let slack = 2.max(cpu_it * 15 / 100);
    assert!(
        dev_it.abs_diff(cpu_it) <= slack,
        "{what}: {dev_it} iterations against {cpu_it} (allowed ±{slack})"
    );
    assert!(
        true_res <= 10.0 * PCG_TOL,
        "{what}: true residual {true_res:.3e}"
    );
}

/// Iterations of the full-space smoother in its test (the precompute's larger N_cg).
const N_CG: usize = 40;

/// The full-space smoother as the solver runs it: Jacobi PCG on H d = −g warm-started at a
/// subspace direction, exactly [`N_CG`] iterations (tolerance 0), on the device against
/// [`jello::solver::pcg::pcg`] in f64 on the same H, right-hand side (random, zero at pinned
/// DOFs as the solver's −g is) and start (a random direction standing in for d_s). This H is
/// badly conditioned (Jacobi PCG needs hundreds of iterations to 1e-4), so a short fixed run is
/// where the two precisions can be compared step for step: both true residuals
/// ‖b − H d‖/‖b‖ (recomputed in f64) must agree within 10% — each iteration's f32 round-off
/// (~1e-7 relative on the products, above) perturbs the Krylov recurrence far less than that
/// over 40 steps, while a wrong coefficient or a stale vector changes the reduction by a
/// large factor — and the directions within 1e-2 relative.
#[test]
fn full_space_jacobi_pcg_matches_the_f64_pcg() {
    use jello::gpu::Device;
    use jello::solver::backend::{Backend, DeviceBackend};
    use jello::solver::multilevel::backend::{Hessian, MultilevelBackend};
    use jello::solver::pcg::{pcg, BackendPcg};
    let mut rng = common::rng("full_space_jacobi_pcg_matches_the_f64_pcg");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    let h = spd(&b, &mut rng);
    let op = h.op();
    let free = |v: Vec<f64>| -> Vec<f64> {
        v.into_iter()
            .zip(&h.fixed)
            .map(|(v, &f)| if f { 0.0 } else { v })
            .collect()
    };
    let rhs = free(random(&mut rng, 3 * n));
    let start: Vec<f64> = free(random(&mut rng, 3 * n))
        .iter()
        .map(|v| 1e-4 * v)
        .collect();
    let true_residual = |d: &[f64]| {
        let mut hd = vec![0.0; 3 * n];
        op.apply(d, &mut hd);
        let r: Vec<f64> = rhs.iter().zip(&hd).map(|(b, a)| b - a).collect();
        norm(&r) / norm(&rhs)
    };
    let diag = op.diagonal();
    let mut x = start.clone();
    let cpu = pcg(
        &mut |v: &[f64], o: &mut [f64]| op.apply(v, o),
        &|r: &[f64], z: &mut [f64]| {
            for k in 0..r.len() {
                z[k] = r[k] / diag[k];
            }
        },
        &rhs,
        &mut x,
        0.0,
        N_CG,
    );
    assert!(!cpu.breakdown && cpu.iterations == N_CG, "{cpu:?}");
    let (res0, res_cpu) = (true_residual(&start), true_residual(&x));
    // CG minimises φ(d) = ½dᵀHd − bᵀd over the Krylov space: its decrease and the H-norm are
    // what it controls (the 2-norm residual is not monotone in CG and swings with tiny changes).
    let phi = |d: &[f64]| {
        let mut hd = vec![0.0; 3 * n];
        op.apply(d, &mut hd);
        d.iter()
            .zip(&hd)
            .zip(&rhs)
            .map(|((d, h), b)| 0.5 * d * h - b * d)
            .sum::<f64>()
    };
    let a_norm = |d: &[f64]| {
        let mut hd = vec![0.0; 3 * n];
        op.apply(d, &mut hd);
        d.iter().zip(&hd).map(|(a, b)| a * b).sum::<f64>().sqrt()
    };
    let dec_cpu = phi(&start) - phi(&x);
    eprintln!("f64 smoother: true residual {res0:.3e} → {res_cpu:.3e} in {N_CG} iterations");
    assert!(
        res_cpu < 0.5 * res0,
        "the smoother must reduce the residual"
    );
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu_device());
    for dev in devs {
        let info = dev.info().to_string();
        // The smoother's operator and Jacobi as the solver uploads them (H_l = this H).
        let mut be = DeviceBackend::new(dev, m).unwrap();
        be.ml_attach([None, None], &m.pinned).unwrap();
        be.ml_set_hessians(&op, &op).unwrap();
        let (bb, xb) = (be.vector("b").unwrap(), be.vector("x").unwrap());
        be.write_vector(bb, &rhs).unwrap();
        be.write_vector(xb, &start).unwrap();
        let solver = BackendPcg::new(&mut be, None).unwrap();
        let out = solver
            .solve(
                &mut be,
                &mut |be: &mut DeviceBackend, v, o| be.ml_apply(Hessian::Smoother, v, o),
                &mut |be: &mut DeviceBackend, r, z| be.ml_jacobi(r, z),
                None,
                bb,
                xb,
                true,
                0.0,
                N_CG,
            )
            .unwrap();
        assert!(!out.breakdown && out.iterations == N_CG, "{out:?}");
        let xd = be.read_vector(xb).unwrap();
        let res = true_residual(&xd);
        let dx: Vec<f64> = xd.iter().zip(&x).map(|(a, b)| a - b).collect();
        let step: Vec<f64> = x.iter().zip(&start).map(|(a, b)| a - b).collect();
        let rel_a = a_norm(&dx) / a_norm(&step);
        let dec_dev = phi(&start) - phi(&xd);
        let rel_dec = dec_dev / dec_cpu - 1.0;
        eprintln!(
            "full-space Jacobi PCG on {}: decrease of ½dᵀHd − bᵀd {dec_dev:.6e} (f64 {dec_cpu:.6e}, {rel_dec:+.2e}); H-norm difference {rel_a:.2e} of the f64 step; true residual {res:.3e} (f64 {res_cpu:.3e})",
            info
        );
        assert!(
            rel_dec.abs() <= 1e-3,
            "{}: decrease off by {rel_dec:.3e}",
            info
        );
        assert!(rel_a <= 5e-2, "{}: H-norm difference {rel_a:.3e}", info);
    }
}

/// Each level's block-Jacobi PCG on the device (Galerkin products lift → H·x → restrict, the
/// inverted 12×12 blocks, four-lane vector work) against [`jello::solver::pcg::pcg`] in f64 on
/// the same level, H and right-hand side (the restriction of a random full-space vector), from
/// zero, on the beam's real SMS basis and its affine level.
#[test]
fn level_block_jacobi_pcg_matches_the_f64_pcg() {
    use jello::gpu::Device;
    use jello::solver::backend::{Backend, DeviceBackend};
    use jello::solver::multilevel::backend::MultilevelBackend;
    use jello::solver::pcg::{pcg, BackendPcg};
    let mut rng = common::rng("level_block_jacobi_pcg_matches_the_f64_pcg");
    let b = beam();
    let m = &b.model;
    let n = m.num_vertices();
    let h = spd(&b, &mut rng);
    let op = h.op();
    for level in &b.levels {
        let dim = level.dim();
        let mut rhs = vec![0.0; dim];
        level.restrict(&random(&mut rng, 3 * n), &mut rhs);
        let inv = invert_blocks(&op.galerkin_diagonal(level));
        let (mut u, mut hu) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
        let mut galerkin = |q: &[f64], out: &mut [f64]| {
            level.lift(q, &mut u);
            op.apply(&u, &mut hu);
            level.restrict(&hu, out);
        };
        let block = |r: &[f64], z: &mut [f64]| {
            for (hh, blk) in inv.iter().enumerate() {
                for i in 0..HANDLE_DOFS {
                    z[HANDLE_DOFS * hh + i] = (0..HANDLE_DOFS)
                        .map(|j| blk[HANDLE_DOFS * i + j] * r[HANDLE_DOFS * hh + j])
                        .sum();
                }
            }
        };
        let mut q = vec![0.0; dim];
        let cpu = pcg(&mut galerkin, &block, &rhs, &mut q, PCG_TOL, 500);
        assert!(
            !cpu.breakdown && cpu.relative_residual <= PCG_TOL,
            "{cpu:?}"
        );
        let mut devs = vec![Device::cpu()];
        devs.extend(common::gpu_device());
        for dev in devs {
            let info = dev.info().to_string();
            let mut be = DeviceBackend::new(dev, m).unwrap();
            be.ml_attach([Some(level), None], &m.pinned).unwrap();
            be.ml_set_hessians(&op, &op).unwrap();
            be.ml_set_blocks(0, &inv).unwrap();
            let bb = be.flat_vector("b", dim).unwrap();
            let qb = be.flat_vector("q", dim).unwrap();
            be.write_vector(bb, &rhs).unwrap();
            be.write_vector(qb, &vec![f64::NAN; dim]).unwrap();
            let solver = BackendPcg::new(&mut be, Some(dim)).unwrap();
            let out = solver
                .solve(
                    &mut be,
                    &mut |be: &mut DeviceBackend, v, o| be.ml_galerkin(0, v, o),
                    &mut |be: &mut DeviceBackend, r, z| be.ml_block_jacobi(0, r, z),
                    None,
                    bb,
                    qb,
                    false,
                    PCG_TOL,
                    500,
                )
                .unwrap();
            assert!(!out.breakdown, "{out:?}");
            let qd = be.read_vector(qb).unwrap();
            let mut aq = vec![0.0; dim];
            galerkin(&qd, &mut aq);
            let res: Vec<f64> = rhs.iter().zip(&aq).map(|(b, a)| b - a).collect();
            compare_pcg(
                &format!("{} block-Jacobi PCG on {}", level.name, info),
                out.iterations,
                cpu.iterations,
                norm(&res) / norm(&rhs),
            );
        }
    }
}

/// The multilevel Newton step with its direction on the device (`--backend gpu`:
/// [`jello::solver::multilevel::MultilevelSolver::attach_device`]; the twins and the GPU) on the
/// bundled cube stack in contact (IPC, friction; its landing step, after 12 Newton steps),
/// against Newton to 1e-10 and the f64 multilevel solver on the same step. Each run must
/// converge under the scene's own rule and land within the residual bound 2h²‖∇E(x)‖_{M⁻¹} of
/// Newton's x* in the mass norm (the shared helper's argument: E is strongly convex with modulus
/// M/h² near x*); the device and f64 solutions then agree within the sum of their two bounds
/// (triangle inequality through x*) — the f32 direction changes the path, not the minimiser —
/// and its CG counts per level are within 20% of the f64 run's, with the SMS level's coarse
/// correction (default; host f64 on the device path) and without it (block Jacobi alone).
#[test]
fn device_direction_converges_on_a_contact_step() {
    use jello::gpu::Device;
    use jello::solver::{StepSolver, StopRule};
    let built = common::bundled_scene("contact_stack.toml");
    let m = &built.model;
    let h = built.config.h;
    let StopRule::Cn { eps } = built.config.stop else {
        panic!("contact_stack uses cn");
    };
    let state = common::state_after(&built, 12);
    let reference = common::newton_reference(m, &state, h);
    let problem = StepProblem::new(m, &state, h);
    let params = MultilevelParams {
        stop: jello::solver::multilevel::MultilevelStop::Shared(StopRule::Cn { eps }),
        max_iterations: 400,
        ..MultilevelParams::default()
    };
    let run = |device: Option<Device>, params: MultilevelParams| {
        let (mut s, _) = build_solver(m, params, None).unwrap();
        let name = match device {
            Some(d) => {
                let n = d.info().to_string();
                s.attach_device(d, m).unwrap();
                n
            }
            None => "cpu-f64".to_string(),
        };
        let mut x = Vec::new();
        let r = s.step(&problem, m, &mut x, false).unwrap();
        let st = s.last_stats();
        let dist = common::m_dist(m, &x, &reference);
        let bound = common::residual_bound(&problem, m, &x);
        eprintln!(
            "{name}: converged {} in {} iterations (CG affine {} / SMS {} / full {}, {} fallbacks; \
             line-search trials {} on the device, {} on the host), residual {:.2e}, \
             ‖x − x*‖_M = {dist:.2e} (bound {bound:.2e}), max vertex distance {:.2e} m",
            r.converged,
            r.iterations,
            st.affine_cg,
            st.sms_cg,
            st.full_cg,
            st.descent_fallbacks,
            st.ls_device_trials,
            st.ls_host_trials,
            r.residual,
            common::max_dist(&x, &reference)
        );
        assert!(r.converged, "{name}: ended at residual {:e}", r.residual);
        assert!(dist <= bound, "{name}: {dist:e} > {bound:e}");
        // The step's work, device or not: CG per level finest first, every trial counted.
        assert_eq!(
            r.work.cg_iterations,
            vec![st.full_cg, st.sms_cg, st.affine_cg],
            "{name}"
        );
        assert_eq!(
            r.work.line_search_trials,
            st.ls_device_trials + st.ls_host_trials,
            "{name}"
        );
        assert!(r.work.line_search_trials >= r.iterations, "{name}");
        (x, bound, st)
    };
    let (x_cpu, b_cpu, st_cpu) = run(None, params);
    // The same step with the SMS level preconditioned by block Jacobi alone (the coarse
    // correction off): the device's block-Jacobi PCG without its host correction.
    let block_jacobi = MultilevelParams {
        sms_coarse: false,
        ..params
    };
    let (_, _, st_bj) = run(None, block_jacobi);
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu_device());
    for dev in devs {
        let name = dev.info().to_string();
        let (x_dev, b_dev, st) = run(Some(dev), params);
        // The block-Jacobi-only variant on a second device of the same kind.
        let again = if name.starts_with("cpu") {
            Device::cpu()
        } else {
            common::gpu_device().expect("the adapter just used")
        };
        let (_, _, st_dev_bj) = run(Some(again), block_jacobi);
        // f32 round-off moves each level solve's stopping point by an iteration or two (the
        // level tests above) and the Newton path with it; a wrong product, coefficient or
        // correction would change the counts by far more than 20%.
        for (variant, st, want) in [("default", st, st_cpu), ("block Jacobi", st_dev_bj, st_bj)] {
            for (what, got, want) in [
                ("affine", st.affine_cg, want.affine_cg),
                ("SMS", st.sms_cg, want.sms_cg),
                ("full", st.full_cg, want.full_cg),
            ] {
                assert!(
                    got.abs_diff(want) <= 2.max(want / 5),
                    "{name} ({variant}): {what} CG {got} against the f64 run's {want}"
                );
            }
        }
        let dist = common::m_dist(m, &x_dev, &x_cpu);
        eprintln!(
            "{name} vs cpu-f64: ‖Δx‖_M = {dist:.2e} (bound {:.2e}), max vertex distance {:.2e} m",
            b_cpu + b_dev,
            common::max_dist(&x_dev, &x_cpu)
        );
        assert!(
            dist <= b_cpu + b_dev,
            "{name}: {dist:e} against the CPU's solution"
        );
    }
}

/// The runner's choice for `--solver multilevel`: a GPU request runs the direction on the device
/// (the adapter is reported and a step converges), `auto` keeps the f64 CPU path and says why.
#[test]
fn backend_gpu_selects_the_device_direction_and_auto_keeps_the_cpu() {
    use jello::gpu::{Backend, BackendChoice};
    let mut built = common::bundled_scene("contact_stack.toml");
    built.config.solver = "multilevel".parse().unwrap();
    let gpu = |requested| BackendChoice {
        requested,
        backend: Backend::Gpu,
        adapter: None,
        reason: "test".into(),
    };
    let s = jello::runner::setup_on(&built, gpu(Backend::Auto), None).unwrap();
    assert_eq!(s.choice.backend, Backend::Cpu);
    assert!(
        s.choice.reason.contains("--backend gpu"),
        "{}",
        s.choice.reason
    );
    if common::gpu_device().is_none() {
        return;
    }
    let mut s = jello::runner::setup_on(&built, gpu(Backend::Gpu), None).unwrap();
    assert_eq!(s.choice.backend, Backend::Gpu);
    assert_eq!(s.sim.solver_name(), "multilevel");
    let adapter = s.adapter.clone().expect("the device is reported");
    let r = s.sim.step(false).unwrap();
    eprintln!(
        "{adapter}: first step {} iterations, residual {:.2e}",
        r.iterations, r.residual
    );
    assert!(r.converged, "{adapter}: residual {:e}", r.residual);
}

/// The contact half of the device gradient and line-search energies ([`DeviceContact`]:
/// `ipc_pairs`, `ipc_friction`, `ipc_gather`) against the f64 potential on the bundled cube
/// stack's landing step (IPC between the cubes, μ = 0.5, friction lagged at the step's start as
/// the solvers lag it): the barrier κ·Σ m·b, the friction Σ μλ·f₀ and their gradient at three
/// points of the segment from the step's start to Newton's solution, all evaluated on one
/// candidate list swept along the segment. Tolerance 1e-4 relative: f32 positions relative to
/// the centroid and per-pair distance cancellation (`twins::ipc`: ~ε·L/d per pair) measured
/// 4.9e-6 (barrier), 1.2e-7 (friction) and 1.1e-5 (gradient) on the twins and lavapipe; a
/// wrong pair list, κ, frame or obstacle index is off by O(1). Friction computed from f32
/// positions instead of displacements failed it (gradient 2.0e-4: sticking pairs' forces off
/// by up to 6%, `twins::friction`).
#[test]
fn device_contact_energies_and_gradient_match_the_f64_potential() {
    use jello::gpu::Device;
    use jello::solver::multilevel::device_contact::DeviceContact;
    let built = common::bundled_scene("contact_stack.toml");
    let m = &built.model;
    let h = built.config.h;
    let state = common::state_after(&built, 12);
    let x_star = common::newton_reference(m, &state, h);
    let problem = StepProblem::new(m, &state, h);
    problem.begin_contact_step(m);
    let ipc = m.contact.as_deref().expect("contact_stack has IPC contact");
    let lagged = problem.lagged_friction().expect("friction is lagged");
    let kappa = problem.kappa();
    let x0 = problem.x_start.clone();
    let xs0 = problem.contact_positions(ipc, &x0).into_owned();
    let dxs: Vec<[f64; 3]> = problem
        .contact_positions(ipc, &x_star)
        .iter()
        .zip(&xs0)
        .map(|(b, a)| [b[0] - a[0], b[1] - a[1], b[2] - a[2]])
        .collect();
    let candidates = ipc.swept_candidates(&xs0, &dxs).unwrap();
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu_device());
    for mut dev in devs {
        let name = dev.info().to_string();
        let mut dc = DeviceContact::new(&mut dev, &problem, &candidates).unwrap();
        let (np, nf) = dc.counts();
        assert!(
            np > 0 && nf > 0,
            "{name}: {np} candidate and {nf} friction pairs"
        );
        for alpha in [0.0, 0.5, 1.0] {
            let x: Vec<f64> = x0
                .iter()
                .zip(&x_star)
                .map(|(a, b)| a + alpha * (b - a))
                .collect();
            let xs = problem.contact_positions(ipc, &x);
            let active = ipc.active_pairs(&xs).unwrap();
            assert!(active.len() <= np, "the swept list holds the active pairs");
            let mut g64 = vec![0.0; x.len()];
            let barrier64 = kappa * ipc.add_gradient(&active, &xs, kappa, &mut g64);
            let friction64 = lagged.0.add_gradient(&x, &problem.x_hat, &mut g64);
            let mut g = vec![0.0; x.len()];
            let e = dc.evaluate(&mut dev, &x, Some(&mut g)).unwrap();
            let e_only = dc.evaluate(&mut dev, &x, None).unwrap();
            assert_eq!(
                e, e_only,
                "{name}: the energies do not depend on the gradient flag"
            );
            let rb = (e.barrier - barrier64).abs() / barrier64.abs().max(f64::MIN_POSITIVE);
            let rf = (e.friction - friction64).abs() / friction64;
            let rg = norm(&g.iter().zip(&g64).map(|(a, b)| a - b).collect::<Vec<_>>()) / norm(&g64);
            eprintln!(
                "{name} α = {alpha}: {} active of {np} candidates, {nf} friction pairs; barrier \
                 {barrier64:.6e} J (relative error {rb:.2e}), friction {friction64:.6e} J \
                 ({rf:.2e}), gradient ‖∇‖ {:.3e} N ({rg:.2e})",
                active.len(),
                norm(&g64)
            );
            assert!(barrier64 > 0.0, "the landing step is in contact");
            assert!(rb <= 1e-4 && rf <= 1e-4 && rg <= 1e-4, "{name} α = {alpha}");
        }
        dc.free(&mut dev);
    }
}

/// The multilevel line search's device energies ([`DeviceEnergy`]): E(x_t) − E(x) from the
/// kernels against the f64 potential's [`StepProblem::energy_difference`], on a contact step of
/// `contact_stack.toml` (IPC, friction) and on the impact step of `contact_hetero.toml`
/// (moduli 1e5–1e10 Pa, IPC, friction), and on `drop.toml` at impact (no IPC: the ground's
/// barrier is host f64), from the step's start and from halfway to Newton's
/// solution, at trials from 1e-6 to 1 of the way there. The error must stay within the bound
/// the evaluator reports (its `slack`), which the solver's Armijo test trusts to decide on the
/// device; the printed ratio error / bound shows how much room the bound leaves.
#[test]
fn device_line_search_energy_is_within_its_bound() {
    use jello::gpu::Device;
    use jello::solver::backend::DeviceBackend;
    use jello::solver::multilevel::device_energy::{device_backtracking, DeviceEnergy};
    let (drop, drop_state) = common::drop_at_impact();
    let cases = [
        (
            "contact_stack.toml",
            common::bundled_scene("contact_stack.toml"),
            Some(12),
        ),
        (
            "contact_hetero.toml",
            common::bundled_scene("contact_hetero.toml"),
            Some(3),
        ),
        ("drop.toml at impact", drop, None),
    ];
    for (scene, built, steps) in cases {
        let m = &built.model;
        let h = built.config.h;
        let state = match steps {
            Some(k) => common::state_after(&built, k),
            None => drop_state.clone(),
        };
        let x_star = common::newton_reference(m, &state, h);
        let problem = StepProblem::new(m, &state, h);
        problem.begin_contact_step(m);
        let x0 = problem.x_start.clone();
        // The evaluator works on a device backend's model: one per scene and device.
        let mut devs = vec![Device::cpu()];
        devs.extend(common::gpu_device());
        for d in devs {
            let name = d.info().to_string();
            let mut backend = DeviceBackend::new(d, m).unwrap();
            let dev = &mut backend;
            let mut de = DeviceEnergy::new(dev).unwrap();
            let mut worst: f64 = 0.0;
            for from in [0.0, 0.5] {
                let x: Vec<f64> = x0
                    .iter()
                    .zip(&x_star)
                    .map(|(a, b)| a + from * (b - a))
                    .collect();
                let d: Vec<f64> = x.iter().zip(&x_star).map(|(a, b)| b - a).collect();
                de.begin(dev, &problem, &x, &d, 1.0).unwrap();
                for alpha in [1.0, 0.5, 1e-1, 1e-2, 1e-3, 1e-4, 1e-6] {
                    let xt: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + alpha * b).collect();
                    let want = problem.energy_difference(m, &x, &xt);
                    let got = de.difference(dev, &problem, &xt).unwrap();
                    let err = (got.value - want).abs();
                    eprintln!(
                        "{scene} {name} from {from} α = {alpha:.0e}: ΔE f64 {want:.6e} J, \
                         device {:.6e} J, error {err:.2e} J, bound {:.2e} J ({:.2})",
                        got.value,
                        got.slack,
                        err / got.slack
                    );
                    assert!(
                        want.is_finite(),
                        "{scene}: the path to Newton's solution is feasible"
                    );
                    assert!(
                        err <= got.slack,
                        "{scene} {name} from {from} α = {alpha}: error {err:e} J over the bound {:e} J",
                        got.slack
                    );
                    worst = worst.max(err / got.slack);
                    if from == 0.0 && alpha == 1.0 {
                        // The full step's decrease must be far above the bound, or the device
                        // could never decide a Newton step's first trial.
                        assert!(
                            got.slack < 0.05 * want.abs(),
                            "{scene} {name}: bound {:e} J against ΔE = {want:e} J",
                            got.slack
                        );
                    }
                }
            }
            eprintln!("{scene} {name}: largest error / bound {worst:.3}");
            // The search itself: from the start along the way to Newton's solution and along
            // 4× and 16× that (the filter and the halvings then choose α), and from 1e-5 of
            // the way short of it (a decrease below the device's bound: the host decides), the
            // device search accepts the α the f64 search accepts.
            let near: Vec<f64> = x0
                .iter()
                .zip(&x_star)
                .map(|(a, b)| b + 1e-5 * (a - b))
                .collect();
            for (from, scale) in [(&x0, 1.0), (&x0, 4.0), (&x0, 16.0), (&near, 1.0)] {
                let mut g = vec![0.0; from.len()];
                let e0 = problem.energy_change(m, from);
                problem.gradient(m, from, &mut g);
                let d: Vec<f64> = from
                    .iter()
                    .zip(&x_star)
                    .map(|(a, b)| scale * (b - a))
                    .collect();
                let gd: f64 = g.iter().zip(&d).map(|(a, b)| a * b).sum();
                let mut xn = Vec::new();
                let want = jello::solver::backtracking(&problem, m, from, &d, e0, gd, &mut xn);
                let got =
                    device_backtracking(&mut de, dev, &problem, m, from, &d, e0, true, gd, &mut xn)
                        .unwrap();
                let close = std::ptr::eq(from, &near);
                eprintln!(
                    "{scene} {name} search {} along {scale}·(x* − x): f64 α = {} in {} trials, \
                     device α = {} ({} trials on the device, {} on the host)",
                    if close { "near x*" } else { "from the start" },
                    want.alpha,
                    want.trials,
                    got.result.alpha,
                    got.device_trials,
                    got.host_trials
                );
                assert!(want.accepted && got.result.accepted);
                assert_eq!(got.result.alpha, want.alpha, "{scene} {name} ×{scale}");
                if close {
                    assert!(
                        got.host_trials > 0,
                        "{scene} {name}: near x* the host decides"
                    );
                }
                assert!(
                    (got.result.energy - want.energy).abs() <= 1e-3 * want.energy.abs(),
                    "{scene} {name} ×{scale}: energy {} against {}",
                    got.result.energy,
                    want.energy
                );
            }
            de.free(dev);
        }
    }
}

/// `dev_rounding` (per group of 256 terms, Σ_t Σ_c Σ_k |f|·|p| over the terms' corner forces
/// and the coordinates their stencils read; the line search's round-off bound) against an f64
/// evaluation, twin and GPU, on random forces, coordinates and stencils, written at an offset
/// into a NaN-poisoned output. All terms are ≥ 0, so the f32 sums (12 products per corner set,
/// an 8-level tree) err by at most ~25·2⁻²⁴ relative; tolerance 1e-5.
#[test]
fn dev_rounding_matches_f64() {
    let mut rng = common::rng("dev_rounding_matches_f64");
    let nc: usize = 500 + rng.random_range(0..500);
    let n: usize = 1000 + rng.random_range(0..2000);
    let groups = n.div_ceil(256);
    let off: usize = 3 + rng.random_range(0..5);
    let r = |rng: &mut ChaCha8Rng| rng.random_range(-1.0f32..1.0);
    let forces: Vec<GpuVec4> = (0..4 * n)
        .map(|_| {
            [
                1e3 * r(&mut rng),
                r(&mut rng),
                1e-3 * r(&mut rng),
                r(&mut rng),
            ]
        })
        .collect();
    let coords: Vec<GpuVec4> = (0..nc)
        .map(|_| [r(&mut rng), 0.1 * r(&mut rng), r(&mut rng), 7.0])
        .collect();
    let stencils: Vec<[u32; 4]> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(0..nc as u32)))
        .collect();
    let mut want = vec![0.0f64; groups];
    for (t, s) in stencils.iter().enumerate() {
        for (c, &v) in s.iter().enumerate() {
            for k in 0..3 {
                want[t / 256] +=
                    (forces[4 * t + c][k] as f64).abs() * (coords[v as usize][k] as f64).abs();
            }
        }
    }
    let data = [
        Data::V(forces),
        Data::V(coords),
        Data::T(stencils),
        common::kernels::nan_f(off + groups),
    ];
    let params = Params {
        u1: off as u32,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::DevRounding, &data, params, n as u32);
    for (name, out) in [("twin", Some(&cpu)), ("gpu", gpu.as_ref())] {
        let Some(out) = out else { continue };
        let got = &out[3][off..off + groups];
        let err = got
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (g as f64 - w).abs() / w)
            .fold(0.0, f64::max);
        eprintln!("dev_rounding {name}: {groups} groups, largest relative error {err:.2e}");
        assert!(err <= 1e-5, "{name}: {err:e}");
        assert!(
            out[3][..off].iter().all(|v| v.is_nan()),
            "{name}: wrote below its offset"
        );
    }
}
