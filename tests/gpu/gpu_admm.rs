//! ADMM-PD on the device backend (`jello::solver::admm::AdmmBackend` for `DeviceBackend`):
//! every `admm_*` kernel against its CPU twin on the GPU (fresh random inputs, seed printed;
//! outputs poisoned with NaN so unwritten entries show) and the twin against an f64
//! evaluation of the same formula (the f64 CPU proxes of `jello::solver::admm::prox`); ADMM on
//! the twins against the f64 CPU ADMM; `jello compare --solver admm` (GPU vs f64 CPU) over 50
//! steps of the bundled scenes without obstacles; the CLI on the device, and what crosses the
//! bus per iteration (printed, not asserted).
//!
//! GPU parts FAIL without an adapter unless `JELLO_SKIP_GPU_TESTS=1`. Software Vulkan:
//!   WGPU_BACKEND=vulkan XDG_RUNTIME_DIR=/tmp/xdg cargo test --test gpu gpu_admm::

use crate::common;

use common::assert_close;
use common::kernels::{nan_f, nan_v4, run_both, Data};
use jello::gpu::twins::admm::{ADMM_GROUP, ADMM_PROX_HYPERELASTIC, ADMM_PROX_PD, ADMM_RESET};
use jello::gpu::{
    Device, ElemParams, GpuMat3, GpuModel, GpuVec4, GpuVertexInfo, Kernel, Params, VertexCsr,
};
use jello::material::{Material, MaterialModel};
use jello::mesh::TetMesh;
use jello::problem::StepProblem;
use jello::scene::Scene;
use jello::sim::Simulation;
use jello::solver::admm::prox::{prox_hyperelastic, prox_pd};
use jello::solver::admm::{AdmmParams, AdmmSolver};
use jello::solver::backend::DeviceBackend;
use jello::solver::qn::QnMode;
use jello::solver::StepSolver;
use nalgebra::{Matrix3, Vector3};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;

fn mesh() -> TetMesh {
    jello::mesh::box_grid([0.0; 3], [1.0, 0.5, 0.5], [6, 3, 3])
}

fn rest_x(m: &TetMesh) -> Vec<GpuVec4> {
    m.positions
        .iter()
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
        .collect()
}

fn jitter(rng: &mut ChaCha8Rng, x: &[GpuVec4], s: f32) -> Vec<GpuVec4> {
    x.iter()
        .map(|p| {
            let mut q = *p;
            for c in q.iter_mut().take(3) {
                *c += rng.random_range(-s..s);
            }
            q
        })
        .collect()
}

fn rand_m3(rng: &mut ChaCha8Rng, s: f32, around_identity: bool) -> GpuMat3 {
    let mut r = [[0.0f32; 3]; 3];
    for (i, row) in r.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = rng.random_range(-s..s) + if around_identity && i == j { 1.0 } else { 0.0 };
        }
    }
    GpuMat3::from_rows(r)
}

fn to64(m: &GpuMat3) -> Matrix3<f64> {
    Matrix3::from_fn(|r, c| m.get(r, c) as f64)
}

/// Element constants of `mesh` as f64 and as the device records.
fn rest(
    mesh: &TetMesh,
    mat: &Material,
) -> (
    Vec<jello::material::ElementRest<f64>>,
    Vec<GpuMat3>,
    Vec<ElemParams>,
) {
    let rest: Vec<_> = mesh
        .tets
        .iter()
        .map(|t| jello::material::ElementRest::new(&t.map(|i| mesh.positions[i as usize])).unwrap())
        .collect();
    let mats = vec![*mat; rest.len()];
    let (dm, ep) = jello::gpu::element_records(&rest, &mats).unwrap();
    (rest, dm, ep)
}

/// f64 F of element `e` from f32 positions.
fn f64_f(x: &[GpuVec4], t: &[u32; 4], r: &jello::material::ElementRest<f64>) -> Matrix3<f64> {
    let g = r.shape_gradients();
    let mut f = Matrix3::zeros();
    for (a, &v) in t.iter().enumerate() {
        let p = x[v as usize];
        f += Vector3::new(p[0] as f64, p[1] as f64, p[2] as f64) * g[a].transpose();
    }
    f
}

