//! The surface kernels of the JGS2/VBD runtime against spheres and boxes (`jgs2_face_terms`,
//! `jgs2_edge_terms`, `jgs2_face_bound`, the surface filter of `vertex_solve`) and the strict
//! inversion flag of `elastic`: each on the GPU against its CPU twin, and the twins against the
//! f64 reference (`jello::problem`: `Obstacle::triangle_contact`, `triangle_time_of_impact`,
//! `StepProblem::face_barrier_at_vertex`, `barrier_energy`, `max_obstacle_step`,
//! `vertex_surface_step`; `Model::element_j`).
//!
//! Random inputs are fresh per run (seed printed; replay with `JELLO_TEST_SEED=<seed>`). A GPU
//! test FAILS when no adapter is found unless `JELLO_SKIP_GPU_TESTS=1`.
//!
//!   WGPU_BACKEND=vulkan cargo test --test gpu gpu_surface::   (Mesa lavapipe)

use crate::common;

use common::assert_close;
use common::kernels::{nan_f, nan_v4, run_both, Data as D};
use glam::{Mat3, Vec3};
use jello::gpu::twins::{self, jgs2 as tw, surface as ts};
use jello::gpu::{GpuContact, GpuLocalSystem, GpuMat3, GpuVec4, GpuVertexInfo, Kernel, Params};
use jello::gpu::{SurfaceCsr, SurfaceEdgeCsr};
use jello::material::{Material, MaterialModel};
use jello::mesh::ball;
use jello::problem::surface_contact::PairKind;
use jello::problem::{barycentric, closest_point_on_triangle, Model, Obstacle, State, StepProblem};
use nalgebra::Vector3;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

type V3 = Vector3<f64>;

/// Serialises this file's GPU work on GL only (see `common::serial_on_gl`).
fn gpu_lock() -> Option<std::sync::MutexGuard<'static, ()>> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    common::serial_on_gl(&LOCK)
}

// ---------------------------------------------------------------- scene

const DHAT: f64 = 2e-3;

/// A stable Neo-Hookean ball (r = 0.1 m at the origin, resolution 4: surface edges of 5–9 cm)
/// with a sphere (r = 2 cm) beside it, a small one (r = 4 mm) below it and another (r = 5 mm)
/// at a lower corner, a small box (6 × 8 × 5 mm) above it and a bar (1 × 1.2 cm across, 40 cm
/// long along z) at its upper left — each but the bar's length smaller than the surface's edges
/// and off the mesh's symmetry planes, so they fit between vertices (the box's corners meet
/// triangles; the bar's long edge crosses surface edges) — placed so the surface comes within
/// `gap` of each (then `noise` moves every vertex).
fn scene(rng: &mut ChaCha8Rng, gap: f64, noise: f64) -> (Model, Vec<f64>) {
    let mesh = ball([0.0; 3], 0.1, 4);
    let x0: Vec<f64> = mesh.positions.iter().flatten().copied().collect();
    let tris = jello::mesh::surface(&mesh).triangles;
    let tri_at = |x: &[f64], t: &[u32; 3]| {
        t.map(|v| {
            V3::new(
                x[3 * v as usize],
                x[3 * v as usize + 1],
                x[3 * v as usize + 2],
            )
        })
    };
    // Each obstacle starts well away along `dir` and is moved toward the ball until the
    // nearest triangle is `gap` away.
    let place = |o: Obstacle, dir: V3| {
        let dist = |o: &Obstacle| {
            tris.iter()
                .map(|t| o.triangle_distance(&tri_at(&x0, t)))
                .fold(f64::INFINITY, f64::min)
        };
        // The distance falls by the shift's component along the closest pair's normal: a few
        // rounds converge.
        let mut moved = o;
        for _ in 0..100 {
            let shift = dist(&moved) - gap;
            if shift.abs() < 1e-7 * gap {
                break;
            }
            let s = |p: [f64; 3]| (V3::from(p) - dir * shift).into();
            moved = match moved {
                Obstacle::Sphere { center, radius } => Obstacle::Sphere {
                    center: s(center),
                    radius,
                },
                Obstacle::Box { min, max } => Obstacle::Box {
                    min: s(min),
                    max: s(max),
                },
                h => h,
            };
        }
        assert!((dist(&moved) - gap).abs() < 1e-6 * gap);
        moved
    };
    let obstacles = vec![
        place(
            Obstacle::Sphere {
                center: [0.2, 0.01, 0.013],
                radius: 0.02,
            },
            V3::x(),
        ),
        place(
            Obstacle::Sphere {
                center: [0.013, -0.2, 0.016],
                radius: 0.004,
            },
            -V3::y(),
        ),
        place(
            Obstacle::Sphere {
                center: [-0.16, -0.15, 0.045],
                radius: 0.005,
            },
            V3::new(-1.0, -1.0, 0.3).normalize(),
        ),
        place(
            Obstacle::Box {
                min: [0.011, 0.2, -0.017],
                max: [0.017, 0.208, -0.012],
            },
            V3::y(),
        ),
        place(
            Obstacle::Box {
                min: [-0.2, 0.15, -0.2],
                max: [-0.19, 0.162, 0.2],
            },
            V3::new(-1.0, 1.0, 0.0).normalize(),
        ),
    ];
    let m = common::one_body(
        mesh,
        Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.4).unwrap(),
        [0.0, -9.81, 0.0],
        vec![],
        obstacles,
        DHAT,
    );
    let x: Vec<f64> = x0
        .iter()
        .map(|v| v + rng.random_range(-noise..noise))
        .collect();
    // Every triangle stays outside every obstacle.
    for t in &m.surface.triangles {
        for o in &m.obstacles {
            assert!(o.triangle_distance(&tri_at(&x, t)) > 0.0);
        }
    }
    (m, x)
}

fn tri_at(m: &Model, x: &[f64], f: usize) -> [V3; 3] {
    m.surface.triangles[f].map(|v| {
        V3::new(
            x[3 * v as usize],
            x[3 * v as usize + 1],
            x[3 * v as usize + 2],
        )
    })
}

