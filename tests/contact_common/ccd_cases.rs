//! The adversarial CCD trajectories of `tests/cpu/contact_ccd.rs` (f64 ACCD) and
//! `tests/gpu/gpu_ccd.rs` (the device kernel): random and adversarial point–triangle and
//! edge–edge cases ([`draw`] per kind, [`KINDS_PT`], [`KINDS_EE`]) with an exact time-of-impact
//! reference ([`Case::reference_toi`]).
//!
//! Reference (independent of `jello::contact`): the squared distance of every feature pair
//! (point–point, point–line, point–plane, line–line) along the linear trajectories is a
//! polynomial in t; the first time the pair's distance reaches ξ is the earliest root of
//! d_f(t)² − ξ² (or, for ξ = 0, of the coplanarity cubic) at which the true distance (the
//! feature minimum of tests/contact_common) is ≤ ξ + 1e-13 m. Roots are isolated between the
//! roots of the derivative (recursively) and bisected. A sampled scan checks that no contact
//! precedes it. The root functions are evaluated from the positions at each time (the expanded
//! polynomials only isolate the roots): expanded coefficients lose ~1e-8 of the distance near a
//! root, more than the rounding slack the reference allows.
#![allow(dead_code)]

use super::{ee_distance_sq, pt_distance_sq, rand_perp, rand_point, rand_unit, V3};
use rand::Rng;

/// A polynomial in t, coefficients from the constant term up.
#[derive(Clone, Debug)]
struct Poly(Vec<f64>);

impl Poly {
    fn linear(a: f64, b: f64) -> Self {
        Poly(vec![a, b])
    }

    fn combine(&self, o: &Poly, sign: f64) -> Poly {
        let n = self.0.len().max(o.0.len());
        Poly(
            (0..n)
                .map(|k| self.0.get(k).unwrap_or(&0.0) + sign * o.0.get(k).unwrap_or(&0.0))
                .collect(),
        )
    }

    fn add(&self, o: &Poly) -> Poly {
        self.combine(o, 1.0)
    }

    fn sub(&self, o: &Poly) -> Poly {
        self.combine(o, -1.0)
    }

    fn mul(&self, o: &Poly) -> Poly {
        let mut c = vec![0.0; self.0.len() + o.0.len() - 1];
        for (i, a) in self.0.iter().enumerate() {
            for (j, b) in o.0.iter().enumerate() {
                c[i + j] += a * b;
            }
        }
        Poly(c)
    }

    fn eval(&self, t: f64) -> f64 {
        self.0.iter().rev().fold(0.0, |acc, c| acc * t + c)
    }

    fn derivative(&self) -> Poly {
        Poly(
            self.0
                .iter()
                .enumerate()
                .skip(1)
                .map(|(k, c)| k as f64 * c)
                .collect(),
        )
    }

    /// Its real roots in [0, 1], ascending, as sign changes of `f` — the same function
    /// evaluated directly from the positions, which is far more accurate near a root than the
    /// expanded coefficients: between consecutive roots of the polynomial's derivative it is
    /// monotone, so each sign change there holds exactly one root, found by bisection on `f`.
    fn roots01(&self, f: &dyn Fn(f64) -> f64) -> Vec<f64> {
        let mut c = self.0.clone();
        while c.len() > 1 && c[c.len() - 1] == 0.0 {
            c.pop();
        }
        let p = Poly(c);
        if p.0.len() <= 1 {
            return vec![];
        }
        let mut knots = vec![0.0];
        let derivative = p.derivative();
        knots.extend(derivative.roots01(&|t| derivative.eval(t)));
        knots.push(1.0);
        let mut out = Vec::new();
        for w in knots.windows(2) {
            let (mut a, mut b) = (w[0], w[1]);
            let (fa, fb) = (f(a), f(b));
            if fa == 0.0 {
                out.push(a);
                continue;
            }
            if fb == 0.0 || fa.signum() == fb.signum() {
                continue;
            }
            for _ in 0..200 {
                let m = 0.5 * (a + b);
                if m <= a || m >= b {
                    break;
                }
                if f(m).signum() == fa.signum() {
                    a = m;
                } else {
                    b = m;
                }
            }
            out.push(a);
        }
        if f(1.0) == 0.0 {
            out.push(1.0);
        }
        out
    }
}

