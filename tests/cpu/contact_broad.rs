//! The collision mesh and the broad phase (src/contact/{mesh,broad}.rs): the candidate sets
//! equal a brute-force O(n²) enumeration of box-overlapping, non-adjacent, allowed pairs on
//! random triangle soups, generated box bodies and the shared armadillo surface, static and
//! swept, with and without inflation, for self- and multi-body contact and obstacles; every pair
//! closer than d̂ is a candidate; the output is sorted and the same on one thread.

use crate::common;

use jello::contact::{candidates, BodyKind, Candidates, CollisionBody, CollisionMesh};
use jello::mesh::{box_grid, read_mesh};
use jello::problem::Model;
use rand::Rng;

type P = [f64; 3];

/// The box of `pts` grown by `r` — written out here, independently of `Aabb`.
fn bbox(pts: &[P], r: f64) -> (P, P) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for p in pts {
        for k in 0..3 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    (lo.map(|v| v - r), hi.map(|v| v + r))
}

fn overlap(a: &(P, P), b: &(P, P)) -> bool {
    (0..3).all(|k| a.0[k] <= b.1[k] && b.0[k] <= a.1[k])
}

/// Corner positions of a primitive at `x` and, swept, at `x + dx`.
fn corners(ids: &[u32], x: &[P], dx: Option<&[P]>) -> Vec<P> {
    let mut out: Vec<P> = ids.iter().map(|&v| x[v as usize]).collect();
    if let Some(d) = dx {
        for &v in ids {
            let (p, s) = (x[v as usize], d[v as usize]);
            out.push([p[0] + s[0], p[1] + s[1], p[2] + s[2]]);
        }
    }
    out
}

/// Whether bodies `a`, `b` may touch, from the bodies' fields (re-derived, not the library's).
fn may_touch(m: &CollisionMesh, a: u32, b: u32) -> bool {
    let (ba, bb) = (&m.bodies[a as usize], &m.bodies[b as usize]);
    !(ba.kind == BodyKind::Obstacle && bb.kind == BodyKind::Obstacle) && (a != b || ba.self_contact)
}

/// Brute force: every allowed pair whose boxes (grown by d̂/2) overlap; `exclude_adjacent`
/// drops pairs sharing a vertex.
fn brute(
    m: &CollisionMesh,
    x: &[P],
    dx: Option<&[P]>,
    dhat: f64,
    exclude_adjacent: bool,
) -> (Vec<[u32; 2]>, Vec<[u32; 2]>) {
    let r = 0.5 * dhat;
    let vb: Vec<_> = m
        .vertices
        .iter()
        .map(|&v| bbox(&corners(&[v], x, dx), r))
        .collect();
    let fb: Vec<_> = m
        .faces
        .iter()
        .map(|f| bbox(&corners(f, x, dx), r))
        .collect();
    let eb: Vec<_> = m
        .edges
        .iter()
        .map(|e| bbox(&corners(e, x, dx), r))
        .collect();
    let mut pt = Vec::new();
    for (v, bv) in vb.iter().enumerate() {
        for (f, bf) in fb.iter().enumerate() {
            let adjacent = m.faces[f].contains(&m.vertices[v]);
            if (!exclude_adjacent || !adjacent)
                && may_touch(m, m.vertex_body[v], m.face_body[f])
                && overlap(bv, bf)
            {
                pt.push([v as u32, f as u32]);
            }
        }
    }
    let mut ee = Vec::new();
    for a in 0..eb.len() {
        for b in a + 1..eb.len() {
            let (ea, eb2) = (m.edges[a], m.edges[b]);
            let adjacent = ea.iter().any(|v| eb2.contains(v));
            if (!exclude_adjacent || !adjacent)
                && may_touch(m, m.edge_body[a], m.edge_body[b])
                && overlap(&eb[a], &eb[b])
            {
                ee.push([a as u32, b as u32]);
            }
        }
    }
    (pt, ee)
}