fn contacts_at(m: &Model, x: &[f64]) -> Vec<GpuContact> {
    (0..m.num_vertices())
        .flat_map(|v| {
            m.obstacles
                .iter()
                .map(move |o| GpuContact::at(o, [x[3 * v], x[3 * v + 1], x[3 * v + 2]]))
        })
        .collect()
}

fn vinfo(m: &Model) -> Vec<GpuVertexInfo> {
    (0..m.num_vertices())
        .map(|v| GpuVertexInfo {
            mass: m.mass[v] as f32,
            free: (!m.pinned[v]) as u32,
        })
        .collect()
}

fn f32v(v: &V3) -> Vec3 {
    Vec3::new(v.x as f32, v.y as f32, v.z as f32)
}

fn v4(v: &V3) -> GpuVec4 {
    [v.x as f32, v.y as f32, v.z as f32, 0.0]
}

fn at(x: &[f64], v: usize) -> V3 {
    V3::new(x[3 * v], x[3 * v + 1], x[3 * v + 2])
}

/// The obstacle nearest to `p`.
fn nearest<'a>(m: &'a Model, p: &V3) -> &'a Obstacle {
    m.obstacles
        .iter()
        .min_by(|a, b| a.distance(p).d.total_cmp(&b.distance(p).d))
        .unwrap()
}

/// From `p` to the interior point of the nearest obstacle.
fn toward_nearest(m: &Model, p: &V3) -> V3 {
    nearest(m, p).interior_point().unwrap() - p
}

/// Face-terms parameters at h = 0.01 s.
fn face_params(m: &Model) -> Params {
    Params {
        n: m.num_vertices() as u32,
        f1: m.barrier.kappa as f32,
        f2: m.barrier.dhat as f32,
        // The barrier's 1/h² at h = 0.01 s (`problem`).
        f3: 1e4,
        ..Params::default()
    }
}

fn problem<'a>(m: &'a Model, x: &[f64]) -> StepProblem<'a> {
    let st = State::new(x.to_vec(), vec![0.0; x.len()], 0.0);
    StepProblem::new(m, &st, 0.01)
}

/// The f64 closest pair of a triangle and a sphere, as the reference's triangle–sphere pair
/// (`jello::problem`'s surface contact) takes it: the triangle's point nearest the centre.
struct SphereContact {
    d: f64,
    bary: V3,
    normal: V3,
}

/// The magnitude of the terms of the twin's sphere distance (see
/// `face_contact_twin_matches_f64_reference`) over |q| + R ≈ 2R, m.
fn cancellation(o: &Obstacle, tri: &[V3; 3], w: &V3) -> f64 {
    let Obstacle::Sphere { center, radius } = o else {
        unreachable!("spheres only")
    };
    let c = V3::from(*center);
    let mut m = 0.0;
    for j in 0..3 {
        let d = (tri[j] - c).norm() - radius;
        m += w[j] * (d * (d + 2.0 * radius)).abs();
        for k in j + 1..3 {
            m += w[j] * w[k] * (tri[j] - tri[k]).norm_squared();
        }
    }
    m / (2.0 * radius)
}

fn sphere_contact(o: &Obstacle, tri: &[V3; 3]) -> Option<SphereContact> {
    let Obstacle::Sphere { center, radius } = o else {
        return None;
    };
    let c = V3::from(*center);
    let q = closest_point_on_triangle(&c, &tri[0], &tri[1], &tri[2]);
    let len = (q - c).norm();
    (len > 0.0).then(|| SphereContact {
        d: len - radius,
        bary: V3::from(barycentric(&q, &tri[0], &tri[1], &tri[2])),
        normal: (q - c) / len,
    })
}

// ---------------------------------------------------------------- twins vs f64

#[test]
fn face_contact_twin_matches_f64_reference() {
    let mut rng = common::rng("face_contact_twin_matches_f64_reference");
    // Random triangles near a large and a small sphere (corners from 1e-6 to 5e-3 m off the
    // surface, the closest point in every region of the triangle: corner, edge, face), their
    // closest pairs from the corners' f32 contact records against the f64 reference's.
    let sphere = Obstacle::Sphere {
        center: [0.3, -0.2, 0.1],
        radius: 0.05,
    };
    let small = Obstacle::Sphere {
        center: [-0.2, 0.1, 0.01],
        radius: 0.004,
    };
    let (mut worst_d, mut worst_n, mut worst_b) = (0.0f64, 0.0f64, 0.0f64);
    let mut count = [0usize; 2];
    for (k, o) in [sphere, small].iter().enumerate() {
        let (lo, hi) = o.bounds().unwrap();
        let c = (lo + hi) * 0.5;
        for _ in 0..1500 {
            // A triangle around a point just outside the obstacle (along a random direction).
            let dir = V3::new(
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
                rng.random_range(-1.0..1.0),
            )
            .normalize();
            let mut p = c;
            while o.distance(&p).d < 0.0 {
                p += dir * 1e-3;
            }
            let off = 10f64.powf(rng.random_range(-6.0..-2.3));
            p += o.distance(&p).grad * off;
            let size = rng.random_range(0.002..0.03);
            let tri = [0, 1, 2].map(|_| {
                p + V3::new(
                    rng.random_range(-size..size),
                    rng.random_range(-size..size),
                    rng.random_range(-size..size),
                )
            });
            let Some(want) = sphere_contact(o, &tri) else {
                continue;
            };
            if want.d <= 1e-7 {
                continue;
            }
            let recs = tri.map(|q| GpuContact::at(o, [q.x, q.y, q.z]));
            let got = ts::face_contact([&recs[0], &recs[1], &recs[2]]);
            count[k] += 1;
            // Distances: within 1e-4 of themselves (f32 closest pairs from centre-relative
            // corners resolve ~1e-6 of the distance) plus the cancellation in the twin's
            // |q|² − R² = Σ w_k d_k (d_k + 2R) − Σ w_j w_k |p_j − p_k|²: its terms' magnitude M
            // carries a few f32 roundings (4·6e-8 relative), divided by |q| + R ≈ 2R. The ratio
            // of the error to that allowance must stay below 1.
            let allowed = 1e-4 * want.d + cancellation(o, &tri, &want.bary) * 2.4e-7 + 1e-12;
            let ed = (got.d as f64 - want.d).abs() / allowed;
            worst_d = worst_d.max(ed);
            let n = V3::new(
                got.normal.x as f64,
                got.normal.y as f64,
                got.normal.z as f64,
            );
            // The normal's error times the distance: how far off the closest points are (the
            // records resolve positions to ~3e-8 m).
            worst_n = worst_n.max((n - want.normal).norm() * want.d);
            // Barycentrics: ill-conditioned where the closest pair sits at a feature boundary;
            // weigh the error by d (what the barrier's gradient sees).
            let b = V3::new(got.bary.x as f64, got.bary.y as f64, got.bary.z as f64);
            worst_b = worst_b.max((b - want.bary).norm() * want.d / (want.d + 1e-6));
        }
    }
    eprintln!(
        "{count:?} pairs: worst distance error {worst_d:.2e} of its allowance, normal × d {worst_n:.2e} m, \
         barycentric {worst_b:.2e}"
    );
    assert!(count.iter().all(|&c| c > 200), "too few pairs: {count:?}");
    assert!(worst_d < 1.0, "distance error {worst_d:e} of its allowance");
    assert!(worst_n < 3e-7, "normal error × distance {worst_n:e} m");
    assert!(worst_b < 1e-3, "barycentric error {worst_b:e}");
}