/// A point moving linearly: three coordinate polynomials.
type VPoly = [Poly; 3];

fn vpoly(x0: &V3, x1: &V3) -> VPoly {
    [0, 1, 2].map(|k| Poly::linear(x0[k], x1[k] - x0[k]))
}

/// Vector algebra over scalars `S` and 3-vectors `V`: once over polynomials in t (the
/// trajectories), once over plain values (positions at one time).
trait Algebra {
    type S;
    type V;
    fn c(x: f64) -> Self::S;
    fn ssub(a: &Self::S, b: &Self::S) -> Self::S;
    fn smul(a: &Self::S, b: &Self::S) -> Self::S;
    fn sub(a: &Self::V, b: &Self::V) -> Self::V;
    fn dot(a: &Self::V, b: &Self::V) -> Self::S;
    fn cross(a: &Self::V, b: &Self::V) -> Self::V;
}

struct Polys;

impl Algebra for Polys {
    type S = Poly;
    type V = VPoly;
    fn c(x: f64) -> Poly {
        Poly(vec![x])
    }
    fn ssub(a: &Poly, b: &Poly) -> Poly {
        a.sub(b)
    }
    fn smul(a: &Poly, b: &Poly) -> Poly {
        a.mul(b)
    }
    fn sub(a: &VPoly, b: &VPoly) -> VPoly {
        [0, 1, 2].map(|k| a[k].sub(&b[k]))
    }
    fn dot(a: &VPoly, b: &VPoly) -> Poly {
        a[0].mul(&b[0]).add(&a[1].mul(&b[1])).add(&a[2].mul(&b[2]))
    }
    fn cross(a: &VPoly, b: &VPoly) -> VPoly {
        [
            a[1].mul(&b[2]).sub(&a[2].mul(&b[1])),
            a[2].mul(&b[0]).sub(&a[0].mul(&b[2])),
            a[0].mul(&b[1]).sub(&a[1].mul(&b[0])),
        ]
    }
}

struct Values;

impl Algebra for Values {
    type S = f64;
    type V = V3;
    fn c(x: f64) -> f64 {
        x
    }
    fn ssub(a: &f64, b: &f64) -> f64 {
        a - b
    }
    fn smul(a: &f64, b: &f64) -> f64 {
        a * b
    }
    fn sub(a: &V3, b: &V3) -> V3 {
        a - b
    }
    fn dot(a: &V3, b: &V3) -> f64 {
        a.dot(b)
    }
    fn cross(a: &V3, b: &V3) -> V3 {
        a.cross(b)
    }
}

/// A feature pair of the reference: two vertices, a vertex and a line (vertex, line ends), or
/// the planar pair (point–plane, line–line).
#[derive(Clone, Copy, Debug)]
enum Feature {
    Points(usize, usize),
    PointLine(usize, usize, usize),
    Planar,
}

/// One CCD query: vertices 0..4 (PT: point, triangle; EE: edge a, edge b) moving linearly.
#[derive(Clone, Debug)]
pub struct Case {
    pub kind: &'static str,
    pub pt: bool,
    pub start: [V3; 4],
    pub end: [V3; 4],
    pub xi: f64,
}

impl Case {
    pub fn at(&self, t: f64) -> [V3; 4] {
        [0, 1, 2, 3].map(|k| self.start[k] + (self.end[k] - self.start[k]) * t)
    }

    /// The true (reference) distance at time t, m.
    pub fn dist(&self, t: f64) -> f64 {
        let x = self.at(t);
        if self.pt {
            pt_distance_sq(&x[0], &x[1], &x[2], &x[3]).sqrt()
        } else {
            ee_distance_sq(&x[0], &x[1], &x[2], &x[3]).sqrt()
        }
    }

