//! Newton's eigenvalue filter (`[solver] eigen_filter`): what each per-element filter does to
//! ∂P/∂F (checked against an independent 9×9 eigen-decomposition of the unprojected tensor,
//! itself checked against finite differences of P), that clamp is what it always was, that the
//! adaptive rule's trust-region ratio uses the true quadratic model, that every filter reaches
//! the same static equilibrium of a sagging cantilever, and the scene key's validation.

use crate::common;

use jello::material::{
    dpdf, dpdf_curvature, dpdf_filtered, element_hessian, element_hessian_filtered, pk1,
    EigenFilter, ElementRest, Mat9, Material, MaterialModel,
};
use jello::problem::{ElasticTerms, Model, StepProblem};
use jello::scene::Scene;
use jello::solver::{
    HessianFilter, NewtonParams, NewtonSolver, StepSolver, StopRule, TRUST_RATIO_TOLERANCE,
};
use nalgebra::{Matrix3, SymmetricEigen, Vector3};
use rand::Rng;

/// A random F: a rotation-ish mix with singular values in [0.3, 1.8], a third of them inverted
/// (det F < 0).
fn random_f(rng: &mut impl Rng, k: usize) -> Matrix3<f64> {
    let mut f = Matrix3::from_fn(|_, _| rng.random_range(-0.6..0.6)) + Matrix3::identity();
    if k.is_multiple_of(3) {
        f.set_column(0, &(-f.column(0)));
    }
    f
}

/// Q g(Λ) Qᵀ from nalgebra's eigen-decomposition of the unprojected (symmetric) ∂P/∂F.
fn spectral(raw: &Mat9<f64>, g: impl Fn(f64) -> f64) -> (Mat9<f64>, Vec<f64>) {
    let eig = SymmetricEigen::new(*raw);
    let mut out = Mat9::zeros();
    for k in 0..9 {
        let q = eig.eigenvectors.column(k);
        out += q * q.transpose() * g(eig.eigenvalues[k]);
    }
    (out, eig.eigenvalues.iter().copied().collect())
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

/// The unprojected ∂P/∂F against central differences of P (so the reference the filters are
/// compared with is itself right), relative to ‖∂P/∂F‖.
fn fd_error(m: &Material, f: &Matrix3<f64>, raw: &Mat9<f64>) -> f64 {
    let h = 1e-6;
    let mut err: f64 = 0.0;
    for col in 0..9 {
        let (i, j) = (col % 3, col / 3);
        let (mut fp, mut fm) = (*f, *f);
        fp[(i, j)] += h;
        fm[(i, j)] -= h;
        let d = (pk1(m, &fp) - pk1(m, &fm)) / (2.0 * h);
        for r in 0..9 {
            err = err.max((d.as_slice()[r] - raw[(r, col)]).abs());
        }
    }
    err / raw.norm()
}

/// (1) Abs is PSD with eigenvalues |λ| of the unprojected ∂P/∂F and the same eigenvectors; the
/// element Hessian built from it is PSD. Fails if the filter clamps instead (an inverted F has
/// negative modes, |λ| ≠ max(λ, 0) there), or perturbs eigenvectors.
#[test]
fn abs_filter_takes_absolute_eigenvalues_on_the_same_eigenvectors() {
    let mut rng = common::rng("abs_filter_takes_absolute_eigenvalues_on_the_same_eigenvectors");
    let mut negative_modes = 0;
    for model in MaterialModel::ALL {
        if model == MaterialModel::NeoHookean {
            continue; // Ψ = +∞ for J ≤ 0: no ∂P/∂F on inverted F.
        }
        let m = Material::from_young_poisson(model, 1e5, 0.4).unwrap();
        for k in 0..12 {
            let f = random_f(&mut rng, k);
            let raw = dpdf_filtered(&m, &f, None);
            let scale = raw.norm();
            let fd = fd_error(&m, &f, &raw);
            assert!(fd < 1e-6, "{model:?} F = {f}: ∂P/∂F vs FD error {fd:.2e}");
            let abs = dpdf_filtered(&m, &f, Some(EigenFilter::Abs));
            let (want, lambdas) = spectral(&raw, f64::abs);
            negative_modes += lambdas.iter().filter(|l| **l < -1e-8 * scale).count();
            let err = (abs - want).norm() / scale;
            assert!(
                err < 1e-9,
                "{model:?} F = {f}: abs vs Q|Λ|Qᵀ error {err:.2e}"
            );
            // Same eigenvectors: abs commutes with the unprojected tensor.
            let comm = (abs * raw - raw * abs).norm() / (scale * scale);
            assert!(comm < 1e-9, "{model:?}: abs does not commute ({comm:.2e})");
            let got = sorted(
                SymmetricEigen::new(abs)
                    .eigenvalues
                    .iter()
                    .copied()
                    .collect(),
            );
            let want = sorted(lambdas.iter().map(|l| l.abs()).collect());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() < 1e-9 * scale,
                    "{model:?}: eigenvalues {got:?} vs |λ| {want:?}"
                );
            }
            // The element Hessian V Bᵀ |∂P/∂F| B is PSD.
            let rest = ElementRest::new(&[
                [0.0, 0.0, 0.0],
                [0.1, 0.0, 0.0],
                [0.0, 0.1, 0.0],
                [0.0, 0.0, 0.1],
            ])
            .unwrap();
            let x = [
                Vector3::zeros(),
                f.column(0) * 0.1,
                f.column(1) * 0.1,
                f.column(2) * 0.1,
            ];
            let h = element_hessian_filtered(&m, &rest, &x, Some(EigenFilter::Abs))
                .hessian
                .unwrap();
            let min = SymmetricEigen::new(h).eigenvalues.min();
            assert!(
                min > -1e-9 * h.norm(),
                "{model:?}: element Hessian λ_min {min:e}"
            );
        }
    }
    eprintln!("{negative_modes} negative modes seen");
    assert!(
        negative_modes > 20,
        "the sample must exercise negative modes"
    );
}