/// Asserts the broad phase equals the brute force, and that the lists are strictly sorted.
fn assert_matches(
    what: &str,
    m: &CollisionMesh,
    x: &[P],
    dx: Option<&[P]>,
    dhat: f64,
) -> Candidates {
    let c = candidates(m, x, dx, dhat).unwrap();
    let (pt, ee) = brute(m, x, dx, dhat, true);
    for (name, got, want) in [("pt", &c.pt, &pt), ("ee", &c.ee, &ee)] {
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{what}: {name} not strictly sorted"
        );
        if got != want {
            let missing: Vec<_> = want.iter().filter(|p| !got.contains(p)).take(5).collect();
            let extra: Vec<_> = got.iter().filter(|p| !want.contains(p)).take(5).collect();
            panic!(
                "{what}: {name} has {} pairs, brute force {}; missing {missing:?}, extra {extra:?}",
                got.len(),
                want.len()
            );
        }
    }
    eprintln!(
        "{what}: {} pt, {} ee, cell {:.3e} m, {} entries, {} tested, {} large",
        c.pt.len(),
        c.ee.len(),
        c.stats.cell_size,
        c.stats.entries,
        c.stats.tested,
        c.stats.large
    );
    c
}

/// A random soup: `nv` vertices on a random walk of step `step` (m) in `[0, 1]³`, split into
/// `kinds.len()` bodies of consecutive ids; `nf` triangles, each of three distinct vertices of
/// one body close in id (so small, and sharing vertices and edges with their neighbours), one
/// in twenty of any three vertices of the body (long, so box sizes vary).
fn soup(
    rng: &mut impl Rng,
    nv: usize,
    nf: usize,
    step: f64,
    kinds: &[(BodyKind, bool)],
) -> (Vec<P>, CollisionMesh) {
    let mut x: Vec<P> = vec![[rng.random(), rng.random(), rng.random()]];
    while x.len() < nv {
        let p = x[x.len() - 1];
        x.push(
            [0, 1, 2].map(|k| (p[k] + step * (2.0 * rng.random::<f64>() - 1.0)).clamp(0.0, 1.0)),
        );
    }
    let nb = kinds.len();
    let bodies: Vec<CollisionBody> = kinds
        .iter()
        .enumerate()
        .map(|(i, &(kind, self_contact))| CollisionBody {
            name: format!("s{i}"),
            kind,
            self_contact,
            vertices: i * nv / nb..(i + 1) * nv / nb,
        })
        .collect();
    let faces: Vec<[u32; 3]> = (0..nf)
        .map(|_| {
            let r = bodies[rng.random_range(0..nb)].vertices.clone();
            let long = rng.random_range(0..20) == 0;
            loop {
                let base = rng.random_range(r.clone());
                let t = [0; 3].map(|_| {
                    if long {
                        rng.random_range(r.clone()) as u32
                    } else {
                        (base + rng.random_range(0..6)).min(r.end - 1) as u32
                    }
                });
                if t[0] != t[1] && t[1] != t[2] && t[2] != t[0] {
                    return t;
                }
            }
        })
        .collect();
    let m = CollisionMesh::from_triangles(&x, bodies, &faces).unwrap();
    (x, m)
}

#[test]
fn random_soups_match_brute_force() {
    let mut rng = common::rng("random_soups_match_brute_force");
    use BodyKind::{Deformable as D, Obstacle as O};
    let kinds: [&[(BodyKind, bool)]; 4] = [
        &[(D, true)],
        &[(D, true), (D, false), (D, true)],
        &[(D, true), (O, false), (O, false)],
        &[(D, false), (O, false)],
    ];
    for trial in 0..24 {
        let nv = rng.random_range(20..400);
        let nf = rng.random_range(10..500);
        let k = kinds[trial % kinds.len()];
        let step = [0.01, 0.05, 0.2][trial % 3];
        let (x, m) = soup(&mut rng, nv, nf, step, k);
        // d̂ from 0 (touching only) to about the triangle size.
        let dhat = [0.0, 1e-3, 0.01, 0.05][trial % 4];
        assert_matches(&format!("soup {trial} static"), &m, &x, None, dhat);
        let scale = [1e-3, 0.05, 0.3][trial % 3];
        let dx: Vec<P> = (0..nv)
            .map(|_| [0; 3].map(|_| scale * (2.0 * rng.random::<f64>() - 1.0)))
            .collect();
        assert_matches(&format!("soup {trial} swept"), &m, &x, Some(&dx), dhat);
    }
}

