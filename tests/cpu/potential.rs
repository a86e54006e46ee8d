//! The incremental potential E(x) = ½‖x − x̃‖²_M / h² + Ψ(x) + B(x) with pins and obstacles:
//! its gradient against central differences of E, its assembled sparse Hessian against central
//! differences of the gradient (refilled in place on a fixed pattern), the obstacle step filter
//! against an independent first-contact search, kinematic pin scripts against closed forms, and
//! projected Newton on a ball dropped onto a sphere and onto a box edge (no vertex ever inside).
//!
//! Obstacle geometry is checked here with independent predicates (plane side, point-in-sphere,
//! point-in-box), never through `Obstacle::distance`.

use crate::common;

use common::pin_where;

use jello::material::{Material, MaterialModel};
use jello::mesh::{ball, box_grid, TetMesh};
use jello::problem::{ElasticTerms, HessianLayout, Model, Obstacle, Pin, Script, StepProblem};
use jello::sim::Simulation;
use jello::solver::{NewtonParams, NewtonSolver};
use rand::Rng;

fn model(
    mesh: TetMesh,
    mat: Material,
    gravity: [f64; 3],
    pins: Vec<Pin>,
    obstacles: Vec<Obstacle>,
    dhat: f64,
) -> Model {
    common::one_body(mesh, mat, gravity, pins, obstacles, dhat)
}

fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// Independent geometry of the obstacles used here: (signed) clearance of a point, and how many
/// coordinates a box clamps (≥ 2: the point sees an edge or a corner, where the distance curves).
#[derive(Clone, Copy)]
enum Geo {
    /// Points with y ≤ height are inside.
    Ground {
        height: f64,
    },
    Sphere {
        c: [f64; 3],
        r: f64,
    },
    Box {
        lo: [f64; 3],
        hi: [f64; 3],
    },
}

impl Geo {
    fn obstacle(self) -> Obstacle {
        match self {
            Geo::Ground { height } => Obstacle::half_space([0.0, 1.0, 0.0], height),
            Geo::Sphere { c, r } => Obstacle::Sphere {
                center: c,
                radius: r,
            },
            Geo::Box { lo, hi } => Obstacle::Box { min: lo, max: hi },
        }
    }
    fn inside(self, p: [f64; 3]) -> bool {
        match self {
            Geo::Ground { height } => p[1] <= height,
            Geo::Sphere { c, r } => dist(p, c) <= r,
            Geo::Box { lo, hi } => (0..3).all(|k| lo[k] <= p[k] && p[k] <= hi[k]),
        }
    }
    /// Distance from an outside point to the obstacle.
    fn clearance(self, p: [f64; 3]) -> f64 {
        match self {
            Geo::Ground { height } => p[1] - height,
            Geo::Sphere { c, r } => dist(p, c) - r,
            Geo::Box { lo, hi } => dist(p, [0, 1, 2].map(|k| p[k].clamp(lo[k], hi[k]))),
        }
    }
    fn clamped(self, p: [f64; 3]) -> usize {
        match self {
            Geo::Box { lo, hi } => (0..3).filter(|&k| p[k] < lo[k] || p[k] > hi[k]).count(),
            _ => 0,
        }
    }
}

fn vertex(x: &[f64], v: usize) -> [f64; 3] {
    [x[3 * v], x[3 * v + 1], x[3 * v + 2]]
}

/// A 0.2 × 0.1 × 0.1 m bar (12 vertices), its x = 0 end translating, with the ground, a box and
/// a sphere each within d̂ = 0.03 m of some vertices (the box's edge region included), and a
/// random feasible point x near the step's start.
struct Setup {
    model: Model,
    state: jello::problem::State,
    geos: Vec<Geo>,
}

fn setup(mat: Material, geos: Vec<Geo>, rng: &mut impl Rng) -> Setup {
    let mesh = box_grid([0.0; 3], [0.2, 0.1, 0.1], [2, 1, 1]);
    let pin = pin_where(
        &mesh,
        |p| p[0] < 1e-9,
        Script::Translate {
            velocity: [0.0, 0.02, 0.01],
        },
    );
    let obstacles = geos.iter().map(|g| g.obstacle()).collect();
    let m = model(mesh, mat, [0.0, -9.81, 0.0], vec![pin], obstacles, 0.03);
    let vel: Vec<[f64; 3]> = (0..m.num_vertices())
        .map(|_| [0; 3].map(|_| rng.random_range(-0.1..0.1)))
        .collect();
    let state = m.initial_state(&vel);
    Setup {
        model: m,
        state,
        geos,
    }
}

