//! DOT on the device backend: the same loop in f32 (the kernels' CPU twins, and the GPU
//! through `jello compare`) against the f64 DOT, and its device inputs (element Hessians at
//! x_start from the `elastic` kernel, `dev_curvature`) against f64. The subdomain factors are
//! f64 host work on both; what differs is the f32 gradient, energies, element Hessians, step
//! filter, curvature and L-BFGS vector work.

use crate::common;

use common::assert_close;
use common::kernels::{nan_f, run_both, Data};
use jello::gpu::twins::backend::dev_groups;
use jello::gpu::{Device, GpuMat3, GpuVec4, Kernel, Params};
use jello::material::EigenFilter;
use jello::problem::StepProblem;
use jello::solver::backend::{CpuBackend, DeviceBackend, PotentialBackend};
use jello::solver::dot::{DotParams, DotSolver};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// DOT (s = 3) in f32 on the kernels' CPU twins and in f64: both converge every step of the
/// cantilever and the trajectories stay within 1e-4 of the diagonal over 30 steps. Each run
/// stops somewhere within what ε = 1e-5 allows, but DOT converges superlinearly, so both land
/// far inside it: measured 6.4e-7 with the same 118 iterations (QN's twins: 6.1e-4). No GPU
/// needed.
#[test]
fn dot_on_the_cpu_twins_follows_the_f64_dot() {
    let built = common::bundled_scene("cantilever.toml");
    let m = &built.model;
    let params = DotParams {
        subdomains: 3,
        ..DotParams::default()
    };
    let dev = DeviceBackend::new(Device::cpu(), m).unwrap();
    let cpu = CpuBackend::new(m.num_vertices());
    let (worst, ia, ib) = common::lockstep_deviation(
        &built,
        Box::new(DotSolver::new(m, dev, params).unwrap()),
        Box::new(DotSolver::new(m, cpu, params).unwrap()),
        30,
    );
    eprintln!("twins vs f64: worst deviation {worst:.2e} of the diagonal, iterations {ia} vs {ib}");
    assert!(worst < 1e-4, "{worst:e}");
    assert!(worst > 0.0, "f32 and f64 runs cannot be identical");
}

/// `jello compare` with dot (s = 3): the device DOT on the GPU against the f64 CPU DOT, 50
/// steps of every bundled scene at ε = 1e-6, within 1e-3 of the diagonal (`jello compare`'s
/// default bound). At the scenes' own ε = 1e-5 the drop's second impact (step 35) lets the two
/// runs stop at points 1.1e-4 of the diagonal apart — well inside what ε allows there
/// (2h²‖∇E‖_{M⁻¹} ≈ 7e-4 of the diagonal per vertex) — and the ball's velocities then differ
/// by ~0.2%, so the gap grows linearly to 1.1e-3 by step 50: that measures the stop rule, not
/// the backends. Measured on lavapipe at 1e-6: twist 5.3e-7, cantilever 4.9e-5, stiff_soft
/// 2.3e-5, drop 1.8e-5 (412 / 416 iterations on the cantilever, 936 / 929 on the drop).
#[test]
fn dot_gpu_matches_cpu_over_50_steps() {
    if common::gpu_device().is_none() {
        return;
    }
    let names = [
        "twist.toml",
        "cantilever.toml",
        "stiff_soft.toml",
        "drop.toml",
    ];
    // twist_stretch_squash.toml (the armadillo) is too large for lavapipe in the suite.
    common::assert_covers_bundled_scenes(
        names
            .into_iter()
            .chain(["twist_stretch_squash.toml"])
            .chain(common::IPC_SCENES),
    );
    for name in names {
        let path = common::bundled_scene_path(name);
        let mut built = common::bundled_scene(name);
        built.config.solver = "dot".parse().unwrap();
        built.config.subdomains = Some(3);
        built.config.stop = jello::solver::StopRule::Cn { eps: 1e-6 };
        common::assert_compare_within_default(name, &path, &built, 50);
    }
}

