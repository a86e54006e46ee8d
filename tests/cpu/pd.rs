//! The shared projective-dynamics machinery: k_e fits against their closed forms, the element
//! operator against the deformation gradient, the global matrix against an independently
//! assembled dense reference, and what (re)builds its factor.

use crate::common;

use jello::material::{ElementRest, Material, MaterialModel};
use jello::mesh::box_grid;
use jello::problem::{BarrierParams, Body, Model, Pin, Script};
use jello::solver::pd::{
    apply_operator, element_operator, fit_stiffness, GlobalOptions, GlobalSystem, PAPER_INTERVAL,
};
use nalgebra::{DMatrix, DVector, Vector3};
use rand::Rng;

/// k on [0.5, 1.5] in closed form, per model, from the integrals written out by hand (the fit
/// under test integrates the material's stress numerically).
fn closed_k(m: &Material) -> f64 {
    let (mu, la) = (m.mu, m.lambda);
    let ln = f64::ln;
    match m.model {
        MaterialModel::FixedCorotated | MaterialModel::Linear => 2.0 * mu + la,
        MaterialModel::Arap => 2.0 * mu,
        MaterialModel::NeoHookean => {
            let f = |x: f64| x * ln(x) - x - 0.5 * ln(x) * ln(x);
            (12.0 * ln(3.0) - 11.0) * mu + 12.0 * (f(1.5) - f(0.5)) * la
        }
        // 12 ∫ (x − 1)(x³ − x) dx = 2.15 exactly.
        MaterialModel::StVk => 2.15 * (mu + la / 2.0),
        MaterialModel::StableNeoHookean => {
            // f = μx + λ(x − α) − μx/(x² + 3): 12∫(x − 1)f = μ + λ − 12μ·I,
            // I = ∫ (x² − x)/(x² + 3) dx = 1 − [½ ln(x² + 3) + √3 atan(x/√3)]_{0.5}^{1.5}.
            let s3 = 3f64.sqrt();
            let g = |x: f64| 0.5 * ln(x * x + 3.0) + s3 * (x / s3).atan();
            let i = 1.0 - (g(1.5) - g(0.5));
            mu + la - 12.0 * mu * i
        }
        MaterialModel::StableNeoHookeanVbd => mu + la,
    }
}

#[test]
fn stiffness_fit_matches_the_closed_forms() {
    let mut rng = common::rng("stiffness_fit_matches_the_closed_forms");
    for model in MaterialModel::ALL {
        for _ in 0..5 {
            let e = 10f64.powf(rng.random_range(3.0..8.0));
            let nu = rng.random_range(0.0..0.49);
            let m = Material::from_young_poisson(model, e, nu).unwrap();
            let k = fit_stiffness(&m, PAPER_INTERVAL).unwrap();
            let want = closed_k(&m);
            let rel = (k - want).abs() / want;
            assert!(
                rel < 1e-12,
                "{}: fit {k} vs closed form {want} (rel {rel:e})",
                model.name()
            );
        }
    }
    // The digest's rounded coefficients.
    let unit =
        |model, mu, la| fit_stiffness(&Material::new(model, mu, la).unwrap(), PAPER_INTERVAL);
    let nh_mu = unit(MaterialModel::NeoHookean, 1.0, 0.0).unwrap();
    let nh_la = unit(MaterialModel::NeoHookean, 1.0, 1.0).unwrap() - nh_mu;
    assert!(
        (nh_mu - 2.18335).abs() < 5e-6 && (nh_la - 1.35356).abs() < 5e-6,
        "{nh_mu} {nh_la}"
    );
    let stvk = unit(MaterialModel::StVk, 1.0, 2.0).unwrap();
    assert!((stvk - 2.15 * 2.0).abs() < 1e-12, "{stvk}");
    let co = unit(MaterialModel::FixedCorotated, 3.0, 5.0).unwrap();
    assert!((co - 11.0).abs() < 1e-12, "{co}");
    // Stable Neo-Hookean in jello's parameters (printed for the module docs' table).
    let snh_mu = unit(MaterialModel::StableNeoHookean, 1.0, 1.0).unwrap() - 1.0;
    eprintln!("stable Neo-Hookean: k = {snh_mu:.5} μ + λ");
    assert!((snh_mu - 0.87072).abs() < 5e-6, "{snh_mu}");
    // A different interval changes a nonlinear model's k but not corotated's.
    let nh = Material::new(MaterialModel::NeoHookean, 1.0, 1.0).unwrap();
    let narrow = fit_stiffness(&nh, [0.8, 1.2]).unwrap();
    assert!((narrow - fit_stiffness(&nh, PAPER_INTERVAL).unwrap()).abs() > 1e-3);
    let fc = Material::new(MaterialModel::FixedCorotated, 1.0, 1.0).unwrap();
    assert!((fit_stiffness(&fc, [0.8, 1.2]).unwrap() - 3.0).abs() < 1e-12);
    assert!(fit_stiffness(&fc, [1.2, 0.8]).is_err());
}