/// (2) Clamp is unchanged: the bool API, the filtered API with Clamp and Q max(Λ,0) Qᵀ agree;
/// the trait's default element Hessians are the clamp ones. Fails if the default filter moved.
#[test]
fn clamp_is_what_projection_always_was() {
    let mut rng = common::rng("clamp_is_what_projection_always_was");
    for model in [
        MaterialModel::StableNeoHookean,
        MaterialModel::FixedCorotated,
    ] {
        let m = Material::from_young_poisson(model, 1e5, 0.4).unwrap();
        for k in 0..12 {
            let f = random_f(&mut rng, k);
            let raw = dpdf(&m, &f, false);
            let old = dpdf(&m, &f, true);
            assert_eq!(old, dpdf_filtered(&m, &f, Some(EigenFilter::Clamp)));
            let (want, _) = spectral(&raw, |l| l.max(0.0));
            let err = (old - want).norm() / raw.norm();
            assert!(
                err < 1e-9,
                "{model:?}: clamp vs Q max(Λ,0) Qᵀ error {err:.2e}"
            );
        }
    }
    let model = common::clamped_beam(MaterialModel::StableNeoHookean, 1e5, 1.0, [4, 1, 1], vec![]);
    let mut x: Vec<f64> = model.mesh.positions.iter().flatten().copied().collect();
    for (i, v) in x.iter_mut().enumerate() {
        *v += 0.02 * ((i * 7919) % 13) as f64 / 13.0;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    model.elastic_element_hessians(&x, &mut a);
    model.elastic_element_hessians_filtered(&x, EigenFilter::Clamp, &mut b);
    assert_eq!(a, b);
    let t = 0;
    let corners = model.mesh.tets[t].map(|v| Vector3::from(model.mesh.positions[v as usize]));
    let old = element_hessian(&model.materials[t], &model.rest[t], &corners, true);
    let new = element_hessian_filtered(
        &model.materials[t],
        &model.rest[t],
        &corners,
        Some(EigenFilter::Clamp),
    );
    assert_eq!(old.hessian, new.hessian);
}

/// The adaptive rule's curvature: vec(δF)ᵀ ∂P/∂F vec(δF) from the modes equals the quadratic
/// form of the assembled unprojected tensor, and the model's dᵀ∇²Ψd equals Σ_e d_eᵀ H_e d_e of
/// the unprojected element Hessians. Fails if a mode or a volume factor is dropped.
#[test]
fn curvature_is_the_unprojected_quadratic_form() {
    let mut rng = common::rng("curvature_is_the_unprojected_quadratic_form");
    for model in MaterialModel::ALL {
        let m = Material::from_young_poisson(model, 1e5, 0.4).unwrap();
        for k in 1..8 {
            let f = if model == MaterialModel::NeoHookean {
                Matrix3::identity() + Matrix3::from_fn(|_, _| rng.random_range(-0.2..0.2))
            } else {
                random_f(&mut rng, k)
            };
            let df = Matrix3::from_fn(|_, _| rng.random_range(-1.0..1.0));
            let v = nalgebra::SVector::<f64, 9>::from_column_slice(df.as_slice());
            let raw = dpdf_filtered(&m, &f, None);
            let want = (v.transpose() * raw * v)[(0, 0)];
            let got = dpdf_curvature(&m, &f, &df);
            assert!(
                (got - want).abs() < 1e-10 * raw.norm() * v.norm_squared(),
                "{model:?}: curvature {got} vs {want}"
            );
        }
    }
    let model = common::clamped_beam(MaterialModel::FixedCorotated, 1e5, 1.0, [4, 1, 1], vec![]);
    let x: Vec<f64> = model
        .mesh
        .positions
        .iter()
        .flat_map(|p| [p[0], p[1] - 0.3 * p[0] * p[0], p[2] + 0.05 * p[0]])
        .collect();
    let d: Vec<f64> = (0..x.len())
        .map(|_| rng.random_range(-0.01..0.01))
        .collect();
    let mut want = 0.0;
    for (t, tet) in model.mesh.tets.iter().enumerate() {
        let c = tet.map(|v| Vector3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3]));
        let h = element_hessian_filtered(&model.materials[t], &model.rest[t], &c, None)
            .hessian
            .unwrap();
        let de = nalgebra::SVector::<f64, 12>::from_fn(|r, _| d[3 * tet[r / 3] as usize + r % 3]);
        want += (de.transpose() * h * de)[(0, 0)];
    }
    let got = model.elastic_curvature(&x, &d);
    assert!(
        (got - want).abs() < 1e-9 * want.abs(),
        "model curvature {got} vs Σ dᵀH_e d {want}"
    );
}