/// `admm_local` for every material with the hyperelastic prox, the PD prox where it applies,
/// and the reset: GPU vs twin (z and corner forces relative ≤ 2e-5, ū — a difference of
/// nearby matrices — ≤ 1e-4; measured on lavapipe ≤ 2e-6: the σ-Newton runs in f32 on both
/// and may stop one iteration apart on another GPU), and the twin's z against the f64 prox of
/// the same v (≤ 1e-5; measured ≤ 6e-7: f32 SVD and Newton against f64), its ū = v − z (≤ 1e-5
/// of ‖v‖) and corner forces (≤ 2e-5) against f64 evaluations of their definitions.
#[test]
fn admm_local_matches() {
    let mut rng = common::rng("admm_local_matches");
    let mesh = mesh();
    let ne = mesh.num_tets();
    let mut cases: Vec<(Material, u32)> = Vec::new();
    for model in [
        MaterialModel::StableNeoHookean,
        MaterialModel::StableNeoHookeanVbd,
        MaterialModel::FixedCorotated,
        MaterialModel::NeoHookean,
        MaterialModel::StVk,
        MaterialModel::Arap,
        MaterialModel::Linear,
    ] {
        cases.push((
            Material::from_young_poisson(model, 1e5, 0.4).unwrap(),
            ADMM_PROX_HYPERELASTIC,
        ));
    }
    for model in [
        MaterialModel::Arap,
        MaterialModel::FixedCorotated,
        MaterialModel::Linear,
    ] {
        cases.push((Material::new(model, 4e4, 0.0).unwrap(), ADMM_PROX_PD));
    }
    cases.push((cases[0].0, ADMM_RESET));
    for (mat, mode) in cases {
        let (rest, dm, ep) = rest(&mesh, &mat);
        assert_eq!(ep[0].model, GpuModel::from_material(mat.model) as u32);
        // Moves of ~20% of an element's size: strongly deformed but not inverted elements.
        let x = jitter(&mut rng, &rest_x(&mesh), 0.03);
        let k = 2.0 * mat.mu + mat.lambda;
        let w2: Vec<f32> = rest
            .iter()
            .map(|r| (r.volume * k * rng.random_range(0.25..4.0)) as f32)
            .collect();
        let z: Vec<GpuMat3> = (0..ne).map(|_| rand_m3(&mut rng, 0.1, true)).collect();
        let u: Vec<GpuMat3> = (0..ne).map(|_| rand_m3(&mut rng, 0.05, false)).collect();
        let data = [
            Data::V(x.clone()),
            Data::T(mesh.tets.clone()),
            Data::M(dm.clone()),
            Data::E(ep.clone()),
            Data::F(w2.clone()),
            Data::M(z.clone()),
            Data::M(u.clone()),
            nan_v4(8 * ne),
        ];
        let params = Params::new().u0(mode);
        let (cpu, gpu) = run_both(Kernel::AdmmLocal, &data, params, ne as u32);
        let what = format!("admm_local {} mode {mode}", mat.model.name());
        let zc: &[GpuMat3] = bytemuck::cast_slice(&cpu[5]);
        let uc: &[GpuMat3] = bytemuck::cast_slice(&cpu[6]);
        // f64 references from the same f32 inputs.
        let (mut z64, mut u64, mut c64) = (Vec::new(), Vec::new(), Vec::new());
        for e in 0..ne {
            let f = f64_f(&x, &mesh.tets[e], &rest[e]);
            let (zn, un) = if mode == ADMM_RESET {
                (f, Matrix3::zeros())
            } else {
                let v = f + to64(&u[e]);
                let zn = if mode == ADMM_PROX_PD {
                    prox_pd(&mat, rest[e].volume, &v, w2[e] as f64).unwrap()
                } else {
                    prox_hyperelastic(&mat, rest[e].volume, &v, w2[e] as f64)
                };
                (zn, v - zn)
            };
            let g = rest[e].shape_gradients();
            for (a, ga) in g.iter().enumerate() {
                let r = (zn - un) * ga * w2[e] as f64;
                let d = (zn - to64(&z[e])) * ga * w2[e] as f64;
                c64.push((a, r, d));
            }
            z64.extend(zn.iter().map(|&v| v as f32));
            u64.extend(un.iter().map(|&v| v as f32));
        }
        let unpad = |m: &[GpuMat3]| -> Vec<f32> {
            m.iter()
                .flat_map(|m| m.cols.iter().flat_map(|c| c[..3].to_vec()))
                .collect()
        };
        // Reset: z = F exactly (f32), ū = 0.
        assert_close(&unpad(zc), &z64, 1e-5, &format!("{what} z twin vs f64"));
        if mode == ADMM_RESET {
            assert!(unpad(uc).iter().all(|&v| v == 0.0), "{what}: ū = 0");
        } else {
            // ū = v − z is a difference of nearby matrices: measured against v's scale.
            let norm = |a: &[f32]| a.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
            let vs: Vec<f32> = z64.iter().zip(&u64).map(|(a, b)| a + b).collect();
            let du: Vec<f32> = unpad(uc).iter().zip(&u64).map(|(a, b)| a - b).collect();
            let e = norm(&du) / norm(&vs);
            eprintln!("{what} ū twin vs f64: {e:.2e} of ‖v‖ (tolerance 1e-5)");
            assert!(e <= 1e-5, "{what}: ū {e:e}");
            let cc: &[GpuVec4] = bytemuck::cast_slice(&cpu[7]);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for (i, (a, r, d)) in c64.iter().enumerate() {
                let e = i / 4;
                got.extend_from_slice(&cc[8 * e + a][..3]);
                got.extend_from_slice(&cc[8 * e + 4 + a][..3]);
                want.extend(r.iter().chain(d.iter()).map(|&v| v as f32));
            }
            assert_close(&got, &want, 2e-5, &format!("{what} corners twin vs f64"));
        }
        if let Some(gv) = gpu {
            for (i, name, tol) in [(5, "z", 2e-5), (6, "u", 1e-4)] {
                assert_close(&gv[i], &cpu[i], tol, &format!("{what} {name} gpu vs cpu"));
            }
            if mode != ADMM_RESET {
                assert_close(&gv[7], &cpu[7], 2e-5, &format!("{what} corners gpu vs cpu"));
            }
        }
    }
}