const GROUND: Geo = Geo::Ground { height: -0.01 };
/// Reaches z = 0.11: the two vertices at (0.1, {0, 0.1}, 0.1) are 0.023 m away.
const SPHERE: Geo = Geo::Sphere {
    c: [0.1, 0.05, 0.19],
    r: 0.08,
};
/// The corner vertex (0.2, 0.1, ·) sees its edge x = 0.21, y = 0.11 (clearance 0.014 m).
const BOX_EDGE: Geo = Geo::Box {
    lo: [0.21, 0.11, -0.05],
    hi: [0.3, 0.2, 0.15],
};
/// Flat for every vertex of the bar: only its face x = 0.21 is near (clearance 0.01 m).
const BOX_FACE: Geo = Geo::Box {
    lo: [0.21, -0.05, -0.05],
    hi: [0.3, 0.15, 0.15],
};

/// x_start of the step plus a small random displacement of the free DOFs; checks that every
/// obstacle has a vertex within d̂ there, so the barrier is exercised.
fn perturbed_start(s: &Setup, p: &StepProblem, rng: &mut impl Rng) -> Vec<f64> {
    let mut x = p.x_start.clone();
    for (k, xk) in x.iter_mut().enumerate() {
        if !p.fixed[k] {
            *xk += rng.random_range(-1e-3..1e-3);
        }
    }
    let dhat = s.model.barrier.dhat;
    for (i, g) in s.geos.iter().enumerate() {
        let near = (0..s.model.num_vertices())
            .filter(|&v| !s.model.pinned[v])
            .map(|v| g.clearance(vertex(&x, v)))
            .fold(f64::INFINITY, f64::min);
        assert!(
            near > 0.0 && near < dhat,
            "obstacle {i}: nearest free vertex at {near} m, outside (0, d̂ = {dhat})"
        );
    }
    x
}

#[test]
fn gradient_matches_central_differences_of_the_energy() {
    let mut rng = common::rng("potential_gradient");
    for model_kind in [MaterialModel::StableNeoHookean, MaterialModel::NeoHookean] {
        let mat = Material::from_young_poisson(model_kind, 1e5, 0.3).unwrap();
        let s = setup(mat, vec![GROUND, SPHERE, BOX_EDGE], &mut rng);
        assert!(
            (0..s.model.num_vertices()).any(|v| BOX_EDGE.clamped(s.model.mesh.positions[v]) >= 2),
            "no vertex in the box's edge region"
        );
        let p = StepProblem::new(&s.model, &s.state, 0.01);
        let x = perturbed_start(&s, &p, &mut rng);
        let el: &dyn ElasticTerms = &s.model;
        let mut g = vec![0.0; x.len()];
        let e = p.gradient(el, &x, &mut g);
        // The energy the gradient call reports is E itself.
        let e_direct = p.energy(el, &x);
        assert!(
            (e - e_direct).abs() <= 1e-12 * e_direct.abs(),
            "{e} vs {e_direct}"
        );
        let gmax = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // ε = 1e-7 m on coordinates of ~0.1 m: truncation ε²·E''' (largest for the barrier,
        // ~w·d̂²/d³ with w = m/h² ≈ 2e3, d ≥ 0.01) stays below 1e-8 N, and round-off
        // 1e-16·|E|/ε is smaller still; 1e-6 of the largest gradient entry bounds both.
        let eps = 1e-7;
        for k in 0..x.len() {
            if p.fixed[k] {
                assert_eq!(g[k], 0.0, "pinned DOF {k} has a gradient");
                continue;
            }
            let mut xp = x.clone();
            let mut xm = x.clone();
            xp[k] += eps;
            xm[k] -= eps;
            let fd = (p.energy(el, &xp) - p.energy(el, &xm)) / (2.0 * eps);
            assert!(
                (fd - g[k]).abs() <= 1e-6 * gmax,
                "{model_kind:?} DOF {k}: gradient {} vs central difference {fd} (max |g| {gmax})",
                g[k]
            );
        }
    }
}