#[test]
fn small_triangles_and_long_sweeps_use_the_large_box_path() {
    // Many small triangles (so the cell is small), a few vertices swept across the whole
    // soup: their boxes cover far more than LARGE_CELLS cells and go the direct way.
    let mut rng = common::rng("small_triangles_and_long_sweeps_use_the_large_box_path");
    let nf = 600;
    let mut x = Vec::new();
    let mut faces = Vec::new();
    for f in 0..nf {
        let c: P = [rng.random(), rng.random(), rng.random()];
        for _ in 0..3 {
            x.push([0; 3].map(|k: usize| c[k] + 0.01 * rng.random::<f64>()));
        }
        let b = 3 * f as u32;
        faces.push([b, b + 1, b + 2]);
    }
    let nv = x.len();
    let bodies = vec![CollisionBody {
        name: "soup".into(),
        kind: BodyKind::Deformable,
        self_contact: true,
        vertices: 0..nv,
    }];
    let m = CollisionMesh::from_triangles(&x, bodies, &faces).unwrap();
    let mut dx = vec![[0.0; 3]; nv];
    for _ in 0..8 {
        let v = rng.random_range(0..nv);
        dx[v] = [0; 3].map(|_| 2.0 * rng.random::<f64>() - 1.0);
    }
    let c = assert_matches("long sweeps", &m, &x, Some(&dx), 1e-3);
    assert!(c.stats.large > 0, "no box took the large-box path");
}

#[test]
fn box_bodies_self_and_multi_body() {
    // Three boxes 0.2 m wide in a row with gaps of 4 mm and 12 mm, one twisted a little so
    // faces are not axis-aligned; d̂ = 5 mm reaches across the first gap only.
    let mut a = box_grid([0.0, 0.0, 0.0], [0.2, 0.2, 0.2], [3, 3, 3]);
    let mut b = box_grid([0.204, 0.0, 0.0], [0.404, 0.2, 0.2], [4, 3, 2]);
    let c = box_grid([0.416, 0.0, 0.0], [0.616, 0.2, 0.2], [2, 2, 2]);
    a.rotate_about([1.0, 0.0, 0.0], 1.0, [0.1, 0.1, 0.1])
        .unwrap();
    b.rotate_about([0.0, 1.0, 0.0], 0.5, [0.3, 0.1, 0.1])
        .unwrap();
    let model = common::bodies_model(vec![a, b, c]);
    let m = CollisionMesh::from_model(&model).unwrap();
    let x = model.mesh.positions.clone();
    let dhat = 5e-3;
    let cand = assert_matches("boxes static", &m, &x, None, dhat);
    let between = |bv: u32, bf: u32| {
        cand.pt
            .iter()
            .filter(|p| m.vertex_body[p[0] as usize] == bv && m.face_body[p[1] as usize] == bf)
            .count()
    };
    assert!(between(0, 1) > 0, "no pairs across the 4 mm gap");
    assert_eq!(between(1, 2), 0, "pairs across the 12 mm gap");
    // The exclusion is exercised: without it the brute force has adjacent pairs.
    let (pt_all, ee_all) = brute(&m, &x, None, dhat, false);
    assert!(pt_all.len() > cand.pt.len() && ee_all.len() > cand.ee.len());
    // Swept: body c moves 1 cm towards b, so b–c pairs appear.
    let mut dx = vec![[0.0; 3]; x.len()];
    for d in &mut dx[model.bodies[2].vertices.clone()] {
        *d = [-0.01, 0.0, 0.0];
    }
    let swept = assert_matches("boxes swept", &m, &x, Some(&dx), dhat);
    assert!(swept
        .pt
        .iter()
        .any(|p| m.vertex_body[p[0] as usize] == 2 && m.face_body[p[1] as usize] == 1));
}