/// Random triangles and edges around a box (the box's corners, edges and faces each nearest in
/// turn; 1e-6 to 5e-3 m off it, some through it): the twins' box pairs from the f32 contact
/// records against the f64 reference's geometry — corner–triangle closest pairs
/// (`closest_point_on_triangle`), the triangle–box distance (`triangle_box_distance`, 0 exactly
/// when `triangle_box_overlap`), and the edge–edge pair (`segment_closest` against the box edge,
/// IPC's mollifier and its gradient, near-parallel edges included).
#[test]
fn box_pairs_twins_match_f64_reference() {
    let mut rng = common::rng("box_pairs_twins_match_f64_reference");
    let (lo, hi) = (V3::new(0.21, -0.13, 0.05), V3::new(0.237, -0.118, 0.094));
    let bx = Obstacle::Box {
        min: lo.into(),
        max: hi.into(),
    };
    let corner = |i: usize| {
        V3::new(
            if i & 1 == 0 { lo.x } else { hi.x },
            if i & 2 == 0 { lo.y } else { hi.y },
            if i & 4 == 0 { lo.z } else { hi.z },
        )
    };
    let rec = |q: &V3| GpuContact::at(&bx, [q.x, q.y, q.z]);
    let unit = |rng: &mut ChaCha8Rng| {
        V3::new(
            rng.random_range(-1.0..1.0),
            rng.random_range(-1.0..1.0),
            rng.random_range(-1.0..1.0),
        )
        .normalize()
    };
    // A point near a random feature of the box: a corner, a point of an edge or of a face,
    // pushed out along a random outward direction by 10^[-6, -2.3] m (or inward, 1 in 10).
    let near = |rng: &mut ChaCha8Rng| {
        let mut p = V3::new(
            rng.random_range(lo.x..hi.x),
            rng.random_range(lo.y..hi.y),
            rng.random_range(lo.z..hi.z),
        );
        let snap: usize = rng.random_range(1..4);
        for k in 0..3 {
            if k < snap {
                p[k] = if rng.random_bool(0.5) { lo[k] } else { hi[k] };
            }
        }
        let mut out = unit(rng);
        for k in 0..3 {
            if k < snap {
                out[k] = out[k].abs() * if p[k] == hi[k] { 1.0 } else { -1.0 };
            }
        }
        let off = 10f64.powf(rng.random_range(-6.0..-2.3));
        p + out
            * if rng.random_range(0..10) == 0 {
                -off
            } else {
                off
            }
    };
    let (mut worst_cd, mut worst_cn, mut worst_td) = (0.0f64, 0.0f64, 0.0f64);
    let (mut overlaps, mut tris) = (0usize, 0usize);
    for _ in 0..1500 {
        let p = near(&mut rng);
        let size = rng.random_range(0.002..0.03);
        let tri = [0, 1, 2].map(|_| p + unit(&mut rng) * rng.random_range(0.0..size));
        let recs = tri.map(|q| rec(&q));
        let r = [&recs[0], &recs[1], &recs[2]];
        // The triangle–box distance and overlap.
        let want = jello::problem::triangle_box_distance(&tri, &lo, &hi);
        let got = ts::box_tri_contact(r);
        tris += 1;
        if jello::problem::triangle_box_overlap(&tri, &lo, &hi) {
            overlaps += 1;
            // A triangle through the box may be missed by f32 only when it grazes it.
            assert!(
                got.d as f64 <= 1e-7,
                "an overlapping triangle at distance {}",
                got.d
            );
            continue;
        }
        // Records resolve positions to ~1e-8 m (f32 offsets of a few cm): a relative 1e-5 and an
        // absolute 5e-8 m.
        let e = (got.d as f64 - want).abs() / (1e-5 * want + 5e-8);
        worst_td = worst_td.max(e);
        // Each corner–triangle pair.
        for c in 0..8 {
            let q = corner(c);
            let cp = closest_point_on_triangle(&q, &tri[0], &tri[1], &tri[2]);
            let d = (cp - q).norm();
            if d < 1e-7 {
                continue;
            }
            let g = ts::corner_tri_contact(r, c);
            worst_cd = worst_cd.max((g.d as f64 - d).abs() / (1e-5 * d + 5e-8));
            let n = V3::new(g.normal.x as f64, g.normal.y as f64, g.normal.z as f64);
            worst_cn = worst_cn.max((n - (cp - q) / d).norm() * d);
        }
    }
    // Edges: random surface edges near random box edges, some near parallel to them (the
    // mollifier's range: sin²θ < 1e-3 at rest length).
    let (mut worst_ed, mut worst_m, mut worst_dm, mut mollified) = (0.0f64, 0.0f64, 0.0f64, 0);
    let rest_sq = 0.03f64 * 0.03;
    for _ in 0..1500 {
        let e: usize = rng.random_range(0..12);
        let first = ts::box_edge_from(e);
        let k = ts::box_edge_axis(e);
        let (q0, q1) = (corner(first), corner(first | (1 << k)));
        let t = rng.random_range(-0.2..1.2);
        let mut dir = unit(&mut rng);
        if rng.random_bool(0.3) {
            // Near parallel: within ~0.01..0.05 rad of the box edge.
            let mut along = V3::zeros();
            along[k] = 1.0;
            dir = (along + dir * rng.random_range(0.0..0.05)).normalize();
        }
        // Off the edge into its outer quadrant (perpendicular to it, away from both faces).
        let mut away = unit(&mut rng);
        for j in 0..3 {
            away[j] = if j == k {
                0.0
            } else {
                away[j].abs() * if q0[j] == hi[j] { 1.0 } else { -1.0 }
            };
        }
        let len = rng.random_range(0.01..0.04);
        let c = q0 + (q1 - q0) * t + away.normalize() * 10f64.powf(rng.random_range(-6.0..-2.3));
        let (a, b) = (c - dir * len * 0.5, c + dir * len * 0.5);
        let (sa, sb) = (rec(&a), rec(&b));
        let got = ts::box_edge_contact(&sa, &sb, e, rest_sq as f32);
        let (s64, _, d64) = jello::problem::segment_closest(&a, &b, &q0, &q1);
        if d64 < 1e-7 {
            continue;
        }
        worst_ed = worst_ed.max((got.d as f64 - d64).abs() / (1e-5 * d64 + 5e-8));
        let _ = s64;
        // The mollifier from the f64 edges (mollifier.rs).
        let (u, v) = (b - a, q1 - q0);
        let eps = jello::contact::mollifier::mollifier_threshold(rest_sq, v.norm_squared());
        let cc = u.cross(&v).norm_squared();
        let (m, dmdc, _) = jello::contact::mollifier::mollifier(cc, eps);
        let dc = (u * v.norm_squared() - v * u.dot(&v)) * 2.0;
        let dm = dc * dmdc;
        if m < 1.0 {
            mollified += 1;
        }
        worst_m = worst_m.max((got.m as f64 - m).abs());
        let gdm = V3::new(got.dm.x as f64, got.dm.y as f64, got.dm.z as f64);
        // ∂m/∂x ~ 1/(edge length): relative to the largest it takes, 2/√ε·|v|·… ≈ |dc|/ε.
        let scale = (2.0 * (u * v.norm_squared()).norm() * 2.0 / eps).max(1e-30);
        worst_dm = worst_dm.max((gdm - dm).norm() / scale);
    }
    eprintln!(
        "{tris} triangles ({overlaps} through the box): triangle–box distance error {worst_td:.2e}, \
         corner–triangle {worst_cd:.2e} of the allowance, normal × d {worst_cn:.2e} m; edges: \
         distance {worst_ed:.2e} of the allowance, {mollified} mollified, m error {worst_m:.2e}, \
         ∂m/∂x {worst_dm:.2e} of its scale"
    );
    assert!(
        overlaps >= 20 && tris - overlaps >= 500,
        "{overlaps} of {tris}"
    );
    assert!(mollified >= 50, "only {mollified} mollified edges");
    assert!(worst_td < 1.0, "triangle–box distance {worst_td:e}");
    assert!(worst_cd < 1.0, "corner–triangle distance {worst_cd:e}");
    assert!(worst_cn < 3e-7, "corner–triangle normal × d {worst_cn:e} m");
    assert!(worst_ed < 1.0, "edge–edge distance {worst_ed:e}");
    // m = (2 − r)r with r = c/ε from f32 cross products of 3-cm edges: ~1e-5 absolute.
    assert!(worst_m < 1e-4, "mollifier {worst_m:e}");
    assert!(worst_dm < 1e-4, "mollifier gradient {worst_dm:e}");
}