/// The elastic gradient, gathered per vertex in parallel, equals a sequential scatter of the
/// element gradients over the elements, bit for bit (same additions in the same order), also
/// when added onto a non-zero vector.
#[test]
fn gradient_gather_equals_the_sequential_scatter_bit_for_bit() {
    let mut rng = common::rng("potential_gradient_gather");
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.3).unwrap();
    let s = setup(mat, vec![], &mut rng);
    let p = StepProblem::new(&s.model, &s.state, 0.01);
    let x = perturbed_start(&s, &p, &mut rng);
    let start: Vec<f64> = (0..x.len()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut want = start.clone();
    let mut energy = 0.0;
    for (t, tet) in s.model.mesh.tets.iter().enumerate() {
        let c = tet.map(|v| nalgebra::Vector3::from_column_slice(&x[3 * v as usize..][..3]));
        let e = jello::material::element_gradient(&s.model.materials[t], &s.model.rest[t], &c);
        energy += e.energy;
        for (a, &v) in tet.iter().enumerate() {
            for i in 0..3 {
                want[3 * v as usize + i] += e.gradient[3 * a + i];
            }
        }
    }
    let mut got = start;
    let e = s.model.elastic_gradient(&x, &mut got);
    assert_eq!(e.to_bits(), energy.to_bits());
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.to_bits(), b.to_bits(), "gradient entry {k}: {a} vs {b}");
    }
}

/// The packed element Hessians Newton gathers from (written directly by the f64 reference) are
/// exactly the full 12×12 matrices packed afterwards (what every other backend does), for a
/// model symmetric only to round-off (linear elasticity) and one symmetrised by construction;
/// a box grid's tets list their corners in every order relative to the global numbering.
#[test]
fn packed_element_hessians_equal_the_full_ones_packed() {
    let mut rng = common::rng("potential_packed");
    for model in [MaterialModel::Linear, MaterialModel::StableNeoHookean] {
        let mat = Material::from_young_poisson(model, 1e5, 0.3).unwrap();
        let s = setup(mat, vec![], &mut rng);
        let p = StepProblem::new(&s.model, &s.state, 0.01);
        let mut x = perturbed_start(&s, &p, &mut rng);
        // Far enough from rest that the projection clamps some modes.
        for v in x.iter_mut() {
            *v *= 1.0 + rng.random_range(-0.2..0.2);
        }
        let filter = jello::material::EigenFilter::Clamp;
        let mut full = Vec::new();
        s.model
            .elastic_element_hessians_filtered(&x, filter, &mut full);
        let (mut want, mut got) = (Vec::new(), Vec::new());
        jello::problem::pack_element_hessians(&s.model.mesh.tets, &full, &mut want);
        s.model
            .elastic_element_hessian_blocks(&x, filter, &s.model.mesh.tets, &mut got);
        assert_eq!(got.len(), s.model.mesh.num_tets());
        for (e, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                a.iter().zip(b).all(|(u, v)| u.to_bits() == v.to_bits()),
                "{model:?}: element {e} differs"
            );
        }
        let unordered = s
            .model
            .mesh
            .tets
            .iter()
            .any(|t| t.windows(2).any(|w| w[0] > w[1]));
        assert!(unordered, "the grid should list some corners out of order");
    }
}