#[test]
fn armadillo_surface_matches_brute_force() {
    let Some(path) = common::shared_mesh("armadillo_18k.node") else {
        return;
    };
    let mut rng = common::rng("armadillo_surface_matches_brute_force");
    let mesh = read_mesh(&path).unwrap().mesh;
    let model = common::bodies_model(vec![mesh]);
    let m = CollisionMesh::from_model(&model).unwrap();
    let mut x = model.mesh.positions.clone();
    // A random wobble of 0.2 mean edge lengths, then swept by as much again.
    let h = m.mean_edge_length();
    for p in &mut x {
        for c in p.iter_mut() {
            *c += 0.2 * h * (2.0 * rng.random::<f64>() - 1.0);
        }
    }
    let dx: Vec<P> = (0..x.len())
        .map(|_| [0; 3].map(|_| 0.2 * h * (2.0 * rng.random::<f64>() - 1.0)))
        .collect();
    eprintln!(
        "armadillo_18k: {} faces, {} edges, mean edge {h:.4} m",
        m.faces.len(),
        m.edges.len()
    );
    assert_matches("armadillo static", &m, &x, None, 0.1 * h);
    let c = assert_matches("armadillo swept", &m, &x, Some(&dx), 0.1 * h);
    assert!(!c.pt.is_empty() && !c.ee.is_empty());
}

#[test]
fn every_pair_closer_than_dhat_is_a_candidate() {
    // Independent of boxes: true distances (closest points) below d̂ must be candidates.
    let mut rng = common::rng("every_pair_closer_than_dhat_is_a_candidate");
    let mut close_pairs = 0;
    for trial in 0..8 {
        let (x, m) = soup(&mut rng, 300, 300, 0.05, &[(BodyKind::Deformable, true)]);
        let dhat = 0.005 * (trial + 1) as f64;
        let c = candidates(&m, &x, None, dhat).unwrap();
        let v3 = |p: P| nalgebra::Vector3::from(p);
        for (v, &gv) in m.vertices.iter().enumerate() {
            for (f, tri) in m.faces.iter().enumerate() {
                if tri.contains(&gv) {
                    continue;
                }
                let [a, b, cc] = tri.map(|i| v3(x[i as usize]));
                let p = v3(x[gv as usize]);
                let d = (jello::problem::closest_point_on_triangle(&p, &a, &b, &cc) - p).norm();
                if d < dhat {
                    close_pairs += 1;
                    assert!(
                        c.pt.binary_search(&[v as u32, f as u32]).is_ok(),
                        "pt ({v}, {f}) at distance {d} < d̂ = {dhat} missing"
                    );
                }
            }
        }
        for ea in 0..m.edges.len() {
            for eb in ea + 1..m.edges.len() {
                let ([a0, a1], [b0, b1]) = (m.edges[ea], m.edges[eb]);
                if a0 == b0 || a0 == b1 || a1 == b0 || a1 == b1 {
                    continue;
                }
                let q = |i: u32| v3(x[i as usize]);
                let d = jello::problem::segment_distance(&q(a0), &q(a1), &q(b0), &q(b1));
                if d < dhat {
                    close_pairs += 1;
                    assert!(
                        c.ee.binary_search(&[ea as u32, eb as u32]).is_ok(),
                        "ee ({ea}, {eb}) at distance {d} < d̂ = {dhat} missing"
                    );
                }
            }
        }
    }
    assert!(
        close_pairs > 100,
        "only {close_pairs} close pairs: the test checks too little"
    );
}

#[test]
fn same_result_on_one_thread() {
    let mut rng = common::rng("same_result_on_one_thread");
    let (x, m) = soup(
        &mut rng,
        3000,
        4000,
        0.02,
        &[(BodyKind::Deformable, true); 2],
    );
    let dx: Vec<P> = (0..x.len())
        .map(|_| [0; 3].map(|_| 0.02 * rng.random::<f64>()))
        .collect();
    let many = candidates(&m, &x, Some(&dx), 0.01).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let one = pool.install(|| candidates(&m, &x, Some(&dx), 0.01).unwrap());
    // Not assert_eq!: the lists are long.
    assert!(
        many.pt == one.pt,
        "point–triangle pairs differ on one thread"
    );
    assert!(many.ee == one.ee, "edge–edge pairs differ on one thread");
    assert!(
        many.stats == one.stats,
        "{:?} ≠ {:?}",
        many.stats,
        one.stats
    );
    assert!(!many.pt.is_empty() && !many.ee.is_empty());
}