#[test]
fn face_toi_twin_is_conservative_and_matches_f64_reference() {
    let mut rng = common::rng("face_toi_twin_is_conservative_and_matches_f64_reference");
    let (m, x) = scene(&mut rng, 5e-4, 1e-4);
    let contacts = contacts_at(&m, &x);
    let nc = m.obstacles.len();
    // Moves of every triangle toward each obstacle it is near (corners with their own random
    // moves, long enough to reach it), twin vs Obstacle::triangle_time_of_impact.
    let (mut n, mut agree, mut worst) = (0usize, 0usize, 0.0f64);
    for (f, t) in m.surface.triangles.iter().enumerate() {
        let p = tri_at(&m, &x, f);
        for (o, ob) in m.obstacles.iter().enumerate() {
            let d0 = ob.triangle_distance(&p);
            if d0 > 0.05 {
                continue;
            }
            let toward = ob.interior_point().unwrap() - (p[0] + p[1] + p[2]) / 3.0;
            let d = [0, 1, 2].map(|_| {
                toward * rng.random_range(0.2..1.5)
                    + V3::new(
                        rng.random_range(-0.02..0.02),
                        rng.random_range(-0.02..0.02),
                        rng.random_range(-0.02..0.02),
                    )
            });
            let t64 = ob.triangle_time_of_impact(&p, &d, 200);
            let recs = t.map(|v| &contacts[v as usize * nc + o]);
            let t32 = ts::face_toi(recs, d.map(|v| f32v(&v)), 0.0) as f64;
            n += 1;
            // Conservative in f64: the triangle never meets the obstacle on [0, t32].
            for k in 0..=64 {
                let s = t32 * k as f64 / 64.0;
                let q = [0, 1, 2].map(|c| p[c] + d[c] * s);
                assert!(
                    ob.triangle_distance(&q) > 0.0,
                    "face {f}, obstacle {o}: contact at t = {s} ≤ {t32} (f64 {t64})"
                );
            }
            let e = (t32 - t64).abs() / t64.max(1e-3);
            if e < 1e-4 {
                agree += 1;
            }
            worst = worst.max(e);
            // With a thickness the triangle keeps min(thickness, ½ d0) from the obstacle.
            let thick = 2e-5f32;
            let tt = ts::face_toi(recs, d.map(|v| f32v(&v)), thick) as f64;
            let keep = (thick as f64).min(0.5 * d0);
            for k in 0..=64 {
                let s = tt * k as f64 / 64.0;
                let q = [0, 1, 2].map(|c| p[c] + d[c] * s);
                let dist = ob.triangle_distance(&q);
                assert!(
                    dist > 0.99 * keep,
                    "face {f}, obstacle {o}: {dist:e} < {keep:e} at t = {s} ≤ {tt}"
                );
            }
        }
    }
    eprintln!("{n} moving triangles: {agree} within 1e-4 of f64, worst relative {worst:.2e}");
    assert!(n > 40, "too few triangles near the obstacles ({n})");
    // The same advances in f32: an advance that lands on the 10% threshold may take one more
    // or one less step (a jump of ≤ 0.9 × the gap over the speed); most agree closely.
    assert!(agree * 10 >= n * 9, "only {agree} of {n} agree");
    assert!(worst < 0.5, "worst {worst:e}");
}