#[test]
fn hessian_matches_central_differences_of_the_gradient_and_is_refilled_in_place() {
    let mut rng = common::rng("potential_hessian");
    // Linear elasticity has a constant PSD Hessian (its projection changes nothing) and the
    // ground and a box face are flat, so the assembled Hessian must be the exact one.
    let lin = Material::from_young_poisson(MaterialModel::Linear, 1e5, 0.3).unwrap();
    let s = setup(lin, vec![GROUND, BOX_FACE], &mut rng);
    let p = StepProblem::new(&s.model, &s.state, 0.01);
    let x = perturbed_start(&s, &p, &mut rng);
    let layout = HessianLayout::new(&s.model).unwrap();
    let mut h = layout.zeros();
    let mut scratch = Vec::new();
    p.hessian(&s.model, &x, &layout, &mut h, &mut scratch);
    let n = x.len();
    let grad = |y: &[f64]| {
        let mut g = vec![0.0; n];
        p.gradient(&s.model, y, &mut g);
        g
    };
    for trial in 0..5 {
        let u: Vec<f64> = (0..n)
            .map(|k| {
                if p.fixed[k] {
                    0.0
                } else {
                    rng.random_range(-1.0..1.0)
                }
            })
            .collect();
        let mut hu = vec![0.0; n];
        h.mul_vec(&u, &mut hu);
        let eps = 1e-7;
        let xp: Vec<f64> = (0..n).map(|k| x[k] + eps * u[k]).collect();
        let xm: Vec<f64> = (0..n).map(|k| x[k] - eps * u[k]).collect();
        let (gp, gm) = (grad(&xp), grad(&xm));
        let scale = hu.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for k in (0..n).filter(|&k| !p.fixed[k]) {
            let fd = (gp[k] - gm[k]) / (2.0 * eps);
            // Elastic and inertia terms are linear (exact up to round-off); the barrier's
            // truncation ε²·w·b'''' is below 1e-6 of the largest entry of H u.
            assert!(
                (fd - hu[k]).abs() <= 1e-6 * scale,
                "trial {trial}, row {k}: H u = {} vs central difference {fd}",
                hu[k]
            );
        }
    }
    // Pinned rows and columns are identity.
    let e: Vec<f64> = (0..n).map(|k| if p.fixed[k] { 1.0 } else { 0.0 }).collect();
    let mut he = vec![0.0; n];
    h.mul_vec(&e, &mut he);
    assert_eq!(he, e, "pinned rows/columns are not identity");

    // Refill: a nonlinear material's Hessian at a second point, assembled into the matrix that
    // already holds the first, equals a fresh assembly there (nothing accumulates).
    let snh = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.3).unwrap();
    let s = setup(snh, vec![GROUND, SPHERE, BOX_EDGE], &mut rng);
    let p = StepProblem::new(&s.model, &s.state, 0.01);
    let x1 = perturbed_start(&s, &p, &mut rng);
    let x2 = perturbed_start(&s, &p, &mut rng);
    let layout = HessianLayout::new(&s.model).unwrap();
    let mut reused = layout.zeros();
    p.hessian(&s.model, &x1, &layout, &mut reused, &mut scratch);
    let at_x1 = reused.values().to_vec();
    p.hessian(&s.model, &x2, &layout, &mut reused, &mut scratch);
    let mut fresh = layout.zeros();
    p.hessian(&s.model, &x2, &layout, &mut fresh, &mut scratch);
    assert_ne!(at_x1, fresh.values(), "the Hessian did not change with x");
    assert_eq!(reused.values(), fresh.values());
    assert_eq!(reused.values().len(), layout.pattern.nnz());
}

/// The true barrier Hessian has parts projected Newton must drop or project: for a vertex
/// against a convex obstacle b'∇²d ⪯ 0 (dropped), for a surface pair with a sphere or a box
/// the pair's whole Hessian is projected to PSD. Either way the assembled Hessian dominates the
/// true one (uᵀHu ≥ uᵀH_true u, the true one by central differences of the gradient) and stays
/// positive definite on the free DOFs.
#[test]
fn curved_obstacle_hessian_dominates_the_true_one() {
    let mut rng = common::rng("potential_curved");
    let lin = Material::from_young_poisson(MaterialModel::Linear, 1e5, 0.3).unwrap();
    let s = setup(lin, vec![SPHERE, BOX_EDGE], &mut rng);
    let p = StepProblem::new(&s.model, &s.state, 0.01);
    let x = perturbed_start(&s, &p, &mut rng);
    let pairs = p.surface_pairs(&x);
    assert!(
        !pairs.is_empty(),
        "no surface pair within d̂ of the sphere or the box: the test tests nothing"
    );
    let layout = HessianLayout::new(&s.model).unwrap();
    let mut h = layout.zeros();
    p.hessian(&s.model, &x, &layout, &mut h, &mut Vec::new());
    let n = x.len();
    let grad = |y: &[f64]| {
        let mut g = vec![0.0; n];
        p.gradient(&s.model, y, &mut g);
        g
    };
    for trial in 0..20 {
        let u: Vec<f64> = (0..n)
            .map(|k| {
                if p.fixed[k] {
                    0.0
                } else {
                    rng.random_range(-1.0..1.0)
                }
            })
            .collect();
        let mut hu = vec![0.0; n];
        h.mul_vec(&u, &mut hu);
        let uhu: f64 = u.iter().zip(&hu).map(|(a, b)| a * b).sum();
        let eps = 1e-7;
        let xp: Vec<f64> = (0..n).map(|k| x[k] + eps * u[k]).collect();
        let xm: Vec<f64> = (0..n).map(|k| x[k] - eps * u[k]).collect();
        let (gp, gm) = (grad(&xp), grad(&xm));
        let u_htrue_u: f64 = (0..n).map(|k| u[k] * (gp[k] - gm[k]) / (2.0 * eps)).sum();
        assert!(uhu > 0.0, "trial {trial}: uᵀHu = {uhu}");
        assert!(
            uhu >= u_htrue_u - 1e-5 * uhu,
            "trial {trial}: uᵀHu = {uhu} < uᵀH_true u = {u_htrue_u}"
        );
    }
}