/// `dev_curvature` (per-group partials of Σ_e d_eᵀH_e d_e + Σ_v d_vᵀK_v d_v over max(elements,
/// vertices) items) against an f64 evaluation of the same sums, twin and GPU, on random
/// Hessians, blocks and directions over a random tet list (more elements than vertices, as in
/// meshes). Tolerance 1e-5 relative: f32 products summed in 144-term rows and 256-item trees.
#[test]
fn dev_curvature_matches_f64() {
    let mut rng = common::rng("dev_curvature_matches_f64");
    let nv = 700 + rng.random_range(0..600);
    let ne = 4 * nv + rng.random_range(0..300);
    let n = ne.max(nv);
    let g = dev_groups(n);
    let r = |rng: &mut ChaCha8Rng| rng.random_range(-1.0f32..1.0);
    let tets: Vec<[u32; 4]> = (0..ne)
        .map(|_| std::array::from_fn(|_| rng.random_range(0..nv as u32)))
        .collect();
    let hess: Vec<f32> = (0..144 * ne).map(|_| r(&mut rng)).collect();
    let d: Vec<GpuVec4> = (0..nv)
        .map(|_| [r(&mut rng), r(&mut rng), r(&mut rng), 0.0])
        .collect();
    let kv: Vec<GpuMat3> = (0..nv)
        .map(|_| {
            GpuMat3::from_rows(std::array::from_fn(|_| {
                std::array::from_fn(|_| r(&mut rng))
            }))
        })
        .collect();
    let mut want = vec![0.0f64; g];
    for (e, t) in tets.iter().enumerate() {
        let c = |k: usize| d[t[k / 3] as usize][k % 3] as f64;
        for a in 0..12 {
            for b in 0..12 {
                want[e / 256] += c(a) * hess[144 * e + 12 * a + b] as f64 * c(b);
            }
        }
    }
    for v in 0..nv {
        for a in 0..3 {
            for b in 0..3 {
                want[v / 256] += d[v][a] as f64 * kv[v].get(a, b) as f64 * d[v][b] as f64;
            }
        }
    }
    let data = [
        Data::F(hess),
        Data::T(tets),
        Data::V(d),
        Data::M(kv),
        nan_f(g),
    ];
    let params = Params {
        u0: ne as u32,
        u1: nv as u32,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::DevCurvature, &data, params, n as u32);
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    assert_close(&cpu[4], &want, 1e-5, "dev_curvature cpu vs f64");
    if let Some(gv) = gpu {
        assert_close(&gv[4], &cpu[4], 1e-5, "dev_curvature gpu vs cpu");
    }
}