fn random_tet(rng: &mut impl Rng) -> [[f64; 3]; 4] {
    loop {
        let p: [[f64; 3]; 4] =
            std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0)));
        if let Some(r) = ElementRest::new(&p) {
            if r.volume > 1e-2 {
                return p;
            }
        }
    }
}

#[test]
fn element_operator_gives_the_transposed_deformation_gradient() {
    let mut rng = common::rng("element_operator_gives_the_transposed_deformation_gradient");
    for _ in 0..50 {
        let rest = ElementRest::new(&random_tet(&mut rng)).unwrap();
        let op = element_operator(&rest);
        let x: [Vector3<f64>; 4] = std::array::from_fn(|_| {
            Vector3::new(
                rng.random_range(-2.0..2.0),
                rng.random_range(-2.0..2.0),
                rng.random_range(-2.0..2.0),
            )
        });
        let f = rest.deformation_gradient(&x);
        let dx = apply_operator(&op, &x);
        assert!(
            (dx - f.transpose()).norm() <= 1e-12 * f.norm().max(1.0),
            "{dx} vs {f}"
        );
        // Constants are in the nullspace.
        let c = Vector3::new(3.0, -1.0, 0.5);
        let shifted = x.map(|p| p + c);
        assert!((apply_operator(&op, &shifted) - dx).norm() < 1e-12 * f.norm().max(1.0));
        // Rows of the 3×4 block sum to zero.
        for row in op {
            assert!(
                row.iter().sum::<f64>().abs() < 1e-12 * row.iter().map(|v| v.abs()).sum::<f64>()
            );
        }
    }
}