/// Surface pairs against spheres and boxes (triangle–sphere, box corner–triangle, surface edge–
/// box edge with IPC's mollifier): each pair's distance against an independent one — the
/// smallest clearance over dense samples of the primitive(s) — and its barrier gradient against
/// central differences of its energy, over random primitives near a sphere and a box.
#[test]
fn surface_pairs_match_sampling_and_differences() {
    use jello::problem::surface_contact::{candidate_pairs, PairKind, BOX_EDGES};
    let mut rng = common::rng("potential_surface_pairs");
    let (sphere, bx) = (
        Geo::Sphere {
            c: [0.0, 0.0, 0.0],
            r: 0.05,
        },
        Geo::Box {
            lo: [0.1, -0.05, -0.05],
            hi: [0.2, 0.05, 0.05],
        },
    );
    let mut counts = [0usize; 3];
    for trial in 0..60 {
        // A small ball of random size and place near both obstacles.
        let centre = [
            rng.random_range(-0.02..0.25),
            rng.random_range(0.06..0.12),
            rng.random_range(-0.05..0.05),
        ];
        let mesh = ball(centre, rng.random_range(0.01..0.04), 2);
        let mat = Material::from_young_poisson(MaterialModel::Linear, 1e5, 0.3).unwrap();
        let mut m = model(mesh, mat, [0.0; 3], vec![], vec![], 0.03);
        m.obstacles = vec![sphere.obstacle(), bx.obstacle()];
        let x: Vec<f64> = m.mesh.positions.iter().flatten().copied().collect();
        let h = 0.01;
        for pair in candidate_pairs(&m, &x) {
            let Some(ev) = pair.eval(&m, &x, h) else {
                continue;
            };
            if !ev.energy.is_finite() {
                continue;
            }
            let at = |v: u32| vertex(&x, v as usize);
            let lerp =
                |a: [f64; 3], b: [f64; 3], t: f64| [0, 1, 2].map(|k| a[k] + t * (b[k] - a[k]));
            // Independent distance by sampling.
            let (sampled, tol, slot) = match pair.kind {
                PairKind::TriangleSphere { .. } | PairKind::CornerTriangle { .. } => {
                    let tri = pair.vertices.map(at);
                    let q: [f64; 3] = match pair.kind {
                        PairKind::CornerTriangle { corner, .. } => {
                            let Geo::Box { lo, hi } = bx else {
                                unreachable!()
                            };
                            [0, 1, 2].map(|k| if corner & (1 << k) == 0 { lo[k] } else { hi[k] })
                        }
                        _ => [0.0; 3],
                    };
                    let r = if matches!(pair.kind, PairKind::TriangleSphere { .. }) {
                        0.05
                    } else {
                        0.0
                    };
                    let k = 80;
                    let mut best = f64::INFINITY;
                    for i in 0..=k {
                        for j in 0..=k - i {
                            let (a, b) = (i as f64 / k as f64, j as f64 / k as f64);
                            let pnt = [0, 1, 2].map(|c| {
                                tri[0][c]
                                    + a * (tri[1][c] - tri[0][c])
                                    + b * (tri[2][c] - tri[0][c])
                            });
                            best = best.min(dist(pnt, q) - r);
                        }
                    }
                    let edge = (0..3)
                        .map(|e| dist(tri[e], tri[(e + 1) % 3]))
                        .fold(0.0, f64::max);
                    let slot = if r > 0.0 { 0 } else { 1 };
                    (best, edge / k as f64, slot)
                }
                PairKind::EdgeEdge { box_edge, .. } => {
                    let Geo::Box { lo, hi } = bx else {
                        unreachable!()
                    };
                    let corner =
                        |c: usize| [0, 1, 2].map(|k| if c & (1 << k) == 0 { lo[k] } else { hi[k] });
                    let (i, j) = BOX_EDGES[box_edge];
                    let (q0, q1) = (corner(i), corner(j));
                    let (a, b) = (at(pair.vertices[0]), at(pair.vertices[1]));
                    let k = 400;
                    let mut best = f64::INFINITY;
                    for s in 0..=k {
                        for t in 0..=k {
                            best = best.min(dist(
                                lerp(a, b, s as f64 / k as f64),
                                lerp(q0, q1, t as f64 / k as f64),
                            ));
                        }
                    }
                    (best, (dist(a, b) + dist(q0, q1)) / k as f64, 2)
                }
            };
            assert!(
                ev.d <= sampled + 1e-12 && ev.d >= sampled - tol,
                "trial {trial} {:?}: distance {} vs sampled {sampled}",
                pair.kind,
                ev.d
            );
            // Gradient by central differences of the pair's energy.
            let eps = 1e-8;
            let mut y = x.clone();
            for (kv, &v) in pair.vertices[..pair.count].iter().enumerate() {
                for c in 0..3 {
                    let i = 3 * v as usize + c;
                    y[i] = x[i] + eps;
                    let ep = pair.eval(&m, &y, h).map_or(0.0, |e| e.energy);
                    y[i] = x[i] - eps;
                    let em = pair.eval(&m, &y, h).map_or(0.0, |e| e.energy);
                    y[i] = x[i];
                    let fd = (ep - em) / (2.0 * eps);
                    let an = ev.grad[3 * kv + c];
                    assert!(
                        (fd - an).abs() <= 1e-4 * an.abs().max(1e-3 * ev.grad.norm()).max(1e-9),
                        "trial {trial} {:?}: ∂E/∂x[{kv}][{c}] = {an}, differences {fd}",
                        pair.kind
                    );
                }
            }
            counts[slot] += 1;
        }
    }
    eprintln!(
        "pairs checked: triangle–sphere {}, corner–triangle {}, edge–edge {}",
        counts[0], counts[1], counts[2]
    );
    assert!(
        counts.iter().all(|&c| c > 5),
        "too few pairs of some kind: {counts:?}"
    );
}