/// The device backend's DOT inputs against the f64 backend's, on the kernels' twins and on the
/// GPU: element Hessians at x_start (clamp and abs filters) within 5e-5 relative (f32
/// `elastic` vs the f64 model, as in gpu_kernels' twin-vs-f64 bound), and dᵀH(x_start)d for
/// random directions within 1e-5 — on the twisted bar after 6 steps (pins, large rotations)
/// and on the drop at impact (the ground's barrier in the vertex blocks).
#[test]
fn device_start_hessians_and_curvature_match_f64() {
    let mut rng = common::rng("device_start_hessians_and_curvature_match_f64");
    let mut devices = vec!["twins"];
    if common::gpu_device().is_some() {
        devices.push("gpu");
    }
    let twist = common::bundled_scene("twist.toml");
    let (drop, drop_state) = common::drop_at_impact();
    let states = [
        ("twist", &twist, common::state_after(&twist, 6)),
        ("drop at impact", &drop, drop_state),
    ];
    for dname in devices {
        for (label, built, state) in &states {
            let dev = if dname == "gpu" {
                common::gpu_device().unwrap()
            } else {
                Device::cpu()
            };
            let m = &built.model;
            let problem = StepProblem::new(m, state, built.config.h);
            let n = 3 * m.num_vertices();
            let mut f64b = CpuBackend::new(m.num_vertices());
            let mut devb = DeviceBackend::new(dev, m).unwrap();
            f64b.begin_step(&problem, m).unwrap();
            devb.begin_step(&problem, m).unwrap();
            let mut by_filter = Vec::new();
            for filter in [EigenFilter::Abs, EigenFilter::Clamp] {
                let h64 = f64b
                    .start_element_hessians(&problem, m, filter)
                    .unwrap()
                    .to_vec();
                let h32 = devb.start_element_hessians(&problem, m, filter).unwrap();
                let flat = |h: &[[f64; 144]]| -> Vec<f32> {
                    h.iter().flatten().map(|&v| v as f32).collect()
                };
                assert_close(
                    &flat(h32),
                    &flat(&h64),
                    5e-5,
                    &format!("{dname}, {label}: element Hessians ({})", filter.name()),
                );
                by_filter.push(h64);
            }
            // The filters must differ here (indefinite element blocks), or abs went untested.
            let diff: f64 = by_filter[0]
                .iter()
                .flatten()
                .zip(by_filter[1].iter().flatten())
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
                .sqrt();
            let norm: f64 = by_filter[1]
                .iter()
                .flatten()
                .map(|a| a * a)
                .sum::<f64>()
                .sqrt();
            eprintln!("{label}: ‖H_abs − H_clamp‖ = {:.2e} ‖H‖", diff / norm);
            assert!(diff > 1e-4 * norm, "{label}: no indefinite elements");
            let dirs: Vec<Vec<f64>> = (0..3)
                .map(|_| {
                    (0..n)
                        .map(|k| {
                            if problem.fixed[k] {
                                0.0
                            } else {
                                rng.random_range(-1.0..1.0)
                            }
                        })
                        .collect()
                })
                .collect();
            let mut got = [Vec::new(), Vec::new()];
            for (i, b) in [
                &mut f64b as &mut dyn CurvatureProbe,
                &mut devb as &mut dyn CurvatureProbe,
            ]
            .into_iter()
            .enumerate()
            {
                for d in &dirs {
                    got[i].push(b.curvature(&problem, d));
                }
            }
            for (a, b) in got[1].iter().zip(&got[0]) {
                let rel = (a - b).abs() / b.abs();
                eprintln!("{dname}, {label}: dᵀHd {a:.6e} vs f64 {b:.6e} ({rel:.1e})");
                assert!(*b > 0.0);
                assert!(rel <= 1e-5, "{dname}, {label}: {rel:e}");
            }
        }
    }
}

/// dᵀH(x_start)d through a backend's own vectors and scalars.
trait CurvatureProbe {
    fn curvature(&mut self, problem: &StepProblem, d: &[f64]) -> f64;
}

impl<B: PotentialBackend> CurvatureProbe for B {
    fn curvature(&mut self, problem: &StepProblem, d: &[f64]) -> f64 {
        let (q, dv, c) = (
            self.vector("q").unwrap(),
            self.vector("d").unwrap(),
            self.scalar().unwrap(),
        );
        self.host_solve(q, dv, &mut |v| {
            v.copy_from_slice(d);
            Ok(())
        })
        .unwrap();
        self.start_curvature(problem, dv, c).unwrap();
        self.read(&[c]).unwrap()[0]
    }
}

/// Newton's device element Hessians (`DeviceElastic`, the GPU Newton path) take the abs filter
/// on the device now: against the f64 model's abs-filtered Hessians at the drop's impact
/// state, twins and GPU, within the element kernel's 5e-5.
#[test]
fn device_elastic_abs_filter_matches_f64() {
    let (drop, state) = common::drop_at_impact();
    let m = &drop.model;
    let mut want = Vec::new();
    jello::problem::ElasticTerms::elastic_element_hessians_filtered(
        m,
        &state.x,
        EigenFilter::Abs,
        &mut want,
    );
    let mut devices = vec![Device::cpu()];
    devices.extend(common::gpu_device());
    for dev in devices {
        let name = dev.info().to_string();
        let de = jello::problem::DeviceElastic::on_device(m, dev).unwrap();
        let mut got = Vec::new();
        jello::problem::ElasticTerms::elastic_element_hessians_filtered(
            &de,
            &state.x,
            EigenFilter::Abs,
            &mut got,
        );
        let flat =
            |h: &[[f64; 144]]| -> Vec<f32> { h.iter().flatten().map(|&v| v as f32).collect() };
        assert_close(
            &flat(&got),
            &flat(&want),
            5e-5,
            &format!("{name}: abs element Hessians"),
        );
    }
}