/// `admm_gather` on random corner forces with a random pin set: GPU vs twin (rhs 1e-6, the
/// dual partials 1e-5), and the twin against the f64 sums of the same corners.
#[test]
fn admm_gather_matches() {
    let mut rng = common::rng("admm_gather_matches");
    let mesh = mesh();
    let (nv, ne) = (mesh.num_vertices(), mesh.num_tets());
    let csr = VertexCsr::new(&mesh.tets, nv).unwrap();
    let corner: Vec<GpuVec4> = (0..8 * ne)
        .map(|_| {
            [
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
                0.0,
            ]
        })
        .collect();
    let vinfo: Vec<GpuVertexInfo> = (0..nv)
        .map(|_| GpuVertexInfo {
            mass: 1.0,
            free: rng.random_bool(0.8) as u32,
        })
        .collect();
    let groups = nv.div_ceil(ADMM_GROUP);
    let off = 3;
    let mut out = vec![0.0f32; off];
    out.extend(vec![f32::NAN; groups]);
    let data = [
        Data::V(corner.clone()),
        Data::U(csr.offsets.clone()),
        Data::U(csr.tets.clone()),
        Data::U(csr.local.clone()),
        Data::I(vinfo.clone()),
        nan_v4(nv),
        Data::F(out),
    ];
    let params = Params {
        u1: off as u32,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::AdmmGather, &data, params, nv as u32);
    let mut rhs = vec![[0.0f64; 3]; nv];
    let mut dual = vec![[0.0f64; 3]; nv];
    for (e, t) in mesh.tets.iter().enumerate() {
        for (a, &v) in t.iter().enumerate() {
            for c in 0..3 {
                rhs[v as usize][c] += corner[8 * e + a][c] as f64;
                dual[v as usize][c] += corner[8 * e + 4 + a][c] as f64;
            }
        }
    }
    let want: Vec<f32> = rhs
        .iter()
        .flat_map(|r| [r[0] as f32, r[1] as f32, r[2] as f32, 0.0])
        .collect();
    assert_close(&cpu[5], &want, 1e-6, "admm_gather rhs twin vs f64");
    let s2: f64 = (0..nv)
        .filter(|&v| vinfo[v].free != 0)
        .map(|v| dual[v].iter().map(|d| d * d).sum::<f64>())
        .sum();
    let got: f64 = cpu[6][off..].iter().map(|&v| v as f64).sum();
    eprintln!("admm_gather dual: twin {got:.6e}, f64 {s2:.6e}");
    assert!(((got - s2) / s2).abs() < 1e-5, "{got} vs {s2}");
    assert!(
        cpu[6][..off].iter().all(|&v| v == 0.0),
        "left the words before u1 alone"
    );
    if let Some(gv) = gpu {
        assert_close(&gv[5], &cpu[5], 1e-6, "admm_gather rhs gpu vs cpu");
        assert_close(
            &gv[6],
            &cpu[6],
            1e-5,
            "admm_gather dual partials gpu vs cpu",
        );
    }
}