/// The first t ∈ [0, 1] at which p + t·d is inside `g` (None when it never is), by dense sampling
/// and bisection; the inside sets are convex, so the crossing is a single interval.
fn first_contact(g: Geo, p: [f64; 3], d: [f64; 3]) -> Option<f64> {
    first_contact_sampled(g, p, d, 20_000)
}

/// [`first_contact`] with `samples` samples before the bisection.
fn first_contact_sampled(g: Geo, p: [f64; 3], d: [f64; 3], samples: usize) -> Option<f64> {
    let at = |t: f64| [0, 1, 2].map(|k| p[k] + t * d[k]);
    let hit = (1..=samples).find(|&i| g.inside(at(i as f64 / samples as f64)))?;
    let (mut lo, mut hi) = (
        (hit - 1) as f64 / samples as f64,
        hit as f64 / samples as f64,
    );
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if g.inside(at(mid)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Points on the boundary triangles of `m` at positions `x`: `k + 1` rows of barycentric
/// samples per triangle (corners, edges and interior).
fn surface_points(m: &Model, x: &[f64], k: usize) -> Vec<[f64; 3]> {
    let mut out = Vec::new();
    for tri in &m.surface.triangles {
        let p = tri.map(|v| vertex(x, v as usize));
        for i in 0..=k {
            for j in 0..=k - i {
                let (a, b) = (i as f64 / k as f64, j as f64 / k as f64);
                out.push(
                    [0, 1, 2].map(|c| p[0][c] + a * (p[1][c] - p[0][c]) + b * (p[2][c] - p[0][c])),
                );
            }
        }
    }
    out
}

#[test]
fn step_filter_stops_short_of_every_obstacle() {
    let mut rng = common::rng("potential_filter");
    // A 0.1 m cube between the ground (5 cm below), a sphere (10 cm to +x) and a box (15 cm to
    // −x); random rigid moves of up to 0.6 m (a rigid move never inverts an element, so the
    // obstacles alone limit the step).
    let geos = [
        Geo::Ground { height: -0.05 },
        Geo::Sphere {
            c: [0.35, 0.05, 0.05],
            r: 0.15,
        },
        Geo::Box {
            lo: [-0.4, -0.2, -0.2],
            hi: [-0.15, 0.3, 0.3],
        },
    ];
    let mesh = box_grid([0.0; 3], [0.1; 3], [1, 1, 1]);
    let obstacles = geos.iter().map(|g| g.obstacle()).collect();
    let m = model(
        mesh,
        Material::from_young_poisson(MaterialModel::FixedCorotated, 1e5, 0.3).unwrap(),
        [0.0; 3],
        vec![],
        obstacles,
        1e-3,
    );
    let state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let p = StepProblem::new(&m, &state, 0.01);
    let x = state.x.clone();
    let mut hits = [0usize; 3];
    let mut misses = 0;
    let mut worst = f64::INFINITY;
    for trial in 0..300 {
        let dir = loop {
            let d = [0; 3].map(|_| rng.random_range(-1.0..1.0f64));
            let l = dist(d, [0.0; 3]);
            if l > 0.1 && l <= 1.0 {
                break d.map(|c| c / l);
            }
        };
        let len = rng.random_range(0.05..0.6);
        let d = dir.map(|c| c * len);
        let dx: Vec<f64> = (0..x.len()).map(|k| d[k % 3]).collect();
        let alpha = p.max_step(&x, &dx);
        // Independent first contact over every vertex and obstacle.
        let mut t_star: Option<(f64, usize)> = None;
        for v in 0..m.num_vertices() {
            for (i, g) in geos.iter().enumerate() {
                if let Some(t) = first_contact(*g, vertex(&x, v), d) {
                    if t_star.is_none_or(|(ts, _)| t < ts) {
                        t_star = Some((t, i));
                    }
                }
            }
        }
        // …and over points spread on the surface triangles (a sphere's or a box's edge can
        // touch a face between its corners: the first contact of the body, not only of its
        // vertices). Sampled points find contact no earlier than the true first contact.
        let surface = surface_points(&m, &x, 8);
        let mut t_face: Option<f64> = None;
        for q in &surface {
            for g in geos.iter().filter(|g| !matches!(g, Geo::Ground { .. })) {
                if let Some(t) = first_contact_sampled(*g, *q, d, 400) {
                    t_face = Some(t_face.map_or(t, |f: f64| f.min(t)));
                }
            }
        }
        // Additive CCD stops once a triangle's gap falls below 10% of where it started, contact
        // or not: a near miss may shorten the step (to about when it happens), nothing else.
        let clear = |t: f64| {
            surface
                .iter()
                .map(|q| {
                    let q = [0, 1, 2].map(|k| q[k] + t * d[k]);
                    geos.iter()
                        .filter(|g| !matches!(g, Geo::Ground { .. }))
                        .map(|g| g.clearance(q))
                        .fold(f64::INFINITY, f64::min)
                })
                .fold(f64::INFINITY, f64::min)
        };
        let gap0 = clear(0.0);
        let t_near = (0..=400)
            .map(|i| i as f64 / 400.0)
            .find(|&t| clear(t) < 0.15 * gap0)
            .unwrap_or(f64::INFINITY);
        match t_star {
            None if t_face.is_none() => {
                misses += 1;
                assert!(
                    alpha == 1.0 || t_near <= 1.0,
                    "trial {trial}: no contact and no near miss, yet α = {alpha}"
                );
            }
            _ => {
                if let Some((_, i)) = t_star {
                    hits[i] += 1;
                }
                let tv = t_star.map_or(f64::INFINITY, |(t, _)| t);
                // The vertex rule: IPC's safety factor 0.9 on a vertex's time of impact.
                assert!(
                    alpha <= 0.9 * tv + 1e-9,
                    "trial {trial}: α = {alpha} beyond 0.9 × the first vertex contact {tv}"
                );
                let tf = t_face.unwrap_or(f64::INFINITY);
                assert!(
                    alpha <= tf + 1e-9,
                    "trial {trial}: α = {alpha} beyond the first sampled face contact {tf}"
                );
                // Not needlessly short: at least half of the first contact (or near miss).
                let first = (0.9 * tv).min(tf).min(t_near);
                worst = worst.min(alpha / first);
                assert!(
                    alpha >= 0.5 * first,
                    "trial {trial}: α = {alpha} < half the first contact {first}"
                );
            }
        }
        // Whatever α is, no vertex and no surface point is inside any obstacle on [0, α].
        for pv in (0..m.num_vertices()).map(|v| vertex(&x, v)).chain(surface) {
            for s in 0..=100 {
                let t = alpha * s as f64 / 100.0;
                let q = [0, 1, 2].map(|k| pv[k] + t * d[k]);
                assert!(
                    geos.iter().all(|g| !g.inside(q)),
                    "trial {trial}: point {pv:?} of the body inside an obstacle at t = {t}"
                );
            }
        }
    }
    eprintln!("smallest α / first contact: {worst:.3}");
    eprintln!("hits per obstacle {hits:?}, misses {misses}");
    assert!(
        hits.iter().all(|&h| h >= 5) && misses >= 5,
        "random moves did not exercise every case: hits {hits:?}, misses {misses}"
    );
}

#[test]
fn pin_scripts_follow_their_closed_forms() {
    let mesh = box_grid([0.0, -0.05, -0.05], [1.0, 0.05, 0.05], [10, 1, 1]);
    let v = [0.1, 0.2, -0.05];
    let omega = 0.5; // rad/s about +z through (1, 0, 0)
    let left = pin_where(&mesh, |p| p[0] < 1e-9, Script::Translate { velocity: v });
    let right = pin_where(
        &mesh,
        |p| p[0] > 1.0 - 1e-9,
        Script::Rotate {
            center: [1.0, 0.0, 0.0],
            axis: [0.0, 0.0, 2.0], // not unit: normalised internally
            omega,
        },
    );
    let (lv, rv) = (left.vertices.clone(), right.vertices.clone());
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.3).unwrap();
    let m = model(
        mesh,
        mat,
        [0.0, -9.81, 0.0],
        vec![left, right],
        vec![],
        1e-3,
    );
    let rest = m.mesh.positions.clone();
    let st = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let solver = NewtonSolver::new(&m, NewtonParams::default()).unwrap();
    let mut sim = Simulation::new(m, st, 0.02, Box::new(solver)).unwrap();
    for step in 1..=10 {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step}: residual {}", r.residual);
        let t = sim.state.t;
        assert!((t - 0.02 * step as f64).abs() < 1e-12);
        for &i in &lv {
            let p0 = rest[i as usize];
            let want = [0, 1, 2].map(|k| p0[k] + v[k] * t);
            let got = vertex(&sim.state.x, i as usize);
            assert!(dist(got, want) < 1e-12, "step {step}: {got:?} vs {want:?}");
        }
        for &i in &rv {
            let p0 = rest[i as usize];
            let (c, s) = ((omega * t).cos(), (omega * t).sin());
            let (dx, dy) = (p0[0] - 1.0, p0[1]);
            let want = [1.0 + c * dx - s * dy, s * dx + c * dy, p0[2]];
            let got = vertex(&sim.state.x, i as usize);
            assert!(dist(got, want) < 1e-12, "step {step}: {got:?} vs {want:?}");
        }
    }
    assert!(sim.model.min_volume_ratio(&sim.state.x) > 0.0);
}