#[test]
fn face_terms_twin_matches_f64_reference() {
    let mut rng = common::rng("face_terms_twin_matches_f64_reference");
    let (m, x) = scene(&mut rng, 3e-4, 1e-4);
    let nv = m.num_vertices();
    let prob = problem(&m, &x);
    let surface = SurfaceCsr::new(&m).unwrap();
    let contacts = contacts_at(&m, &x);
    let pairs: Vec<usize> = m
        .obstacles
        .iter()
        .map(|o| {
            (0..m.surface.triangles.len())
                .filter(|&f| o.triangle_distance(&tri_at(&m, &x, f)) < DHAT)
                .count()
        })
        .collect();
    eprintln!("triangles within d̂ per obstacle: {pairs:?}");
    assert!(
        pairs.iter().all(|&c| c >= 1),
        "every obstacle must be in reach"
    );
    // Both pair kinds of the boxes are in reach (the spheres' pairs are counted above).
    let kinds = prob.surface_pairs(&x);
    let count = |f: &dyn Fn(&PairKind) -> bool| kinds.iter().filter(|(p, _)| f(&p.kind)).count();
    let corner_pairs = count(&|k| matches!(k, PairKind::CornerTriangle { .. }));
    let edge_pairs = count(&|k| matches!(k, PairKind::EdgeEdge { .. }));
    eprintln!("box pairs within d̂: {corner_pairs} corner–triangle, {edge_pairs} edge–edge");
    assert!(corner_pairs >= 1 && edge_pairs >= 1);
    let mut g = vec![[0.0f32; 4]; nv];
    let mut e = vec![0.0f32; nv];
    let mut h = vec![GpuMat3::default(); nv];
    ts::jgs2_face_terms(
        &face_params(&m),
        &contacts,
        &surface.vfaces,
        &surface.tris,
        &vinfo(&m),
        &mut g,
        &mut e,
        &mut h,
    )
    .unwrap();
    // The surface pairs without the edges' terms (what `jgs2_face_terms` adds alone, checked
    // below), then with them.
    let (g_faces, e_faces, h_faces) = (g.clone(), e.clone(), h.clone());
    let edges = SurfaceEdgeCsr::new(&m).unwrap();
    ts::jgs2_edge_terms(
        &face_params(&m),
        &contacts,
        &edges.vedges,
        &edges.edges,
        &vinfo(&m),
        &mut g,
        &mut e,
        &mut h,
    )
    .unwrap();
    let mut g64 = Vec::new();
    let mut h64 = Vec::new();
    for v in 0..nv {
        let (gv, hv) = prob.face_barrier_at_vertex(&x, v);
        g64.extend(gv.iter().map(|&a| a as f32));
        for r in 0..3 {
            for c in 0..3 {
                h64.push(hv[(r, c)] as f32);
            }
        }
    }
    let g32: Vec<f32> = g.iter().flat_map(|a| a[..3].to_vec()).collect();
    let h32: Vec<f32> = h
        .iter()
        .flat_map(|a| {
            let mut o = [0.0; 9];
            for r in 0..3 {
                for c in 0..3 {
                    o[3 * r + c] = a.get(r, c);
                }
            }
            o
        })
        .collect();
    // b' and b'' at distances of 1e-4..1e-3 m resolved to ~1e-6 of themselves: 1e-4.
    assert_close(&g32, &g64, 1e-4, "face barrier gradient twin vs f64");
    assert_close(&h32, &h64, 1e-4, "face barrier hessian twin vs f64");
    // Each triangle's energy shared by its three corners, each edge pair's by its two ends:
    // the sum is the f64 surface barrier.
    let e32: f64 = e.iter().map(|&a| a as f64).sum();
    let e64: f64 = kinds.iter().map(|(_, ev)| ev.energy).sum();
    eprintln!("surface barrier energy twin {e32:.6e} J, f64 {e64:.6e} J");
    assert!(e64 > 0.0);
    assert!((e32 - e64).abs() <= 1e-4 * e64, "{e32} vs {e64}");
    // The kernel adds to what is there (the vertex terms).
    let mut g2: Vec<GpuVec4> = (0..nv)
        .map(|_| [rng.random_range(-1.0..1.0f32), 0.5, -0.25, 0.0])
        .collect();
    let g_in = g2.clone();
    let mut e2 = vec![1.5f32; nv];
    let mut h2 = vec![GpuMat3::from_glam(Mat3::IDENTITY); nv];
    ts::jgs2_face_terms(
        &face_params(&m),
        &contacts,
        &surface.vfaces,
        &surface.tris,
        &vinfo(&m),
        &mut g2,
        &mut e2,
        &mut h2,
    )
    .unwrap();
    for v in 0..nv {
        for k in 0..3 {
            assert_eq!(g2[v][k], g_in[v][k] + g_faces[v][k]);
        }
        assert_eq!(e2[v], 1.5 + e_faces[v]);
        assert_eq!(h2[v].to_glam(), Mat3::IDENTITY + h_faces[v].to_glam());
    }
}