/// `admm_primal`: GPU vs twin (partials 1e-5), the twin's sum against f64 Σ w²‖F − z‖².
#[test]
fn admm_primal_matches() {
    let mut rng = common::rng("admm_primal_matches");
    let mesh = mesh();
    let ne = mesh.num_tets();
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.4).unwrap();
    let (rest, dm, _) = rest(&mesh, &mat);
    let x = jitter(&mut rng, &rest_x(&mesh), 0.03);
    let w2: Vec<f32> = (0..ne).map(|_| rng.random_range(0.5..2.0)).collect();
    let z: Vec<GpuMat3> = (0..ne).map(|_| rand_m3(&mut rng, 0.2, true)).collect();
    let groups = ne.div_ceil(ADMM_GROUP);
    let data = [
        Data::V(x.clone()),
        Data::T(mesh.tets.clone()),
        Data::M(dm),
        Data::F(w2.clone()),
        Data::M(z.clone()),
        nan_f(groups + 1),
    ];
    let params = Params {
        u1: 1,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::AdmmPrimal, &data, params, ne as u32);
    let want: f64 = (0..ne)
        .map(|e| w2[e] as f64 * (f64_f(&x, &mesh.tets[e], &rest[e]) - to64(&z[e])).norm_squared())
        .sum();
    let got: f64 = cpu[5][1..].iter().map(|&v| v as f64).sum();
    eprintln!("admm_primal: twin {got:.6e}, f64 {want:.6e}");
    assert!(((got - want) / want).abs() < 1e-5, "{got} vs {want}");
    assert!(cpu[5][0].is_nan(), "left the word before u1 alone");
    if let Some(gv) = gpu {
        assert_close(
            &gv[5][1..],
            &cpu[5][1..],
            1e-5,
            "admm_primal partials gpu vs cpu",
        );
    }
}

fn scene(name: &str) -> (std::path::PathBuf, jello::scene::BuiltScene) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(name);
    let built = Scene::load(&p).unwrap().build().unwrap();
    (p, built)
}