    /// The feature pairs whose roots hold the first contact: vertex pairs and vertex–line
    /// pairs when ξ > 0, and the point–plane or line–line pair.
    fn features(&self) -> Vec<Feature> {
        let mut out = vec![Feature::Planar];
        if self.xi > 0.0 {
            if self.pt {
                for k in 0..3 {
                    out.push(Feature::Points(0, 1 + k));
                    out.push(Feature::PointLine(0, 1 + k, 1 + (k + 1) % 3));
                }
            } else {
                for i in 0..2 {
                    out.push(Feature::PointLine(i, 2, 3));
                    out.push(Feature::PointLine(2 + i, 0, 1));
                    for j in 0..2 {
                        out.push(Feature::Points(i, 2 + j));
                    }
                }
            }
        }
        out
    }

    /// The feature's root function d_f² − ξ² (times the line's or plane's normalisation), or for
    /// ξ = 0 and the planar pair the signed coplanarity (q₀ − r₀)·n, in vector algebra `A` —
    /// polynomials of the trajectories or plain values at one time.
    fn root_function<A: Algebra>(&self, f: Feature, x: &[A::V; 4]) -> A::S {
        let xi2 = A::c(self.xi * self.xi);
        match f {
            Feature::Points(i, j) => {
                let r = A::sub(&x[i], &x[j]);
                A::ssub(&A::dot(&r, &r), &xi2)
            }
            Feature::PointLine(p, e0, e1) => {
                let c = A::cross(&A::sub(&x[e0], &x[p]), &A::sub(&x[e1], &x[p]));
                let e = A::sub(&x[e1], &x[e0]);
                A::ssub(&A::dot(&c, &c), &A::smul(&A::dot(&e, &e), &xi2))
            }
            Feature::Planar => {
                let (w, n) = if self.pt {
                    (
                        A::sub(&x[0], &x[1]),
                        A::cross(&A::sub(&x[2], &x[1]), &A::sub(&x[3], &x[1])),
                    )
                } else {
                    (
                        A::sub(&x[0], &x[2]),
                        A::cross(&A::sub(&x[1], &x[0]), &A::sub(&x[3], &x[2])),
                    )
                };
                let h = A::dot(&w, &n);
                if self.xi == 0.0 {
                    h
                } else {
                    A::ssub(&A::smul(&h, &h), &A::smul(&A::dot(&n, &n), &xi2))
                }
            }
        }
    }

    /// Whether the distance at t counts as having reached the separation (rounding-level slack,
    /// which can only make the reference earlier, hence the test stricter).
    pub fn touching(&self, t: f64) -> bool {
        self.dist(t) <= self.xi + 1e-13
    }

    /// The exact first time in [0, 1] at which the distance reaches ξ; `None`: never.
    pub fn reference_toi(&self) -> Option<f64> {
        let toi = if self.touching(0.0) {
            Some(0.0)
        } else {
            let traj: [VPoly; 4] = [0, 1, 2, 3].map(|k| vpoly(&self.start[k], &self.end[k]));
            let mut roots: Vec<f64> = Vec::new();
            for f in self.features() {
                let poly = self.root_function::<Polys>(f, &traj);
                let direct = |t: f64| self.root_function::<Values>(f, &self.at(t));
                roots.extend(poly.roots01(&direct));
            }
            roots.sort_by(f64::total_cmp);
            roots.into_iter().find(|&t| self.touching(t))
        };
        // The scan: nothing before the reference time may be closer than ξ.
        let end = toi.unwrap_or(1.0);
        for k in 0..400 {
            let t = end * k as f64 / 400.0;
            let d = self.dist(t);
            assert!(
                d >= self.xi * (1.0 - 1e-7) - 1e-11,
                "reference missed a contact: distance {d:e} < ξ = {:e} at t = {t} before {toi:?}: \
                 {self:?}",
                self.xi
            );
        }
        toi
    }
}

/// Positions at time `tau` given as `at`, velocities `vel`: the start and end positions.
fn through(at: [V3; 4], vel: [V3; 4], tau: f64) -> ([V3; 4], [V3; 4]) {
    (
        [0, 1, 2, 3].map(|k| at[k] - vel[k] * tau),
        [0, 1, 2, 3].map(|k| at[k] + vel[k] * (1.0 - tau)),
    )
}