#[test]
fn surface_bounds_twins_match_f64_reference() {
    let mut rng = common::rng("surface_bounds_twins_match_f64_reference");
    let (m, x) = scene(&mut rng, 1e-3, 1e-4);
    let nv = m.num_vertices();
    let nc = m.obstacles.len();
    let prob = problem(&m, &x);
    let surface = SurfaceCsr::new(&m).unwrap();
    let contacts = contacts_at(&m, &x);
    // (1) The safeguarded step's bound: a step pushing the ball into its obstacles, the vertex
    // bound (`jgs2_combine`) then the surface bound (`jgs2_face_bound`), against
    // max_obstacle_step.
    let push: Vec<V3> = (0..nv)
        .map(|v| {
            let p = at(&x, v);
            // Each region of the ball translated toward its nearest obstacle (parallel vertex
            // paths, between which the obstacles fit), plus a little noise.
            let o = nearest(&m, &p);
            let u = o.interior_point().unwrap().normalize();
            V3::new(
                rng.random_range(-1e-4..1e-4),
                rng.random_range(-1e-4..1e-4),
                rng.random_range(-1e-4..1e-4),
            ) + u * 0.01
        })
        .collect();
    let step: Vec<f64> = push.iter().flat_map(|s| [s.x, s.y, s.z]).collect();
    let mut dirs = vec![[0.0f32; 4]; 3 * nv];
    for v in 0..nv {
        dirs[v] = v4(&push[v]);
    }
    let p = Params {
        n: nv as u32,
        f0: 1.0,
        ..Params::default()
    };
    let mut s4 = vec![[0.0f32; 4]; nv];
    let mut bound = vec![0.0f32; nv];
    tw::jgs2_combine(&p, &dirs, &contacts, &mut s4, &mut bound).unwrap();
    let vertex_only = 1.0 / bound.iter().fold(0.0f32, |a, &b| a.max(b)) as f64;
    ts::jgs2_face_bound(
        &p,
        &s4,
        &contacts,
        &surface.vfaces,
        &surface.tris,
        &mut bound,
    )
    .unwrap();
    let a32 = 1.0 / bound.iter().fold(0.0f32, |a, &b| a.max(b)) as f64;
    let a64 = prob.max_obstacle_step(&x, &step);
    eprintln!("step bound: vertices only {vertex_only:.4e}, twin {a32:.4e}, f64 {a64:.4e}");
    assert!(
        a64 < 0.8 * vertex_only,
        "the case must need the surface bound"
    );
    // Conservative: no triangle meets an obstacle on [0, a32] (f64, sampled) ...
    for f in 0..m.surface.triangles.len() {
        let t = m.surface.triangles[f];
        for ob in &m.obstacles {
            for k in 0..=32 {
                let s = a32 * k as f64 / 32.0;
                let q = t.map(|v| at(&x, v as usize) + push[v as usize] * s);
                assert!(ob.triangle_distance(&q) > 0.0, "face {f} hits at {s}");
            }
        }
    }
    // ... and as tight as the reference's up to the CCD's 10% stopping gap (the reference moves
    // the triangles by the vertex-bounded step, the device by the whole step).
    assert!(
        a32 >= 0.8 * a64 && a32 <= 1.25 * a64,
        "twin {a32} vs f64 {a64}"
    );
    // (2) The local-step filter: each vertex moving alone, against vertex_surface_step.
    let (mut n, mut agree, mut worst) = (0, 0, 0.0f64);
    for (v, pv) in push.iter().enumerate() {
        let d = pv * 3.0;
        let t64 = prob.vertex_surface_step(&x, v, &d);
        let t32 = ts::vertex_face_step(
            &contacts,
            nc,
            &surface.vfaces,
            &surface.tris,
            v,
            f32v(&d),
            0.0,
        ) as f64;
        if t64 < 1.0 || t32 < 1.0 {
            n += 1;
            let e = (t32 - t64).abs() / t64.max(1e-3);
            agree += (e < 1e-4) as usize;
            worst = worst.max(e);
        }
    }
    eprintln!("{n} filtered vertices: {agree} within 1e-4 of f64, worst relative {worst:.2e}");
    assert!(n >= 5, "the case must exercise the vertex filter ({n})");
    assert!(agree * 10 >= n * 9, "only {agree} of {n} agree");
    assert!(worst < 0.5, "worst {worst:e}");
}

// ---------------------------------------------------------------- GPU vs twin

#[test]
fn face_terms_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("face_terms_match_on_gpu");
    let (m, x) = scene(&mut rng, 3e-4, 2e-4);
    let nv = m.num_vertices();
    let surface = SurfaceCsr::new(&m).unwrap();
    let zero = |n| vec![[0.0f32; 4]; n];
    let data = [
        D::C(contacts_at(&m, &x)),
        D::U(surface.vfaces),
        D::T(surface.tris),
        D::I(vinfo(&m)),
        D::V(zero(nv)),
        D::F(vec![0.0; nv]),
        D::M(vec![GpuMat3::default(); nv]),
    ];
    let (cpu, gpu) = run_both(Kernel::Jgs2FaceTerms, &data, face_params(&m), nv as u32);
    let touched = cpu[5].iter().filter(|&&e| e != 0.0).count();
    eprintln!("{touched} vertices with surface barrier energy");
    assert!(touched >= 6);
    let Some(g) = gpu else { return };
    // Closest pairs (a few tens of operations, FMA contraction on the GPU) then b' ∝ 1/d and
    // b'' ∝ 1/d² at d ≥ 0.1 d̂: ~1e-5 relative; 1e-4.
    assert_close(&g[4], &cpu[4], 1e-4, "face_terms gradient gpu vs cpu");
    assert_close(&g[5], &cpu[5], 1e-4, "face_terms energy gpu vs cpu");
    assert_close(&g[6], &cpu[6], 1e-4, "face_terms hessian gpu vs cpu");
}