#[test]
fn collision_mesh_of_a_box_model() {
    // Two boxes: a closed genus-0 surface each (V − E + F = 2 per body), rest areas that add
    // up to the boxes' surface areas, lumped areas that conserve it, edge lengths from the
    // rest positions, and primitives owned by the right body.
    let (w, h, d) = (0.3, 0.2, 0.1);
    let a = box_grid([0.0; 3], [w, h, d], [3, 2, 2]);
    let b = box_grid([1.0, 0.0, 0.0], [1.0 + w, h, d], [2, 3, 1]);
    let model = common::bodies_model(vec![a, b]);
    let m = CollisionMesh::from_model(&model).unwrap();
    let area = 2.0 * (w * h + h * d + d * w);
    for body in 0..2u32 {
        let nv = m.vertex_body.iter().filter(|&&b| b == body).count() as i64;
        let ne = m.edge_body.iter().filter(|&&b| b == body).count() as i64;
        let nf = m.face_body.iter().filter(|&&b| b == body).count() as i64;
        assert_eq!(nv - ne + nf, 2, "body {body}: Euler characteristic");
        let sum = |v: &[f64], owner: &[u32]| -> f64 {
            v.iter()
                .zip(owner)
                .filter(|(_, &o)| o == body)
                .map(|(a, _)| a)
                .sum()
        };
        for (what, got) in [
            ("faces", sum(&m.face_rest_area, &m.face_body)),
            ("vertices", sum(&m.vertex_area, &m.vertex_body)),
            ("edges", sum(&m.edge_area, &m.edge_body)),
        ] {
            assert!(
                (got - area).abs() < 1e-12,
                "body {body}: {what} area {got} ≠ {area}"
            );
        }
    }
    for (e, &[p, q]) in m.edges.iter().enumerate() {
        let (p, q) = (x_of(&model, p), x_of(&model, q));
        let l = ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt();
        assert!((l - m.edge_rest_length[e]).abs() < 1e-15);
        let body = model
            .bodies
            .iter()
            .position(|b| b.vertices.contains(&(m.edges[e][0] as usize)))
            .unwrap();
        assert_eq!(m.edge_body[e] as usize, body);
    }
    for (f, fe) in m.face_edges.iter().enumerate() {
        let t = m.faces[f];
        for (k, &e) in fe.iter().enumerate() {
            let (u, v) = (t[k], t[(k + 1) % 3]);
            assert_eq!(m.edges[e as usize], [u.min(v), u.max(v)]);
        }
    }
    assert!(m.vertices.windows(2).all(|w| w[0] < w[1]));
    assert!(m.edges.windows(2).all(|w| w[0] < w[1]));
}

fn x_of(model: &Model, v: u32) -> P {
    model.mesh.positions[v as usize]
}

#[test]
fn obstacles_touch_bodies_but_not_each_other() {
    // A box body resting 2 mm above two overlapping obstacle floors (added through the hook):
    // body–obstacle pairs within d̂ = 5 mm, no obstacle–obstacle pair although they overlap.
    let model = common::bodies_model(vec![box_grid(
        [0.0, 0.002, 0.0],
        [0.2, 0.202, 0.2],
        [2, 2, 2],
    )]);
    let mut m = CollisionMesh::from_model(&model).unwrap();
    let quad = |y: f64| -> (Vec<P>, Vec<[u32; 3]>) {
        (
            vec![
                [-1.0, y, -1.0],
                [1.0, y, -1.0],
                [1.0, y, 1.0],
                [-1.0, y, 1.0],
            ],
            vec![[0, 2, 1], [0, 3, 2]],
        )
    };
    let (p1, t1) = quad(0.0);
    let (p2, t2) = quad(0.001);
    assert_eq!(m.add_obstacle("floor", &p1, &t1).unwrap(), 1);
    assert_eq!(m.add_obstacle("floor2", &p2, &t2).unwrap(), 2);
    assert_eq!(m.num_vertices(), model.mesh.num_vertices() + 8);
    let x = m.positions(&model.mesh.positions).into_owned();
    assert_eq!(&x[model.mesh.num_vertices()..][..4], &p1[..]);
    let c = assert_matches("obstacles", &m, &x, None, 5e-3);
    let body_vs_floor =
        c.pt.iter()
            .filter(|p| m.vertex_body[p[0] as usize] == 0 && m.face_body[p[1] as usize] >= 1)
            .count();
    assert!(body_vs_floor > 0, "no body–floor pairs");
    assert!(c
        .ee
        .iter()
        .all(|e| { m.edge_body[e[0] as usize] == 0 || m.edge_body[e[1] as usize] == 0 }));
    assert!(c
        .pt
        .iter()
        .all(|p| { m.vertex_body[p[0] as usize] == 0 || m.face_body[p[1] as usize] == 0 }));
}