fn random_xi(rng: &mut impl Rng) -> f64 {
    [0.0, 1e-3, 1e-2, 5e-2][rng.random_range(0..4)]
}

fn small_vel(rng: &mut impl Rng, s: f64) -> [V3; 4] {
    [0, 1, 2, 3].map(|_| rand_point(rng, s))
}

fn triangle(rng: &mut impl Rng) -> [V3; 3] {
    loop {
        let t = [0, 1, 2].map(|_| rand_point(rng, 1.0));
        // Not a sliver: the tests aim at the CCD, not at degenerate triangles.
        if (t[1] - t[0]).cross(&(t[2] - t[0])).norm() > 0.2 {
            return t;
        }
    }
}

/// A point inside triangle `t`, at least 2% (barycentric) from its edges.
fn interior(rng: &mut impl Rng, t: &[V3; 3]) -> V3 {
    let (a, b) = (rng.random_range(0.02..0.96), rng.random_range(0.02..0.96));
    let (a, b) = if a + b > 0.98 {
        (0.98 - b, 0.98 - a)
    } else {
        (a, b)
    };
    t[0] + (t[1] - t[0]) * a + (t[2] - t[0]) * b
}

fn unit_normal(t: &[V3; 3]) -> V3 {
    (t[1] - t[0]).cross(&(t[2] - t[0])).normalize()
}

/// The positions `start` moved by `vel` (a unit time step).
fn moved(start: &[V3; 4], vel: &[V3; 4]) -> [V3; 4] {
    [0, 1, 2, 3].map(|k| start[k] + vel[k])
}

/// The velocity of a primitive starting at z = ξ(1 + s) over one in z = 0: anywhere when it
/// starts inside the separation (s < 0), else down towards it.
fn separation_velocity(rng: &mut impl Rng, s: f64) -> V3 {
    if s < 0.0 {
        rand_point(rng, 1.0)
    } else {
        V3::new(
            rng.random_range(-0.5..0.5),
            rng.random_range(-0.5..0.5),
            -1.0,
        )
    }
}

/// A case of the given kind for the point–triangle (`pt`) or edge–edge family; no relative
/// motion (zero, or all four vertices shifted alike) starts like a random case.
pub fn draw(rng: &mut impl Rng, pt: bool, kind: &'static str) -> Option<Case> {
    if kind == "zero motion" || kind == "rigid motion" {
        let mut case = draw(rng, pt, "random")?;
        let shift = if kind == "zero motion" {
            V3::zeros()
        } else {
            rand_point(rng, 3.0)
        };
        case.kind = kind;
        case.end = case.start.map(|x| x + shift);
        return Some(case);
    }
    if pt {
        pt_case(rng, kind)
    } else {
        ee_case(rng, kind)
    }
}