#[test]
fn edge_terms_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("edge_terms_match_on_gpu");
    let (m, x) = scene(&mut rng, 3e-4, 2e-4);
    let nv = m.num_vertices();
    let edges = SurfaceEdgeCsr::new(&m).unwrap();
    let zero = |n| vec![[0.0f32; 4]; n];
    let data = [
        D::C(contacts_at(&m, &x)),
        D::U(edges.vedges),
        D::T(edges.edges),
        D::I(vinfo(&m)),
        D::V(zero(nv)),
        D::F(vec![0.0; nv]),
        D::M(vec![GpuMat3::default(); nv]),
    ];
    let (cpu, gpu) = run_both(Kernel::Jgs2EdgeTerms, &data, face_params(&m), nv as u32);
    let touched = cpu[5].iter().filter(|&&e| e != 0.0).count();
    eprintln!("{touched} vertices with edge–edge barrier energy");
    assert!(touched >= 2);
    let Some(g) = gpu else { return };
    // Closest pairs of segments (a few tens of operations) and the mollifier, then b' ∝ 1/d
    // and b'' ∝ 1/d² at d ≥ 0.1 d̂: as the face terms, 1e-4.
    assert_close(&g[4], &cpu[4], 1e-4, "edge_terms gradient gpu vs cpu");
    assert_close(&g[5], &cpu[5], 1e-4, "edge_terms energy gpu vs cpu");
    assert_close(&g[6], &cpu[6], 1e-4, "edge_terms hessian gpu vs cpu");
}

#[test]
fn face_bound_and_vertex_filter_match_on_gpu() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("face_bound_and_vertex_filter_match_on_gpu");
    let (m, x) = scene(&mut rng, 1e-3, 2e-4);
    let nv = m.num_vertices();
    let surface = SurfaceCsr::new(&m).unwrap();
    let contacts = contacts_at(&m, &x);
    // Steps toward the obstacles.
    let step: Vec<GpuVec4> = (0..nv)
        .map(|v| v4(&(toward_nearest(&m, &at(&x, v)) * rng.random_range(0.2..0.6))))
        .collect();
    let bound: Vec<f32> = (0..nv).map(|_| rng.random_range(1.0..1.5)).collect();
    let data = [
        D::V(step.clone()),
        D::C(contacts.clone()),
        D::U(surface.vfaces.clone()),
        D::T(surface.tris.clone()),
        D::F(bound.clone()),
    ];
    let p = Params {
        f3: 1e-5,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::Jgs2FaceBound, &data, p, nv as u32);
    let raised = cpu[4].iter().zip(&bound).filter(|(a, b)| a > b).count();
    eprintln!("{raised} vertex bounds raised by their triangles");
    assert!(raised >= 6);
    if let Some(g) = gpu {
        // The same advances: a time of impact differs by rounding unless an advance lands on
        // the 10% threshold (then by one advance); compare the bounds' maximum (what the solver
        // uses) and the bulk.
        let max = |a: &[f32]| a.iter().fold(0.0f32, |m, &v| m.max(v)) as f64;
        let (mc, mg) = (max(&cpu[4]), max(&g[4]));
        eprintln!("max bound twin {mc:.6}, gpu {mg:.6}");
        assert!((mc - mg).abs() <= 1e-4, "{mc} vs {mg}");
        assert_close(&g[4], &cpu[4], 1e-3, "face_bound gpu vs cpu");
    }
    // vertex_solve with the surface filter: systems whose solution pushes each vertex toward
    // the obstacles.
    let sys: Vec<GpuLocalSystem> = (0..nv)
        .map(|v| {
            let s = step[v];
            GpuLocalSystem {
                a: GpuMat3::from_glam(Mat3::IDENTITY),
                r: [-s[0] * 1.5, -s[1] * 1.5, -s[2] * 1.5, 0.0],
                a_fallback: GpuMat3::from_glam(Mat3::IDENTITY),
                r_fallback: [0.0; 4],
            }
        })
        .collect();
    let lists: Vec<u32> = (0..nv as u32).collect();
    let data = [
        D::U(lists),
        D::S(sys),
        D::M(vec![GpuMat3::default(); nv]),
        D::C(contacts.clone()),
        D::U(surface.vfaces.clone()),
        D::T(surface.tris.clone()),
        nan_v4(nv),
    ];
    let p = Params {
        u0: tw::SOLVE_PRIMARY,
        f3: 1e-5,
        ..Params::default()
    };
    let (cpu, gpu) = run_both(Kernel::VertexSolve, &data, p, nv as u32);
    // Against the twin's own pieces: the vertex filter, then the surface filter.
    let nc = m.obstacles.len();
    let mut cut = 0;
    let mut vertex_moves = Vec::with_capacity(nv);
    for v in 0..nv {
        let s = step[v];
        let d = Vec3::new(s[0], s[1], s[2]) * 1.5;
        let d = d * tw::contact_step_bound(&contacts[v * nc..v * nc + nc], d);
        let t = ts::vertex_face_step(&contacts, nc, &surface.vfaces, &surface.tris, v, d, 1e-5);
        cut += (t < 1.0) as usize;
        let want = d * t;
        assert_eq!(&cpu[6][4 * v..4 * v + 3], &[want.x, want.y, want.z], "{v}");
        vertex_moves.push(d);
    }
    eprintln!("{cut} local steps cut by their triangles");
    assert!(cut >= 6);
    if let Some(g) = gpu {
        // Per vertex the same move up to rounding (1e-3: GLSL allows sqrt and division a few
        // ulp, measured ~2e-4 on llvmpipe GL), except where an advance of the conservative CCD
        // lands on its stopping threshold (10% of the starting gap) on one side only: then the
        // two cut the move one advance apart (measured on llvmpipe GL: up to a third of the cut
        // vertices, 0.4–8% of their move). Those may be at most half of the cut vertices (at
        // least 2), and each must still be a shortening of the same vertex-filtered move that
        // leaves every triangle outside every obstacle in f64.
        let v3 = |a: &[f32]| Vec3::new(a[0], a[1], a[2]);
        let mut differ = 0;
        for (v, d) in vertex_moves.iter().enumerate() {
            let (a, b) = (v3(&g[6][4 * v..]), v3(&cpu[6][4 * v..]));
            if (a - b).length() <= 1e-3 * b.length() + 1e-12 {
                continue;
            }
            differ += 1;
            let t = a.dot(*d) / d.length_squared();
            assert!(
                (a - *d * t).length() <= 1e-4 * d.length() && (0.0..=1.0 + 1e-5).contains(&t),
                "vertex {v}: gpu {a} is not a shortening of {d}"
            );
            // No triangle of v may enter a sphere at the GPU's move: the f64 distance of every
            // moved triangle to every obstacle stays positive. (Not the f64 filter's conservative
            // fraction: where the vertex's own move is its bounded 90% of the way to a sphere,
            // the conservative advance's first step lands on its own 10% stopping threshold, so
            // round-off decides between stopping there (t ≈ 0.994) and a second advance that
            // proves the whole move safe (t = 1); seed 1795804520579405600 on llvmpipe GL.)
            let a64 = V3::new(a.x as f64, a.y as f64, a.z as f64);
            let moved = |u: u32| {
                let p = at(&x, u as usize);
                if u as usize == v {
                    p + a64
                } else {
                    p
                }
            };
            for &f in m.faces_of(v) {
                let tri = m.surface.triangles[f as usize].map(moved);
                for (o, obstacle) in m.obstacles.iter().enumerate() {
                    let gap = obstacle.triangle_distance(&tri);
                    assert!(
                        gap > 0.0,
                        "vertex {v}: the gpu's move {a} (cpu {b}) brings triangle {f} into \
                         obstacle {o} ({gap:e} m)"
                    );
                }
            }
        }
        eprintln!(
            "vertex_solve (surface filter): {differ} of {cut} cut vertices differ gpu vs cpu"
        );
        assert!(
            differ <= (cut / 2).max(2),
            "{differ} of {cut} cut vertices differ"
        );
    }
}