fn newton(model: &Model, filter: HessianFilter, eps: f64) -> NewtonSolver {
    let params = NewtonParams {
        stop: StopRule::Cn { eps },
        max_iterations: 200,
        filter,
        ..NewtonParams::default()
    };
    NewtonSolver::new(model, params).unwrap()
}

/// On a quadratic energy (linear elasticity, no contact) the second-order model is exact, so
/// the ratio of the accepted step is 1 (one Newton step solves it). Fails if the predicted
/// decrease misses the inertia term, the ½ or the step length.
#[test]
fn adaptive_ratio_is_one_on_a_quadratic_energy() {
    let model = common::clamped_beam(MaterialModel::Linear, 1e5, 1.0, [10, 2, 2], vec![]);
    let st = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
    let p = StepProblem::new(&model, &st, 0.05);
    let mut s = newton(&model, HessianFilter::Adaptive, 1e-9);
    let mut x = Vec::new();
    let r = s.step(&p, &model, &mut x, false).unwrap();
    assert!(r.converged, "residual {}", r.residual);
    let ratios = s.last_trust_ratios();
    eprintln!("ratios {ratios:?}, filters {:?}", s.last_filters());
    assert_eq!(ratios.len(), r.iterations);
    for rho in ratios {
        assert!((rho - 1.0).abs() < 1e-6, "ρ = {rho} on a quadratic energy");
    }
    assert_eq!(
        s.last_filters()[0],
        EigenFilter::Abs,
        "every solve starts untrusted"
    );
}

/// (3) A sagging cantilever solved statically (no inertia: near equilibrium many elements are
/// indefinite, the regime the filters differ in): every filter converges to the same x*, within
/// the distance the CN tolerance implies, and the adaptive filter switches by its rule. Fails if
/// a filter changes the minimiser (e.g. filters the gradient) or the switch ignores ρ.
#[test]
fn every_filter_reaches_the_same_static_sag() {
    let model = common::clamped_beam(
        MaterialModel::StableNeoHookean,
        1e6,
        1.0,
        [20, 2, 2],
        vec![],
    );
    // ε tied to the load: the out-of-balance force ends below 1e-6 of the weight.
    let eps = model.static_tolerance(1e-5);
    // The load's characteristic norm: static_tolerance is min(ε, 1e-6 × it).
    let load = model.static_tolerance(f64::INFINITY) / 1e-6;
    assert!(
        eps < 1e-5,
        "the load-relative tolerance is the binding one here"
    );
    let mut state = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
    let increments = 2;
    for k in 1..=increments {
        let p = StepProblem::new_static(&model, &state, 0.01, k as f64 / increments as f64);
        // Reference: clamp converged 1000× tighter.
        let mut x_ref = Vec::new();
        let r = newton(&model, HessianFilter::Clamp, eps * 1e-3)
            .step(&p, &model, &mut x_ref, false)
            .unwrap();
        assert!(
            r.converged,
            "reference, increment {k}: residual {}",
            r.residual
        );
        let sag = x_ref
            .iter()
            .zip(&state.x)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        // Residual ≤ ε = (ε / load) × the load (CN), so the error is about ε / load times the
        // response to the load (the sag); 10× margin for the tangent stiffness softening
        // along the way.
        let implied = 10.0 * (eps / load) * sag;
        let mut iterations = Vec::new();
        for filter in HessianFilter::ALL {
            let mut s = newton(&model, filter, eps);
            let mut x = Vec::new();
            let r = s.step(&p, &model, &mut x, false).unwrap();
            assert!(
                r.converged,
                "{filter:?}, increment {k}: residual {}",
                r.residual
            );
            let dist = x
                .iter()
                .zip(&x_ref)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            eprintln!(
                "increment {k}, {}: {} iterations, max |x − x*| = {dist:.2e} m \
                 (implied bound {implied:.2e} m, sag {sag:.3} m)",
                filter.name(),
                r.iterations
            );
            assert!(
                dist < implied,
                "{filter:?}: {dist:e} m from x* (> {implied:e})"
            );
            iterations.push(r.iterations);
            let fs = s.last_filters();
            assert_eq!(fs.len(), r.iterations);
            match filter {
                HessianFilter::Clamp => assert!(fs.iter().all(|f| *f == EigenFilter::Clamp)),
                HessianFilter::Abs => assert!(fs.iter().all(|f| *f == EigenFilter::Abs)),
                HessianFilter::Adaptive => {
                    let rho = s.last_trust_ratios();
                    assert_eq!(fs[0], EigenFilter::Abs);
                    for (j, f) in fs.iter().enumerate().skip(1) {
                        let trusted = (rho[j - 1] - 1.0).abs() < TRUST_RATIO_TOLERANCE;
                        assert_eq!(
                            *f == EigenFilter::Clamp,
                            trusted,
                            "iteration {j}: ρ {rho:?}"
                        );
                    }
                    assert!(
                        fs.contains(&EigenFilter::Clamp),
                        "near equilibrium the model is trusted at some step: ρ = {rho:?}"
                    );
                }
            }
        }
        eprintln!("increment {k}: iterations clamp/abs/adaptive {iterations:?}");
        state.x = x_ref;
    }
}