/// A random point–triangle case of the given kind (None when the draw is unusable, e.g. it
/// starts closer than ξ where the kind needs a clear start).
fn pt_case(rng: &mut impl Rng, kind: &'static str) -> Option<Case> {
    let t = triangle(rng);
    let n = unit_normal(&t);
    let mk = |start: [V3; 4], end: [V3; 4], xi| Case {
        kind,
        pt: true,
        start,
        end,
        xi,
    };
    let case = match kind {
        "random" => {
            let p = rand_point(rng, 1.5);
            let start = [p, t[0], t[1], t[2]];
            let vel = [0, 1, 2, 3].map(|k| rand_point(rng, if k == 0 { 2.0 } else { 0.5 }));
            mk(start, moved(&start, &vel), random_xi(rng))
        }
        "small steps" => {
            // Newton-sized motion near contact: a point within 0.1 of the face.
            let xi = [0.0, 1e-3][rng.random_range(0..2)];
            let p = interior(rng, &t) + n * rng.random_range(-0.1..0.1);
            let start = [p, t[0], t[1], t[2]];
            let vel = small_vel(rng, 0.05);
            mk(start, moved(&start, &vel), xi)
        }
        "head-on" => {
            let xi = random_xi(rng);
            let side = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            let at = [interior(rng, &t) + n * (side * xi), t[0], t[1], t[2]];
            let mut vel = small_vel(rng, 0.2);
            vel[0] += -n * side * rng.random_range(0.5..3.0);
            let (s, e) = through(at, vel, rng.random_range(0.05..0.95));
            mk(s, e, xi)
        }
        "through edge" | "through corner" => {
            let k = rng.random_range(0..3);
            let q = if kind == "through edge" {
                t[k] + (t[(k + 1) % 3] - t[k]) * rng.random_range(0.02..0.98)
            } else {
                t[k]
            };
            let mut vel = small_vel(rng, 0.2);
            vel[0] = rand_unit(rng) * rng.random_range(0.5..3.0);
            let (s, e) = through([q, t[0], t[1], t[2]], vel, rng.random_range(0.05..0.95));
            mk(s, e, random_xi(rng))
        }
        "grazing face" | "grazing edge" => {
            // Static triangle; the point slides parallel to the face (or along an edge's
            // outside) at ξ(1 ± δ) from it: δ > 0 never touches, δ < 0 touches on the way.
            let xi = [1e-3, 1e-2, 5e-2][rng.random_range(0..3)];
            let delta = [1e-3, -1e-3, 1e-5, -1e-5][rng.random_range(0..4)];
            let gap = xi * (1.0 + delta);
            let (q, dir, off) = if kind == "grazing face" {
                (interior(rng, &t), rand_perp(rng, &n), n * gap)
            } else {
                let k = rng.random_range(0..3);
                let (e0, e1) = (t[k], t[(k + 1) % 3]);
                let dir = (e1 - e0).normalize();
                let mut out = n.cross(&dir);
                if out.dot(&(t[(k + 2) % 3] - e0)) > 0.0 {
                    out = -out;
                }
                let phi = rng.random_range(-1.2..1.2f64);
                let q = e0 + (e1 - e0) * rng.random_range(0.2..0.8);
                (q, dir, (out * phi.cos() + n * phi.sin()) * gap)
            };
            let speed = rng.random_range(1.0..3.0);
            let at = [q + off, t[0], t[1], t[2]];
            let vel = [dir * speed, V3::zeros(), V3::zeros(), V3::zeros()];
            let (s, e) = through(at, vel, rng.random_range(0.3..0.7));
            mk(s, e, xi)
        }
        "sliding at gap" => {
            // Resting contact sliding over the face at ξ(1 + δ): the gap never shrinks, ACCD's
            // steps are ≈ gap/speed, and the iteration cap ends the search.
            let xi = [1e-3, 1e-2][rng.random_range(0..2)];
            let gap = xi * (1.0 + [1e-2, 1e-4][rng.random_range(0..2)]);
            let start = [interior(rng, &t) + n * gap, t[0], t[1], t[2]];
            let mut end = start;
            end[0] += rand_perp(rng, &n) * rng.random_range(0.5..2.0);
            mk(start, end, xi)
        }
        "at separation" => {
            // A triangle in z = 0 and the point at z = ξ·(1 + s) over it, s ∈ {−1e-9, 0, 1e-9},
            // moving towards it (or anywhere when it starts inside the separation).
            let xi = [1e-3, 1e-2, 5e-2][rng.random_range(0..3)];
            let tz = [0, 1, 2].map(|k| V3::new(t[k].x, t[k].y, 0.0));
            if (tz[1] - tz[0]).cross(&(tz[2] - tz[0])).norm() < 0.2 {
                return None;
            }
            let s = [-1e-9, 0.0, 1e-9][rng.random_range(0..3)];
            let c = (tz[0] + tz[1] + tz[2]) / 3.0;
            let p = V3::new(c.x, c.y, xi * (1.0 + s));
            let mut vel = [0, 1, 2, 3].map(|_| V3::zeros());
            vel[0] = separation_velocity(rng, s);
            let start = [p, tz[0], tz[1], tz[2]];
            mk(start, moved(&start, &vel), xi)
        }
        _ => unreachable!("{kind}"),
    };
    Some(case)
}

