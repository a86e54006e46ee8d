//! The exact triangle–triangle intersection check (src/contact/intersect.rs): constructed cases
//! (crossing, touching at a vertex or an edge, coplanar overlap, adjacent faces folded through
//! each other, disjoint, one ulp apart), integer-coordinate soups against an independent exact
//! reference in i128 (origin in the convex hull of the Minkowski difference, by Carathéodory),
//! and real surfaces (at rest: none; pushed through: found).

use crate::common;

use jello::contact::{
    check_intersection_free, faces_intersect, intersecting_pairs, triangles_intersect, BodyKind,
    CollisionBody, CollisionMesh,
};
use jello::mesh::{box_grid, read_mesh};
use rand::Rng;

type P = [f64; 3];
type I = [i128; 3];

// ---- the independent reference: exact integer geometry ----

fn sub(a: I, b: I) -> I {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn cross(a: I, b: I) -> I {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn dot(a: I, b: I) -> i128 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn orient(a: I, b: I, c: I, d: I) -> i128 {
    dot(sub(b, a), cross(sub(c, a), sub(d, a)))
}

/// Whether the origin lies in the convex hull of `pts`: by Carathéodory, in a point, segment,
/// triangle or tetrahedron of them (closed), tested with exact integer predicates.
fn origin_in_hull(pts: &[I]) -> bool {
    let o = [0; 3];
    let n = pts.len();
    if pts.contains(&o) {
        return true;
    }
    for i in 0..n {
        for j in i + 1..n {
            let (p, q) = (pts[i], pts[j]);
            if p != q && cross(p, q) == o && dot(p, q) <= 0 {
                return true;
            }
            for k in j + 1..n {
                let r = pts[k];
                let nrm = cross(sub(q, p), sub(r, p));
                if nrm != o
                    && dot(nrm, p) == 0
                    && dot(cross(sub(q, p), sub(o, p)), nrm) >= 0
                    && dot(cross(sub(r, q), sub(o, q)), nrm) >= 0
                    && dot(cross(sub(p, r), sub(o, r)), nrm) >= 0
                {
                    return true;
                }
                for &s in &pts[k + 1..] {
                    let d = orient(p, q, r, s);
                    if d == 0 {
                        continue;
                    }
                    let parts = [
                        orient(o, q, r, s),
                        orient(p, o, r, s),
                        orient(p, q, o, s),
                        orient(p, q, r, o),
                    ];
                    if parts.iter().all(|&v| v == 0 || (v > 0) == (d > 0)) {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// Whether the convex hulls of `a` and `b` share a point: 0 ∈ hull(a − b).
fn hulls_meet(a: &[I], b: &[I]) -> bool {
    let diff: Vec<I> = a
        .iter()
        .flat_map(|&p| b.iter().map(move |&q| sub(p, q)))
        .collect();
    origin_in_hull(&diff)
}

fn degenerate(t: &[I; 3]) -> bool {
    cross(sub(t[1], t[0]), sub(t[2], t[0])) == [0; 3]
}

/// The reference for mesh faces `f`, `g` (ids) over integer positions `x`, by shared count:
/// none — hulls meet; one — the cones at the shared vertex meet beyond it (a segment of one
/// cone's section against the other cone truncated far enough); two — coplanar, same side of
/// the shared edge; three or a degenerate face in an adjacent pair — true (the documented rule).
fn reference(f: [u32; 3], g: [u32; 3], x: &[I]) -> bool {
    let t = f.map(|v| x[v as usize]);
    let u = g.map(|v| x[v as usize]);
    let shared: Vec<u32> = f.iter().copied().filter(|v| g.contains(v)).collect();
    if shared.is_empty() {
        return hulls_meet(&t, &u);
    }
    if shared.len() == 3 || degenerate(&t) || degenerate(&u) {
        return true;
    }
    let others = |tri: [u32; 3]| -> Vec<I> {
        tri.iter()
            .filter(|v| !shared.contains(v))
            .map(|&v| x[v as usize])
            .collect()
    };
    let (ot, ou) = (others(f), others(g));
    if shared.len() == 1 {
        let v = x[shared[0] as usize];
        // Coordinates are within ±8, so a cone point on the section segment has cone
        // coordinates below 2·16·16·√3 < 1000: truncating at R = 1000 loses nothing.
        const R: i128 = 1000;
        let section = [sub(ot[0], v), sub(ot[1], v)];
        let cone = [
            [0; 3],
            sub(ou[0], v).map(|c| R * c),
            sub(ou[1], v).map(|c| R * c),
        ];
        return hulls_meet(&section, &cone);
    }
    let (a, b) = (x[shared[0] as usize], x[shared[1] as usize]);
    let (c, d) = (ot[0], ou[0]);
    orient(a, b, c, d) == 0 && dot(cross(sub(b, a), sub(c, a)), cross(sub(b, a), sub(d, a))) > 0
}

// ---- helpers ----

fn one_body(x: &[P], faces: &[[u32; 3]]) -> CollisionMesh {
    let body = CollisionBody {
        name: "soup".into(),
        kind: BodyKind::Deformable,
        self_contact: true,
        vertices: 0..x.len(),
    };
    CollisionMesh::from_triangles(x, vec![body], faces).unwrap()
}

fn up(v: f64) -> f64 {
    v.next_up()
}

// ---- constructed cases ----

#[test]
fn constructed_pairs_without_shared_vertices() {
    let t1: [P; 3] = [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0]];
    let cases: Vec<(&str, [P; 3], bool)> = vec![
        (
            "crossing",
            [[0.5, 0.5, -1.0], [0.5, 0.5, 1.0], [1.5, 0.2, 0.3]],
            true,
        ),
        (
            "disjoint above",
            [[0.5, 0.5, 1.0], [0.5, 0.6, 1.0], [1.5, 0.2, 1.3]],
            false,
        ),
        (
            "vertex on the interior",
            [[0.5, 0.5, 0.0], [0.5, 0.6, 1.0], [1.5, 0.2, 1.0]],
            true,
        ),
        (
            "vertex one ulp above the interior",
            [[0.5, 0.5, up(0.0)], [0.5, 0.6, 1.0], [1.5, 0.2, 1.0]],
            false,
        ),
        (
            "vertex on an edge",
            [[1.0, 0.0, 0.0], [1.0, -1.0, 1.0], [1.0, 1.0, 1.0]],
            true,
        ),
        (
            "vertex on a corner",
            [[2.0, 0.0, 0.0], [3.0, 0.0, 1.0], [3.0, 1.0, -1.0]],
            true,
        ),
        (
            "edge lying in the interior",
            [[0.2, 0.2, 0.0], [0.8, 0.4, 0.0], [0.5, 0.5, 1.0]],
            true,
        ),
        (
            "edges crossing at a point",
            [[1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.0, -1.0]],
            true,
        ),
        (
            "edge passing one ulp beside a corner",
            [
                [up(2.0), -1.0, 0.0],
                [up(2.0), 1.0, 0.0],
                [up(2.0), 0.0, -1.0],
            ],
            false,
        ),
        (
            "coplanar overlapping",
            [[1.0, 1.0, 0.0], [3.0, 1.0, 0.0], [1.0, 3.0, 0.0]],
            true,
        ),
        (
            "coplanar inside",
            [[0.2, 0.2, 0.0], [0.5, 0.2, 0.0], [0.2, 0.5, 0.0]],
            true,
        ),
        (
            "coplanar sharing a segment of an edge",
            [[0.5, 0.0, 0.0], [1.5, 0.0, 0.0], [1.0, -1.0, 0.0]],
            true,
        ),
        (
            "coplanar, separated by a gap",
            [[1.1, 1.1, 0.0], [3.0, 1.1, 0.0], [1.1, 3.0, 0.0]],
            false,
        ),
        (
            "coplanar, touching at a corner",
            [[2.0, 0.0, 0.0], [3.0, 0.0, 0.0], [3.0, 1.0, 0.0]],
            true,
        ),
        (
            "parallel plane",
            [[0.2, 0.2, 1e-9], [0.5, 0.2, 1e-9], [0.2, 0.5, 1e-9]],
            false,
        ),
    ];
    for (what, t2, want) in cases {
        assert_eq!(triangles_intersect(&t1, &t2), want, "{what}");
        assert_eq!(triangles_intersect(&t2, &t1), want, "{what} (swapped)");
    }
    // A tilted plane x + y + z = 3 holds (1, 1, 1) exactly; one ulp off, it does not.
    let tilted: [P; 3] = [[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]];
    let far = [[2.0, 2.0, 2.0], [2.0, 3.0, 2.0]];
    assert!(triangles_intersect(
        &tilted,
        &[[1.0, 1.0, 1.0], far[0], far[1]]
    ));
    assert!(!triangles_intersect(
        &tilted,
        &[[1.0, 1.0, up(1.0)], far[0], far[1]]
    ));
    // Zero-area triangles: a segment through the interior, a point on an edge, a point off.
    let seg: [P; 3] = [[0.5, 0.5, -1.0], [0.5, 0.5, 0.0], [0.5, 0.5, 1.0]];
    assert!(triangles_intersect(&t1, &seg));
    let pt: [P; 3] = [[1.0, 0.0, 0.0]; 3];
    assert!(triangles_intersect(&t1, &pt));
    assert!(!triangles_intersect(
        &t1,
        &[[1.0, up(0.0).max(1e-300), 0.1]; 3]
    ));
    // Two zero-area triangles on one line: touching end to end, then one ulp apart.
    let on_line = |s: f64| -> [P; 3] { [[s; 3], [s + 1.0; 3], [s + 2.0; 3]] };
    assert!(triangles_intersect(&on_line(0.0), &on_line(2.0)));
    assert!(!triangles_intersect(&on_line(0.0), &on_line(up(2.0))));
    assert!(triangles_intersect(&on_line(0.0), &on_line(-1.0)));
}

#[test]
fn constructed_adjacent_pairs() {
    // Ids 0..: v = (0,0,0) shared; the rest distinct vertices (some at equal coordinates).
    let x: Vec<P> = vec![
        [0.0, 0.0, 0.0],    // 0 v
        [2.0, 0.0, 0.0],    // 1
        [0.0, 2.0, 0.0],    // 2
        [0.5, 0.5, -1.0],   // 3
        [0.5, 0.5, 1.0],    // 4
        [1.0, 1.0, 1.0],    // 5
        [-1.0, 1.0, 1.0],   // 6
        [1.0, 1.0, 0.0],    // 7
        [-1.0, 1.0, 0.0],   // 8
        [-1.0, 0.0, 0.0],   // 9
        [0.0, -1.0, 0.0],   // 10
        [0.0, 1.0, 0.0],    // 11 (on the edge 0–2)
        [1.0, 2.0, 0.0],    // 12
        [1.0, -2.0, 0.0],   // 13
        [1.0, 2.0, 1.0],    // 14
        [1.0, 2.0, 1e-300], // 15
        [4.0, 0.0, 0.0],    // 16 (collinear with 0 and 1)
    ];
    let t1 = [0, 1, 2];
    let cases: Vec<(&str, [u32; 3], bool)> = vec![
        (
            "shared vertex, folded through the interior",
            [0, 3, 4],
            true,
        ),
        ("shared vertex, apart", [0, 5, 6], false),
        ("shared vertex, coplanar overlap", [0, 7, 8], true),
        ("shared vertex, coplanar opposite", [0, 9, 10], false),
        ("shared vertex, coplanar along an edge", [0, 11, 8], true),
        (
            "shared vertex, coplanar touching an edge from outside",
            [0, 9, 8],
            false,
        ),
        ("shared edge, folded flat onto each other", [0, 1, 12], true),
        ("shared edge, flat and opposite", [0, 1, 13], false),
        ("shared edge, bent", [0, 1, 14], false),
        ("shared edge, bent by 1e-300", [0, 1, 15], false),
        ("shared edge, reversed winding", [1, 0, 12], true),
        ("duplicate face", [2, 0, 1], true),
        ("adjacent zero-area face", [0, 1, 16], true),
    ];
    for (what, t2, want) in cases {
        assert_eq!(faces_intersect(t1, t2, &x), want, "{what}");
        assert_eq!(faces_intersect(t2, t1, &x), want, "{what} (swapped)");
    }
}

// ---- random integer soups against the reference ----

/// `n` vertices with integer coordinates (local clusters within ±`spread`, centres within
/// ±`range`), triangles of three distinct ids near each other (shared vertices and edges).
fn int_soup(
    rng: &mut impl Rng,
    nv: usize,
    nf: usize,
    range: i64,
    spread: i64,
) -> (Vec<I>, Vec<[u32; 3]>) {
    let mut x = Vec::with_capacity(nv);
    while x.len() < nv {
        let c = [0; 3].map(|_| rng.random_range(-range..=range));
        for _ in 0..4 {
            x.push([0, 1, 2].map(|k| (c[k] + rng.random_range(-spread..=spread)) as i128));
        }
    }
    x.truncate(nv);
    let faces = (0..nf)
        .map(|_| loop {
            let base = rng.random_range(0..nv);
            let t = [0; 3].map(|_| (base + rng.random_range(0..8)).min(nv - 1) as u32);
            if t[0] != t[1] && t[1] != t[2] && t[2] != t[0] {
                break t;
            }
        })
        .collect();
    (x, faces)
}

#[test]
fn integer_soups_match_the_exact_reference() {
    let mut rng = common::rng("integer_soups_match_the_exact_reference");
    // Per shared count: [intersecting, apart] pairs seen, so every branch is exercised.
    let mut seen = [[0usize; 2]; 4];
    for trial in 0..40 {
        let (range, spread) = [(4, 4), (6, 2), (3, 1)][trial % 3];
        let (xi, faces) = int_soup(&mut rng, 60, 70, range, spread);
        let x: Vec<P> = xi.iter().map(|p| p.map(|c| c as f64)).collect();
        let m = one_body(&x, &faces);
        let got = intersecting_pairs(&m, &x).unwrap();
        assert!(got.windows(2).all(|w| w[0] < w[1]), "not strictly sorted");
        let mut want = Vec::new();
        for f in 0..faces.len() {
            for g in f + 1..faces.len() {
                let hit = reference(faces[f], faces[g], &xi);
                let shared = m.faces_shared_vertices(f, g);
                seen[shared][usize::from(!hit)] += 1;
                if hit {
                    want.push([f as u32, g as u32]);
                }
            }
        }
        if got != want {
            let missing: Vec<_> = want.iter().filter(|p| !got.contains(p)).take(3).collect();
            let extra: Vec<_> = got.iter().filter(|p| !want.contains(p)).take(3).collect();
            let show = |p: &[u32; 2]| {
                (
                    faces[p[0] as usize].map(|v| xi[v as usize]),
                    faces[p[1] as usize].map(|v| xi[v as usize]),
                    faces[p[0] as usize],
                    faces[p[1] as usize],
                )
            };
            panic!(
                "trial {trial}: {} pairs, reference {}; missing {:?}, extra {:?}",
                got.len(),
                want.len(),
                missing.iter().map(|p| show(p)).collect::<Vec<_>>(),
                extra.iter().map(|p| show(p)).collect::<Vec<_>>()
            );
        }
    }
    eprintln!("pairs by shared vertices [intersecting, apart]: {seen:?}");
    for (s, c) in seen.iter().enumerate().take(3) {
        assert!(
            c[0] > 20 && c[1] > 20,
            "shared {s}: {c:?} — too few of a kind"
        );
    }
}

#[test]
fn generic_integer_triangles_match_the_reference() {
    // Large coordinates (up to 2^20): generic position, decided by the exact reference too.
    let mut rng = common::rng("generic_integer_triangles_match_the_reference");
    let mut hits = 0;
    let n = 3000;
    for _ in 0..n {
        let c = [0; 3].map(|_| rng.random_range(-(1i64 << 20)..(1 << 20)));
        let mut tri = || -> [I; 3] {
            [0; 3].map(|_| {
                [0, 1, 2].map(|k| (c[k] + rng.random_range(-(1i64 << 19)..(1 << 19))) as i128)
            })
        };
        let a = tri();
        let b = tri();
        let want = hulls_meet(&a, &b);
        let f = |t: [I; 3]| t.map(|p| p.map(|c| c as f64));
        assert_eq!(triangles_intersect(&f(a), &f(b)), want, "{a:?} {b:?}");
        hits += usize::from(want);
    }
    eprintln!("{hits} of {n} pairs intersect");
    assert!(hits > n / 10 && hits < n * 9 / 10);
}

// ---- real surfaces ----

#[test]
fn box_surfaces_at_rest_and_pushed_through() {
    // A box surface at rest has many coplanar adjacent faces (flat sides): none may be
    // reported. Then a top vertex pushed below the bottom, and two overlapping boxes.
    let model = common::bodies_model(vec![box_grid([0.0; 3], [0.3, 0.2, 0.25], [3, 2, 3])]);
    let m = CollisionMesh::from_model(&model).unwrap();
    let mut x = model.mesh.positions.clone();
    assert_eq!(intersecting_pairs(&m, &x).unwrap(), Vec::<[u32; 2]>::new());
    let top = (0..x.len())
        .find(|&v| {
            x[v][1] == 0.2 && (x[v][0] - 0.1).abs() < 1e-9 && (x[v][2] - 0.25 / 3.0).abs() < 1e-9
        })
        .expect("an interior top vertex");
    x[top][1] = -0.05;
    let hits = intersecting_pairs(&m, &x).unwrap();
    assert!(!hits.is_empty(), "a vertex pushed through the bottom");
    assert!(hits.iter().all(|p| p
        .iter()
        .any(|&f| m.faces[f as usize].contains(&(top as u32)))));

    let a = box_grid([0.0; 3], [0.2; 3], [2, 2, 2]);
    let mut b = box_grid([0.15, 0.05, 0.05], [0.35, 0.25, 0.25], [2, 2, 2]);
    let two = common::bodies_model(vec![a.clone(), b.clone()]);
    let m2 = CollisionMesh::from_model(&two).unwrap();
    let hits = intersecting_pairs(&m2, &two.mesh.positions).unwrap();
    assert!(!hits.is_empty());
    assert!(hits
        .iter()
        .all(|p| m2.face_body[p[0] as usize] != m2.face_body[p[1] as usize]));
    let e = check_intersection_free(&m2, &two.mesh.positions)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("bodies `b0` and `b1` intersect") && !e.contains('\n'),
        "{e}"
    );
    let e = check_intersection_free(&m, &x).unwrap_err().to_string();
    assert!(e.starts_with("body `b0` intersects itself"), "{e}");
    b.translate([0.06, 0.0, 0.0]);
    let apart = common::bodies_model(vec![a, b]);
    let m3 = CollisionMesh::from_model(&apart).unwrap();
    assert_eq!(
        intersecting_pairs(&m3, &apart.mesh.positions).unwrap(),
        Vec::<[u32; 2]>::new()
    );
    check_intersection_free(&m3, &apart.mesh.positions).unwrap();
}

#[test]
fn armadillo_at_rest_is_intersection_free_and_a_dent_is_found() {
    let Some(path) = common::shared_mesh("armadillo_18k.node") else {
        return;
    };
    let mut rng = common::rng("armadillo_at_rest_is_intersection_free_and_a_dent_is_found");
    let model = common::bodies_model(vec![read_mesh(&path).unwrap().mesh]);
    let m = CollisionMesh::from_model(&model).unwrap();
    let mut x = model.mesh.positions.clone();
    assert_eq!(intersecting_pairs(&m, &x).unwrap(), Vec::<[u32; 2]>::new());
    // Push a random surface vertex through the body along minus its face normal until its
    // faces cross the surface on the other side.
    let v = m.vertices[rng.random_range(0..m.vertices.len())] as usize;
    let f = m.faces.iter().find(|f| f.contains(&(v as u32))).unwrap();
    let [a, b, c] = f.map(|i| x[i as usize]);
    let (e1, e2) = (
        [b[0] - a[0], b[1] - a[1], b[2] - a[2]],
        [c[0] - a[0], c[1] - a[1], c[2] - a[2]],
    );
    let n = [
        e1[1] * e2[2] - e1[2] * e2[1],
        e1[2] * e2[0] - e1[0] * e2[2],
        e1[0] * e2[1] - e1[1] * e2[0],
    ];
    let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
    for k in 0..3 {
        // The mesh spans 1 m: 1.5 m inward leaves the body on the other side.
        x[v][k] -= 1.5 * n[k] / len;
    }
    let hits = intersecting_pairs(&m, &x).unwrap();
    eprintln!(
        "vertex {v} pushed through: {} intersecting pairs",
        hits.len()
    );
    assert!(!hits.is_empty());
}