#[test]
fn empty_and_tiny_meshes() {
    // No faces at all, and a single triangle: no pairs, no panic, valid statistics.
    let x = vec![[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let body = CollisionBody {
        name: "b".into(),
        kind: BodyKind::Deformable,
        self_contact: true,
        vertices: 0..3,
    };
    let empty = CollisionMesh::from_triangles(&x, vec![body.clone()], &[]).unwrap();
    let c = candidates(&empty, &x, None, 0.1).unwrap();
    assert!(c.pt.is_empty() && c.ee.is_empty());
    assert!(jello::contact::intersecting_pairs(&empty, &x)
        .unwrap()
        .is_empty());
    let one = CollisionMesh::from_triangles(&x, vec![body], &[[0, 1, 2]]).unwrap();
    let c = candidates(&one, &x, Some(&x), 10.0).unwrap();
    assert!(
        c.pt.is_empty() && c.ee.is_empty(),
        "adjacent pairs of one triangle"
    );
    assert!(c.stats.cell_size > 0.0);
}

#[test]
fn bad_input_is_refused_with_one_line() {
    let model = common::bodies_model(vec![box_grid([0.0; 3], [1.0; 3], [1, 1, 1])]);
    let m = CollisionMesh::from_model(&model).unwrap();
    let x = model.mesh.positions.clone();
    let one_line = |e: jello::JelloError, want: &str| {
        let s = e.to_string();
        assert!(s.contains(want) && !s.contains('\n'), "{s}");
    };
    one_line(candidates(&m, &x[1..], None, 0.1).unwrap_err(), "positions");
    one_line(
        candidates(&m, &x, Some(&x[1..]), 0.1).unwrap_err(),
        "displacements",
    );
    one_line(candidates(&m, &x, None, -1.0).unwrap_err(), "d̂");
    one_line(candidates(&m, &x, None, f64::NAN).unwrap_err(), "d̂");
    let mut bad = x.clone();
    bad[m.vertices[3] as usize][1] = f64::NAN;
    one_line(candidates(&m, &bad, None, 0.1).unwrap_err(), "non-finite");
    one_line(
        jello::contact::intersecting_pairs(&m, &bad).unwrap_err(),
        "non-finite",
    );
    let body = |r: std::ops::Range<usize>| CollisionBody {
        name: "b".into(),
        kind: BodyKind::Deformable,
        self_contact: true,
        vertices: r,
    };
    let pts = vec![[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    one_line(
        CollisionMesh::from_triangles(&pts, vec![body(0..2), body(2..4)], &[[0, 1, 2]])
            .unwrap_err(),
        "spans bodies",
    );
    one_line(
        CollisionMesh::from_triangles(&pts, vec![body(0..4)], &[[0, 1, 7]]).unwrap_err(),
        "out of range",
    );
    one_line(
        CollisionMesh::from_triangles(&pts, vec![body(0..4)], &[[0, 1, 1]]).unwrap_err(),
        "repeats",
    );
    one_line(
        CollisionMesh::from_triangles(&pts, vec![body(0..3), body(2..4)], &[[0, 1, 2]])
            .unwrap_err(),
        "share vertex",
    );
    one_line(
        CollisionMesh::from_triangles(&pts, vec![body(0..2)], &[[0, 1, 3]]).unwrap_err(),
        "no body",
    );
    let mut m2 = m.clone();
    one_line(
        m2.add_obstacle("wall", &pts, &[]).unwrap_err(),
        "obstacle `wall`",
    );
    one_line(
        m2.add_obstacle("wall", &pts, &[[0, 1, 9]]).unwrap_err(),
        "out of range",
    );
    let mut nan = pts.clone();
    nan[2][0] = f64::INFINITY;
    one_line(
        m2.add_obstacle("wall", &nan, &[[0, 1, 2]]).unwrap_err(),
        "non-finite",
    );
    assert_eq!(m2, m, "a refused obstacle left the mesh changed");
}