/// A random edge–edge case of the given kind (see [`pt_case`]).
fn ee_case(rng: &mut impl Rng, kind: &'static str) -> Option<Case> {
    let mk = |start: [V3; 4], end: [V3; 4], xi| Case {
        kind,
        pt: false,
        start,
        end,
        xi,
    };
    let a0 = rand_point(rng, 1.0);
    let u = rand_unit(rng) * rng.random_range(0.5..1.5);
    let case = match kind {
        "random" => {
            let start = [a0, a0 + u, rand_point(rng, 1.0), rand_point(rng, 1.0)];
            let vel = [0, 1, 2, 3].map(|_| rand_point(rng, 1.5));
            mk(start, moved(&start, &vel), random_xi(rng))
        }
        "small steps" => {
            let xi = [0.0, 1e-3][rng.random_range(0..2)];
            let b0 = a0 + u * rng.random_range(0.2..0.8) + rand_point(rng, 0.1);
            let start = [
                a0,
                a0 + u,
                b0 - rand_unit(rng) * 0.5,
                b0 + rand_unit(rng) * 0.5,
            ];
            let vel = small_vel(rng, 0.05);
            mk(start, moved(&start, &vel), xi)
        }
        "crossing" | "end through edge" => {
            // At τ the edges meet: interior–interior, or a's first end on b's interior.
            let s = if kind == "crossing" {
                rng.random_range(0.02..0.98)
            } else {
                0.0
            };
            let q = a0 + u * s;
            let v = rand_unit(rng) * rng.random_range(0.5..1.5);
            let b0 = q - v * rng.random_range(0.02..0.98);
            let vel = [0, 1, 2, 3].map(|_| rand_point(rng, 1.5));
            let (st, e) = through([a0, a0 + u, b0, b0 + v], vel, rng.random_range(0.05..0.95));
            mk(st, e, random_xi(rng))
        }
        "parallel approach" | "parallel sliding" => {
            // b = a shifted (exactly parallel); b approaches across, or slides along a at a
            // constant distance ξ(1 ± δ) from far apart into overlap.
            let xi = [1e-3, 1e-2, 5e-2][rng.random_range(0..3)];
            let dir = u.normalize();
            let perp = rand_perp(rng, &dir);
            let k = rng.random_range(0.5..1.5) * if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            let v = u * k;
            let (b0, vel) = if kind == "parallel approach" {
                let b0 = a0 + perp * rng.random_range(0.1..1.0) + u * rng.random_range(-1.0..1.0);
                let vb = -perp * rng.random_range(0.5..2.0) + dir * rng.random_range(-1.0..1.0);
                (b0, vb)
            } else {
                let delta = [1e-3, -1e-3, 1e-5, -1e-5][rng.random_range(0..4)];
                let b0 = a0 + perp * (xi * (1.0 + delta)) + dir * 3.0;
                (b0, -dir * rng.random_range(3.0..6.0))
            };
            let start = [a0, a0 + u, b0, b0 + v];
            let end = [a0, a0 + u, b0 + vel, b0 + v + vel];
            let case = mk(start, end, xi);
            if case.touching(0.0) {
                return None;
            }
            case
        }
        "nearly parallel" => {
            let angle = [1e-3, 1e-6][rng.random_range(0..2)];
            let axis = nalgebra::Unit::new_normalize(rand_perp(rng, &u.normalize()));
            let v = nalgebra::Rotation3::from_axis_angle(&axis, angle) * u;
            let perp = rand_perp(rng, &u.normalize());
            let b0 = a0 + perp * rng.random_range(0.1..1.0) + u * rng.random_range(-0.5..0.5);
            let vel = -perp * rng.random_range(0.5..2.0);
            let start = [a0, a0 + u, b0, b0 + v];
            let end = [a0, a0 + u, b0 + vel, b0 + v + vel];
            mk(start, end, random_xi(rng))
        }
        "grazing" => {
            // Skew edges, b translating in the plane normal to n at line distance ξ(1 ± δ).
            let xi = [1e-3, 1e-2, 5e-2][rng.random_range(0..3)];
            let delta = [1e-3, -1e-3, 1e-5, -1e-5][rng.random_range(0..4)];
            let v = rand_unit(rng) * rng.random_range(0.5..1.5);
            let n = u.cross(&v);
            if n.norm() < 0.2 * u.norm() * v.norm() {
                return None;
            }
            let n = n.normalize();
            let q = a0 + u * rng.random_range(0.1..0.9);
            let b0 = q + n * (xi * (1.0 + delta)) - v * rng.random_range(0.1..0.9);
            let w = rand_perp(rng, &n) * rng.random_range(1.0..3.0);
            let vel = [V3::zeros(), V3::zeros(), w, w];
            let (s, e) = through([a0, a0 + u, b0, b0 + v], vel, rng.random_range(0.3..0.7));
            mk(s, e, xi)
        }
        "sliding at gap" => {
            // Parallel, overlapping edges sliding along each other at ξ(1 + δ).
            let xi = [1e-3, 1e-2][rng.random_range(0..2)];
            let gap = xi * (1.0 + [1e-2, 1e-4][rng.random_range(0..2)]);
            let dir = u.normalize();
            let b0 = a0 + rand_perp(rng, &dir) * gap + u * rng.random_range(-0.3..0.3);
            let slide = dir * rng.random_range(0.5..2.0);
            let start = [a0, a0 + u, b0, b0 + u];
            mk(start, [a0, a0 + u, b0 + slide, b0 + u + slide], xi)
        }
        "at separation" => {
            // a in z = 0, b crossing over it at z = ξ·(1 + s), moving down.
            let xi = [1e-3, 1e-2, 5e-2][rng.random_range(0..3)];
            let s = [-1e-9, 0.0, 1e-9][rng.random_range(0..3)];
            let a0 = V3::new(-0.5, rng.random_range(-0.2..0.2), 0.0);
            let a1 = V3::new(0.5, rng.random_range(-0.2..0.2), 0.0);
            let z = xi * (1.0 + s);
            let b0 = V3::new(rng.random_range(-0.2..0.2), -0.5, z);
            let b1 = V3::new(rng.random_range(-0.2..0.2), 0.5, z);
            let vel = separation_velocity(rng, s);
            let start = [a0, a1, b0, b1];
            mk(start, [a0, a1, b0 + vel, b1 + vel], xi)
        }
        _ => unreachable!("{kind}"),
    };
    Some(case)
}