/// A small block, one random material per element (every model), pinned on the x = 0 face.
fn mixed_block(rng: &mut impl Rng) -> Model {
    let mesh = box_grid([0.0, 0.0, 0.0], [0.3, 0.2, 0.2], [3, 2, 2]);
    let (nt, nv) = (mesh.num_tets(), mesh.num_vertices());
    let materials = (0..nt)
        .map(|_| {
            let m = MaterialModel::ALL[rng.random_range(0..MaterialModel::ALL.len())];
            Material::from_young_poisson(m, 10f64.powf(rng.random_range(4.0..7.0)), 0.35).unwrap()
        })
        .collect();
    let pinned: Vec<u32> = (0..nv as u32)
        .filter(|&v| mesh.positions[v as usize][0] < 1e-9)
        .collect();
    let start = pinned.iter().map(|&v| mesh.positions[v as usize]).collect();
    let density = (0..nt).map(|_| rng.random_range(500.0..2000.0)).collect();
    Model::new(
        mesh,
        vec![Body {
            name: "block".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        materials,
        density,
        [0.0, -9.81, 0.0],
        vec![Pin {
            vertices: pinned,
            start,
            script: Script::Fixed,
        }],
        vec![],
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .unwrap()
}

/// A = w_M M + Σ V_e k_e D_eᵀD_e on every vertex, dense, from the shape gradients and the
/// closed-form k.
fn dense_reference(model: &Model, mass_weight: f64) -> DMatrix<f64> {
    let n = model.num_vertices();
    let mut a = DMatrix::zeros(n, n);
    for (t, tet) in model.mesh.tets.iter().enumerate() {
        let g = model.rest[t].shape_gradients();
        let w = model.rest[t].volume * closed_k(&model.materials[t]);
        for i in 0..4 {
            for j in 0..4 {
                a[(tet[i] as usize, tet[j] as usize)] += w * g[i].dot(&g[j]);
            }
        }
    }
    for v in 0..n {
        a[(v, v)] += mass_weight * model.mass[v];
    }
    a
}

#[test]
fn global_matrix_matches_a_dense_reference_with_pins_eliminated() {
    let mut rng = common::rng("global_matrix_matches_a_dense_reference_with_pins_eliminated");
    let model = mixed_block(&mut rng);
    let n = model.num_vertices();
    let mass_weight = 1.0 / (0.01f64 * 0.01);
    let a = dense_reference(&model, mass_weight);
    let free: Vec<usize> = (0..n).filter(|&v| !model.pinned[v]).collect();
    let pinned: Vec<usize> = (0..n).filter(|&v| model.pinned[v]).collect();
    assert!(!pinned.is_empty());
    let aff = DMatrix::from_fn(free.len(), free.len(), |i, j| a[(free[i], free[j])]);
    for options in [
        GlobalOptions::default(),
        GlobalOptions {
            ordering: jello_precompute::cholesky::Ordering::Amd,
            ..GlobalOptions::default()
        },
    ] {
        let mut sys = GlobalSystem::new(&model, options).unwrap();
        sys.prepare(&model, &model.pinned, mass_weight).unwrap();
        assert_eq!(sys.free_vertices(), free.len());
        // A·x on the free rows.
        let x: Vec<f64> = (0..3 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut ax = vec![0.0; 3 * n];
        sys.apply(&model, &x, &mut ax).unwrap();
        for c in 0..3 {
            let xf = DVector::from_fn(free.len(), |i, _| x[3 * free[i] + c]);
            let want = &aff * xf;
            for (i, &v) in free.iter().enumerate() {
                let got = ax[3 * v + c];
                assert!(
                    (got - want[i]).abs() <= 1e-10 * want.amax(),
                    "A·x at vertex {v}, coordinate {c}: {got} vs {}",
                    want[i]
                );
            }
            for &v in &pinned {
                assert_eq!(ax[3 * v + c], 0.0);
            }
        }
        // The solve: A_ff r = q on free rows (three coordinates at once), zero on pins.
        let q: Vec<f64> = (0..3 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut r = q.clone();
        sys.solve(&mut r).unwrap();
        for c in 0..3 {
            let rf = DVector::from_fn(free.len(), |i, _| r[3 * free[i] + c]);
            let back = &aff * rf;
            for (i, &v) in free.iter().enumerate() {
                assert!(
                    (back[i] - q[3 * v + c]).abs() < 1e-9,
                    "A r ≠ q at vertex {v}: {} vs {}",
                    back[i],
                    q[3 * v + c]
                );
            }
            for &v in &pinned {
                assert_eq!(r[3 * v + c], 0.0);
            }
        }
        // Moving pins change right-hand sides only: b_f − A_fp x_p.
        let mut rhs = vec![0.0; 3 * n];
        sys.subtract_pinned(&x, &mut rhs).unwrap();
        for c in 0..3 {
            for &v in &free {
                let want: f64 = pinned.iter().map(|&p| -a[(v, p)] * x[3 * p + c]).sum();
                assert!((rhs[3 * v + c] - want).abs() <= 1e-10 * (1.0 + want.abs()));
            }
        }
        eprintln!("{options:?}: factor holds {} values", sys.factor_nnz());
    }
}

#[test]
fn factor_is_rebuilt_only_when_pins_step_or_materials_change() {
    let mut rng = common::rng("factor_is_rebuilt_only_when_pins_step_or_materials_change");
    let model = mixed_block(&mut rng);
    let mut sys = GlobalSystem::new(&model, GlobalOptions::default()).unwrap();
    let w = |h: f64| 1.0 / (h * h);
    let pins = model.pinned.clone();
    for _ in 0..5 {
        sys.prepare(&model, &pins, w(0.01)).unwrap();
    }
    assert_eq!((sys.analyses(), sys.factorizations()), (1, 1));
    // The forbid ladder's substeps: one factor each, then none when they come back.
    for k in [2.0, 4.0, 8.0] {
        assert!(sys.prepare(&model, &pins, w(0.01 / k)).unwrap());
    }
    for k in [1.0, 2.0, 4.0, 8.0, 1.0] {
        assert!(!sys.prepare(&model, &pins, w(0.01 / k)).unwrap());
    }
    assert_eq!((sys.analyses(), sys.factorizations()), (1, 4));
    // A fifth time step evicts the least recently used factor.
    sys.prepare(&model, &pins, w(0.02)).unwrap();
    assert_eq!(sys.factorizations(), 5);
    // A changed pin set: new pattern, new analysis and factor.
    let mut more = pins.clone();
    let extra = (0..more.len()).find(|&v| !more[v]).unwrap();
    more[extra] = true;
    sys.prepare(&model, &more, w(0.01)).unwrap();
    assert_eq!((sys.analyses(), sys.factorizations()), (2, 6));
    assert!(!sys.is_free(extra));
    sys.prepare(&model, &more, w(0.01)).unwrap();
    assert_eq!((sys.analyses(), sys.factorizations()), (2, 6));
    // A changed material.
    let mut stiffer = model.clone();
    stiffer.materials[0].mu *= 2.0;
    sys.prepare(&stiffer, &more, w(0.01)).unwrap();
    assert_eq!((sys.analyses(), sys.factorizations()), (3, 7));
    assert!(sys.factor_ms() > 0.0);
}

#[test]
fn impossible_global_systems_are_errors_not_panics() {
    let mesh = box_grid([0.0; 3], [0.1; 3], [1, 1, 1]);
    let nv = mesh.num_vertices();
    let model = common::one_body(
        mesh,
        Material::from_young_poisson(MaterialModel::Arap, 1e5, 0.3).unwrap(),
        [0.0; 3],
        vec![],
        vec![],
        1e-3,
    );
    let mut sys = GlobalSystem::new(&model, GlobalOptions::default()).unwrap();
    let err = sys
        .prepare(&model, &vec![true; nv], 1.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("every vertex is pinned"), "{err}");
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        assert!(sys.prepare(&model, &vec![false; nv], bad).is_err());
    }
    assert!(sys.prepare(&model, &[false], 1.0).is_err());
    // A solve before any factor, and a right-hand side of the wrong size.
    let mut fresh = GlobalSystem::new(&model, GlobalOptions::default()).unwrap();
    assert!(fresh.solve(&mut vec![0.0; 3 * nv]).is_err());
    sys.prepare(&model, &vec![false; nv], 1.0).unwrap();
    assert!(sys.solve(&mut vec![0.0; 3 * nv + 1]).is_err());
    let scaled = GlobalOptions {
        weight_scale: 0.0,
        ..GlobalOptions::default()
    };
    assert!(GlobalSystem::new(&model, scaled).is_err());
}