/// A soft ball dropped off-centre onto a sphere and onto a box edge: every step converges, no
/// vertex is ever inside the obstacle, no element inverts, the ball does reach the obstacle
/// (within a few d̂) and is deflected away from it (+x).
#[test]
fn ball_dropped_on_a_sphere_and_a_box_edge_never_enters_them() {
    let cases = [
        (
            "sphere",
            Geo::Sphere {
                c: [0.0, 0.0, 0.0],
                r: 0.06,
            },
            [0.02, 0.125, 0.0],
        ),
        (
            "box edge",
            Geo::Box {
                lo: [-0.2, -0.1, -0.2],
                hi: [0.0, 0.06, 0.2],
            },
            [0.015, 0.125, 0.0],
        ),
    ];
    let dhat = 2e-3;
    for (name, geo, centre) in cases {
        let mesh = ball(centre, 0.05, 4);
        let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.3).unwrap();
        let m = model(
            mesh,
            mat,
            [0.0, -9.81, 0.0],
            vec![],
            vec![geo.obstacle()],
            dhat,
        );
        let st = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
        let solver = NewtonSolver::new(&m, NewtonParams::default()).unwrap();
        let mut sim = Simulation::new(m, st, 0.01, Box::new(solver)).unwrap();
        let mut closest = f64::INFINITY;
        for step in 1..=30 {
            let r = sim.step(false).unwrap();
            assert!(r.converged, "{name} step {step}: residual {}", r.residual);
            assert!(
                sim.model.min_volume_ratio(&sim.state.x) > 0.0,
                "{name} step {step}: inverted"
            );
            for v in 0..sim.model.num_vertices() {
                let q = vertex(&sim.state.x, v);
                assert!(
                    !geo.inside(q),
                    "{name} step {step}: vertex {v} inside at {q:?}"
                );
                closest = closest.min(geo.clearance(q));
            }
        }
        let mass: f64 = sim.model.mass.iter().sum();
        let px = sim.model.linear_momentum(&sim.state.v)[0] / mass;
        eprintln!("{name}: closest approach {closest:.2e} m (d̂ = {dhat}), final vx {px:.3} m/s");
        assert!(closest < 3.0 * dhat, "{name}: never reached the obstacle");
        assert!(px > 0.01, "{name}: not deflected away (+x), vx = {px}");
    }
}