/// The cases of the given kinds and counts for the point–triangle (`pt`) or edge–edge family,
/// in order: every kind but "at separation" starts clear of ξ, and the passing kinds (grazing,
/// parallel sliding) start at least 0.05 m beyond it (sliding from the start is its own kind).
pub fn cases(rng: &mut impl Rng, pt: bool, kinds: &[(&'static str, usize)]) -> Vec<Case> {
    let mut out = Vec::new();
    for &(kind, count) in kinds {
        let mut done = 0;
        while done < count {
            let Some(case) = draw(rng, pt, kind) else {
                continue;
            };
            if case.touching(0.0) && kind != "at separation" {
                continue;
            }
            let passing = kind.starts_with("grazing") || kind == "parallel sliding";
            if passing && case.dist(0.0) < case.xi + 0.05 {
                continue;
            }
            done += 1;
            out.push(case);
        }
    }
    out
}

/// The point–triangle kinds and their case counts (7,830 in all).
pub const KINDS_PT: [(&str, usize); 11] = [
    ("random", 3000),
    ("small steps", 1200),
    ("head-on", 800),
    ("through edge", 600),
    ("through corner", 600),
    ("grazing face", 600),
    ("grazing edge", 600),
    ("sliding at gap", 30),
    ("zero motion", 50),
    ("rigid motion", 50),
    ("at separation", 300),
];

/// The edge–edge kinds and their case counts (8,430 in all).
pub const KINDS_EE: [(&str, usize); 12] = [
    ("random", 3000),
    ("small steps", 1200),
    ("crossing", 800),
    ("end through edge", 600),
    ("parallel approach", 600),
    ("parallel sliding", 600),
    ("nearly parallel", 600),
    ("grazing", 600),
    ("sliding at gap", 30),
    ("zero motion", 50),
    ("rigid motion", 50),
    ("at separation", 300),
];