fn diagonal(m: &jello::problem::Model) -> f64 {
    m.mesh
        .bounding_box()
        .map(|(lo, hi)| ((0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>()).sqrt())
        .unwrap()
}

fn worst_vertex(a: &[f64], b: &[f64]) -> f64 {
    a.chunks(3)
        .zip(b.chunks(3))
        .map(|(p, q)| {
            ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
        })
        .fold(0.0, f64::max)
}

/// The same ADMM loop in f32 on the kernels' CPU twins and in f64: over 20 steps of the twist
/// scene both converge every step (ε = 1e-5) with the same iteration counts and the
/// trajectories stay within 1e-5 of the diagonal (measured 3.8e-7: the x-step's f64 solve
/// keeps the f32 local steps from drifting). The device's z and ū after a step satisfy the
/// prox's optimality w²ū = ∇U(z) to f32 precision (T5 on the device: ≤ 2e-5 relative,
/// measured 2.4e-6), and its `--trace` records carry r and s. No GPU needed.
#[test]
fn admm_on_the_cpu_twins_follows_the_f64_admm() {
    let (_, built) = scene("twist.toml");
    let m = &built.model;
    let st = m.initial_state(&built.velocity);
    let h = built.config.h;
    let dev = DeviceBackend::new(Device::cpu(), m).unwrap();
    let mut f32_sim = Simulation::new(
        m.clone(),
        st.clone(),
        h,
        Box::new(AdmmSolver::with_backend(m, dev, AdmmParams::default()).unwrap()),
    )
    .unwrap();
    let mut f64_sim = Simulation::new(
        m.clone(),
        st.clone(),
        h,
        Box::new(AdmmSolver::new(m, AdmmParams::default()).unwrap()),
    )
    .unwrap();
    let diag = diagonal(m);
    let mut worst = 0.0f64;
    let (mut ia, mut ib) = (0, 0);
    for step in 1..=20 {
        let a = f32_sim.step(false).unwrap();
        let b = f64_sim.step(false).unwrap();
        assert!(a.converged && b.converged, "step {step}");
        ia += a.iterations;
        ib += b.iterations;
        worst = worst.max(worst_vertex(&f32_sim.state.x, &f64_sim.state.x) / diag);
    }
    eprintln!("twins vs f64: worst deviation {worst:.2e} of the diagonal, iterations {ia} vs {ib}");
    assert!(worst < 1e-5, "{worst:e}");
    assert_eq!(ia, ib, "iteration counts");
    assert!(worst > 0.0, "f32 and f64 runs cannot be identical");

    // T5 on the device after one step from the f64 run's state (the plain iteration: an
    // Anderson mix of (z, ū) is not a z-step's output, so the identity holds for z-steps only).
    let dev = DeviceBackend::new(Device::cpu(), m).unwrap();
    let mut s = AdmmSolver::with_backend(m, dev, AdmmParams::plain()).unwrap();
    let problem = StepProblem::new(m, &f64_sim.state, h);
    let mut x = Vec::new();
    let r = s.step(&problem, m, &mut x, true).unwrap();
    let trace = r.trace.unwrap();
    assert_eq!(trace.len(), r.iterations + 1);
    for t in &trace[1..] {
        let (p, d) = (t.primal.unwrap(), t.dual.unwrap());
        assert!(
            p.is_finite() && p > 0.0 && d.is_finite() && d > 0.0,
            "r {p}, s {d}"
        );
    }
    let (z, u, w2) = s.read_local_state().unwrap();
    let mut worst_t5 = 0.0f64;
    for e in 0..z.len() {
        let grad = jello::material::pk1(&m.materials[e], &z[e]) * m.rest[e].volume;
        let err = (u[e] * w2[e] - grad).norm();
        worst_t5 = worst_t5.max(err / (w2[e] * (1.0 + z[e].norm() + u[e].norm())));
    }
    eprintln!("device T5: max ‖w²ū − ∇U(z)‖ / (w²(1 + ‖z‖ + ‖ū‖)) = {worst_t5:.2e}");
    assert!(worst_t5 < 2e-5, "{worst_t5:e}");
}

/// `jello compare --solver admm`: the device ADMM on the GPU against the f64 CPU ADMM, 50
/// steps of every bundled scene without obstacles, within 1e-3 of the diagonal (`jello
/// compare`'s default bound); measured figures in the output and in `src/solver/admm/mod.rs`.
#[test]
fn admm_gpu_matches_cpu_over_50_steps() {
    if common::gpu_device().is_none() {
        return;
    }
    for name in ["twist.toml", "cantilever.toml", "stiff_soft.toml"] {
        let (path, mut built) = scene(name);
        assert!(built.model.obstacles.is_empty(), "{name}");
        built.config.solver = "admm".parse().unwrap();
        let t0 = std::time::Instant::now();
        let report = jello::compare::compare(&path, &built, 50).unwrap();
        let its: (usize, usize) = report.steps.iter().fold((0, 0), |a, s| {
            (a.0 + s.iterations_cpu, a.1 + s.iterations_gpu)
        });
        eprintln!(
            "{name}: worst {:.2e}, iterations cpu {} gpu {} ({}, {:.1} s)",
            report.worst(),
            its.0,
            its.1,
            report.adapter,
            t0.elapsed().as_secs_f64()
        );
        assert!(report.worst() < 1e-3, "{name}: {:e}", report.worst());
    }
}

/// Through the binary: `--solver admm --backend gpu` runs the twist scene; a scene with an
/// obstacle is one line on stderr and a non-zero exit, no panic.
#[test]
fn cli_runs_admm_on_the_gpu() {
    if common::gpu_device().is_none() {
        return;
    }
    let dir = common::cli::tmp_dir("gpu_admm", "cli");
    let scenes = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes");
    let out = dir.join("out");
    let run = |scene: &str| {
        let path = scenes.join(scene);
        common::cli::jello(&[
            "run",
            path.to_str().unwrap(),
            "--solver",
            "admm",
            "--steps",
            "3",
            "--backend",
            "gpu",
            "--out",
            out.to_str().unwrap(),
            "--overwrite",
        ])
    };
    let o = run("twist.toml");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats = std::fs::read_to_string(out.join("stats.json")).unwrap();
    assert!(stats.contains("admm"), "{stats}");
    let o = run("drop.toml");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("obstacles[0]"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What crosses the bus per ADMM iteration and its share of the iteration time: steps of 20
/// iterations (the paper's fixed count, no per-iteration gradient) of the twist scene (525
/// vertices, 3 steps) and of a clamped 40×8×8-cell bar (3,321 vertices, the size of the
/// paper's Table I bar; 1 step) on the GPU and on the twins: the x-step's transfers (rhs read,
/// positions written; the wait for the local step before them counted apart) and its host
/// solve against the whole. Printed for the docs, not asserted (speed claims live in benches);
/// asserted: 32·n bytes per iteration.
#[test]
fn admm_bus_traffic_per_iteration() {
    let (_, built) = scene("twist.toml");
    let mesh = jello::mesh::box_grid([0.0; 3], [1.0, 0.2, 0.2], [40, 8, 8]);
    let pin = common::pin_where(&mesh, |p| p[0] < 1e-9, jello::problem::Script::Fixed);
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.4).unwrap();
    let bar = common::one_body(mesh, mat, [0.0, -9.81, 0.0], vec![pin], vec![], 1e-3);
    let cases = [
        (
            "twist",
            built.model.clone(),
            built.model.initial_state(&built.velocity),
            built.config.h,
            3,
        ),
        (
            "bar",
            bar.clone(),
            bar.initial_state(&vec![[0.0; 3]; bar.num_vertices()]),
            1.0 / 30.0,
            1,
        ),
    ];
    for (scene_name, m, start, h, steps) in &cases {
        let mut devices = vec![("twins", Device::cpu())];
        if let Some(d) = common::gpu_device() {
            devices.push(("gpu", d));
        }
        for (name, dev) in devices {
            let adapter = dev.info().to_string();
            let b = DeviceBackend::new(dev, m).unwrap();
            let params = AdmmParams {
                mode: QnMode::Fixed(20),
                ..AdmmParams::default()
            };
            let mut s = AdmmSolver::with_backend(m, b, params).unwrap();
            let mut state = start.clone();
            let (mut wall, mut iterations) = (0.0, 0);
            for _ in 0..*steps {
                let problem = StepProblem::new(m, &state, *h);
                let mut x = Vec::new();
                let r = s.step(&problem, m, &mut x, false).unwrap();
                wall += r.wall_ms;
                iterations += r.iterations;
                state.v = x.iter().zip(&state.x).map(|(a, b)| (a - b) / h).collect();
                state.x = x;
            }
            let st = s.backend().host_solve_stats();
            assert_eq!(st.calls, iterations);
            assert_eq!(st.bytes, iterations * 32 * m.num_vertices());
            let per = |v: f64| v / iterations as f64;
            eprintln!(
                "{scene_name} on {name} ({adapter}): {} vertices, {iterations} iterations, \
                 {:.3} ms/iteration; per iteration {} B across the bus, transfers {:.3} ms \
                 ({:.1}%), host solve {:.3} ms ({:.1}%), waiting for the local step before \
                 them {:.3} ms",
                m.num_vertices(),
                per(wall),
                st.bytes / iterations,
                per(st.transfer_ms - st.wait_ms),
                100.0 * (st.transfer_ms - st.wait_ms) / wall,
                per(st.host_ms),
                100.0 * st.host_ms / wall,
                per(st.wait_ms),
            );
        }
    }
}

/// What ADMM refuses is refused on a GPU request too, in one line before any device is made:
/// a static solve.
#[test]
fn a_static_solve_on_the_gpu_is_one_line() {
    let (_, mut built) = scene("twist.toml");
    built.config.solver = "admm".parse().unwrap();
    built.config.static_solve = true;
    let choice = jello::gpu::BackendChoice {
        requested: jello::gpu::Backend::Gpu,
        backend: jello::gpu::Backend::Gpu,
        adapter: None,
        reason: "test".into(),
    };
    let msg = jello::runner::setup_on(&built, choice, None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("admm") && msg.contains("static") && !msg.contains('\n'),
        "{msg}"
    );
}

/// The PD z-step through the whole loop: a clamped ARAP beam under gravity, 5 steps of 15
/// fixed iterations with `prox = "pd"` on the twins and in f64 stay within 1e-5 of the
/// diagonal of each other (the x-step's f64 solve on f32 right-hand sides), and the two
/// backends report the same r and s per iteration to 1e-3 of the step's largest (r and s fall
/// towards the f32 floor, so each iteration's own value is no scale).
#[test]
fn pd_prox_on_the_twins_follows_the_f64_admm() {
    let mesh = jello::mesh::box_grid([0.0; 3], [1.0, 0.2, 0.2], [10, 2, 2]);
    let pin = common::pin_where(&mesh, |p| p[0] < 1e-9, jello::problem::Script::Fixed);
    let mat = Material::new(MaterialModel::Arap, 4e4, 0.0).unwrap();
    let m = common::one_body(mesh, mat, [0.0, -9.81, 0.0], vec![pin], vec![], 1e-3);
    let params = AdmmParams {
        prox: jello::solver::admm::ProxKind::Pd,
        mode: QnMode::Fixed(15),
        ..AdmmParams::default()
    };
    let dev = DeviceBackend::new(Device::cpu(), &m).unwrap();
    let mut a = AdmmSolver::with_backend(&m, dev, params).unwrap();
    let mut b = AdmmSolver::new(&m, params).unwrap();
    let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let h = 0.01;
    let diag = diagonal(&m);
    let (mut worst, mut worst_rs) = (0.0f64, 0.0f64);
    for _ in 0..5 {
        let problem = StepProblem::new(&m, &state, h);
        let (mut xa, mut xb) = (Vec::new(), Vec::new());
        a.step(&problem, &m, &mut xa, false).unwrap();
        b.step(&problem, &m, &mut xb, false).unwrap();
        worst = worst.max(worst_vertex(&xa, &xb) / diag);
        let top = |f: fn(&jello::solver::admm::AdmmIteration) -> f64| {
            b.last_step().iter().map(f).fold(0.0, f64::max)
        };
        let (rmax, smax) = (top(|i| i.primal), top(|i| i.dual));
        for (ia, ib) in a.last_step().iter().zip(b.last_step()) {
            worst_rs = worst_rs
                .max((ia.primal - ib.primal).abs() / rmax)
                .max((ia.dual - ib.dual).abs() / smax);
        }
        state.v = xb.iter().zip(&state.x).map(|(p, q)| (p - q) / h).collect();
        state.x = xb;
    }
    eprintln!(
        "pd prox, twins vs f64: positions {worst:.2e} of the diagonal, r and s {worst_rs:.2e}"
    );
    assert!(worst < 1e-5 && worst > 0.0, "{worst:e}");
    assert!(worst_rs < 1e-3, "{worst_rs:e}");
}