// ---------------------------------------------------------------- strict inversion flag

#[test]
fn strict_flag_marks_elements_below_the_floor() {
    let _gpu = gpu_lock();
    let mut rng = common::rng("strict_flag_marks_elements_below_the_floor");
    let mesh = ball([0.0; 3], 0.1, 4);
    let nt = mesh.num_tets();
    let m = common::one_body(
        mesh,
        Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.4).unwrap(),
        [0.0; 3],
        vec![],
        vec![],
        1e-3,
    );
    // Squash the ball along y by a random factor per vertex: many elements flat or inverted.
    let x: Vec<f64> = m
        .mesh
        .positions
        .iter()
        .flat_map(|p| [p[0], p[1] * rng.random_range(-0.05..0.3), p[2]])
        .collect();
    let x4: Vec<GpuVec4> = x
        .chunks(3)
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0])
        .collect();
    let floor = 0.05f32;
    let (dm, ep) = jello::gpu::element_records(&m.rest, &m.materials).unwrap();
    let flags = twins::ELASTIC_GRADIENT | twins::ELASTIC_HESSIAN | twins::ELASTIC_PROJECT;
    let run = |flags: u32| {
        let data = [
            D::V(x4.clone()),
            D::T(m.mesh.tets.clone()),
            D::M(dm.clone()),
            D::E(ep.clone()),
            nan_f(nt),
            nan_v4(4 * nt),
            nan_f(144 * nt),
        ];
        run_both(
            Kernel::Elastic,
            &data,
            Params::new().u0(flags).f0(floor),
            nt as u32,
        )
    };
    let (plain, _) = run(flags);
    let (strict, gpu) = run(flags | twins::ELASTIC_STRICT);
    let mut below = 0;
    for t in 0..nt {
        let j = m.element_j(&x, t);
        let marked = strict[4][t] == twins::ELASTIC_STRICT_SENTINEL;
        // J near the floor is decided by f32 rounding; elsewhere the flag follows the f64 J.
        if (j - floor as f64).abs() > 1e-4 {
            assert_eq!(marked, j < floor as f64, "element {t}: J = {j}");
        }
        below += marked as usize;
        if !marked {
            assert_eq!(strict[4][t], plain[4][t], "element {t}");
        }
    }
    // Gradients and Hessians are unchanged by the flag.
    assert_eq!(strict[5], plain[5]);
    assert_eq!(strict[6], plain[6]);
    eprintln!("{below} of {nt} elements below J = {floor}");
    assert!(below > 10 && below < nt - 10, "{below} of {nt}");
    if let Some(g) = gpu {
        for t in 0..nt {
            let (a, b) = (g[4][t], strict[4][t]);
            let j = m.element_j(&x, t);
            if (j - floor as f64).abs() > 1e-4 {
                assert_eq!(
                    a == twins::ELASTIC_STRICT_SENTINEL,
                    b == twins::ELASTIC_STRICT_SENTINEL,
                    "element {t}"
                );
            }
        }
        let keep: Vec<usize> = (0..nt)
            .filter(|&t| {
                g[4][t] != twins::ELASTIC_STRICT_SENTINEL
                    && strict[4][t] != twins::ELASTIC_STRICT_SENTINEL
            })
            .collect();
        let a: Vec<f32> = keep.iter().map(|&t| g[4][t]).collect();
        let b: Vec<f32> = keep.iter().map(|&t| strict[4][t]).collect();
        assert_close(&a, &b, 1e-4, "strict energies gpu vs cpu");
    }
}