fn scene_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir()
        .join(format!("jello_newton_filter_{}", std::process::id()))
        .join(format!("{name}.toml"))
}

fn build(name: &str, solver: &str) -> jello::Result<jello::scene::BuiltScene> {
    let text = format!("{}\n[solver]\n{solver}", common::cli::BAR_SCENE);
    Scene::parse(&scene_path(name), &text).and_then(|s| s.build())
}

/// (4) `[solver] eigen_filter`: each value maps, a bad value or a solver without element
/// Hessians is one line naming the key; a `--solver` override to such a solver is refused at
/// set-up the same way. Fails if a value is accepted silently.
#[test]
fn eigen_filter_key_is_validated() {
    for f in HessianFilter::ALL {
        let b = build("ok", &format!("eigen_filter = \"{}\"\n", f.name())).unwrap();
        assert_eq!(b.config.eigen_filter, Some(f));
    }
    assert_eq!(build("none", "").unwrap().config.eigen_filter, None);
    let bad = |name: &str, solver: &str, needle: &str| {
        let e = build(name, solver).expect_err("accepted").to_string();
        eprintln!("{e}");
        assert!(!e.contains('\n'), "multi-line: {e}");
        assert!(e.contains(&format!("{name}.toml")), "file not named: {e}");
        assert!(e.contains("`solver.eigen_filter`"), "key not named: {e}");
        assert!(e.contains(needle), "expected `{needle}`: {e}");
    };
    bad(
        "bogus",
        "eigen_filter = \"projected\"\n",
        "clamp, abs or adaptive",
    );
    bad("case", "eigen_filter = \"Abs\"\n", "clamp, abs or adaptive");
    bad(
        "qn",
        "name = \"qn\"\neigen_filter = \"abs\"\n",
        "only to solver newton",
    );
    bad(
        "vbd",
        "name = \"vbd\"\neigen_filter = \"clamp\"\n",
        "only to solver newton",
    );
    // DOT and LBFGS-H build their Hessian once per step: clamp or abs, never adaptive.
    for solver in ["dot", "lbfgs-h"] {
        let b = build(
            "dot_abs",
            &format!("name = \"{solver}\"\neigen_filter = \"abs\"\n"),
        )
        .unwrap();
        assert_eq!(b.config.eigen_filter, Some(HessianFilter::Abs));
        bad(
            "dot_adaptive",
            &format!("name = \"{solver}\"\neigen_filter = \"adaptive\"\n"),
            "adaptive applies only to solver newton",
        );
    }
    let mut built = build("override", "eigen_filter = \"adaptive\"\n").unwrap();
    built.config.solver = "qn".parse().unwrap();
    let e = jello::runner::setup(&built, jello::gpu::Backend::Cpu, None)
        .err()
        .expect("a qn override with eigen_filter was accepted")
        .to_string();
    assert!(
        !e.contains('\n') && e.contains("solver.eigen_filter"),
        "{e}"
    );
}
