//! Twins of the IPC contact-pair kernels (`shaders/ipc_pairs.wgsl`, `shaders/ipc_gather.wgsl`,
//! with `shaders/shared/ipc_pair.wgsl` and `shaders/shared/sym12.wgsl`): f32, operation for
//! operation, the f32 mirror of `crate::contact`'s distances, mollifier and barrier.
//!
//! The candidate pairs come from the CPU broad phase (`crate::contact::broad`): it stays on the
//! CPU in issue 12, and the host uploads the pair list ([`GpuPair`], with each edge–edge pair's
//! mollifier threshold from rest lengths) and the gather's CSR whenever it reruns.
//!
//! # `ipc_pairs` (one invocation per candidate pair)
//! For pair i (a [`GpuPair`]): the closest-feature type ([`pt_type`], [`ee_type`]; codes below),
//! the squared distance d² (m²), and with d̂² = `Params::f0` (m²) and κ = `Params::f1`:
//! energy κ·m·b(d²) (m = the edge–edge mollifier, 1 for point–triangle), its 12-gradient and
//! its 12×12 Hessian (PSD-projected with [`IPC_PROJECT`]). Pairs with d² ≥ d̂² are inactive:
//! energy, gradient and Hessian 0 (d² and the type are still written). A pair with d² ≤ 0
//! (touching or crossed, which the CCD-filtered solvers never produce) gets the energy
//! [`IPC_SENTINEL`] and zero derivatives.
//!
//! Formulas as in `crate::contact`: the distance of the classified type as min_u ‖r(x, u)‖²
//! with gradient 2wᵢr and Hessian f_xx − 2MG⁻¹Mᵀ ([`crate::contact::distance`]); G⁻¹ of the
//! 2×2 Gram matrix divides by ‖D₁ × D₂‖² (equal to det G, without its cancellation); b(d)
//! = −(d − d̂)² ln(d/d̂) ([`crate::contact::barrier`]) with ln(d/d̂) from the series of
//! 2 artanh((d − d̂)/(d + d̂)) for d ≥ d̂/2 (f32 `log` near 1 — WGSL allows 2⁻²¹ absolute error
//! there — would lose the barrier's relative precision as d → d̂) and (r/d)² for r²/d² (no
//! underflow of d²·d² at small d); the mollifier and the product rule as in
//! [`crate::contact::mollifier`].
//!
//! **Hessian storage.** The full 12×12 (144 f32, 576 B per pair, row-major, dofs vertex-major
//! in the pair's vertex order) rather than its 78-entry upper triangle: it is the `elastic`
//! kernel's layout, so what consumes element Hessians (`gather_hessian_diag`, `dev_curvature`'s
//! dᵀHd, `ipc_gather`) takes pair Hessians unchanged with the pairs' vertex quadruples in place
//! of tets. Under `Limits::default()` (128 MiB per binding) one dispatch holds up to ~233,000
//! pairs' Hessians; a host with more splits the list. The PSD projection is cyclic Jacobi on
//! the 12×12 ([`super::sym12`]: 10 sweeps, accuracy there).
//!
//! **Classification** mirrors `crate::contact::distance` (Ericson's walks) with two f32
//! changes. Nearly parallel edges: the unclamped segment parameter
//! s = (b·f − c·e)/(a·e − b²) of `segment_closest` is evaluated as (n × v)·r / ‖n‖²
//! (n = u × v; equal by Lagrange's identity), whose relative error is ~ε/sinθ where the
//! differences of products have ~ε/sin²θ — in f32 the latter sent crossing interiors with
//! sin²θ up to 4·10⁻⁷ to endpoint types. And the parallel threshold:
//!
//! **Parallel edges** use the threshold [`PARALLEL_SIN2_F32`] = ε_f32 ≈ 1.2·10⁻⁷ instead of the
//! f64 code's 2.5·10⁻¹⁶: the same balance at f32 precision — line–line's normal has relative
//! error ≈ ε/sinθ, the endpoint-minimum over-estimates the distance of crossing segments by at
//! most L·sinθ, both ≈ 3.5·10⁻⁴·L at sinθ = √ε — so edges with 2.5·10⁻¹⁶ ≤ sin²θ < 1.2·10⁻⁷
//! take an endpoint type here and line–line in f64. The mollifier has faded such a pair's energy
//! to m ≤ 2·10³·sin²θ ≈ 2.4·10⁻⁴ of its barrier (with rest lengths near the current ones).
//!
//! **Precision.** Positions are f32 relative to the model's centroid; a distance is computed
//! from differences of positions (each correctly rounded), so the result depends on the pair's
//! size L (its largest vertex distance) and not on its distance from the origin. The type's
//! value is a cancellation: ‖(e₀ − p) × (e₁ − p)‖, (p − t₀)·n or (a₀ − b₀)·n of vectors of
//! length ~L give a result of size ~d, so d² has relative error ~ε·L/d (point–edge,
//! point–plane) or ~ε·L/(d·sinθ) (line–line), none for point–point. The barrier adds
//! ~ε·d̂²/(d̂² − d²) near d̂ (b ~ (d̂² − d²)³ there), the mollifier ~ε/sinθ. So a pair at
//! d = 10⁻⁴·d̂ with d̂ = 0.05·L has d² to ~ε·2·10⁵ ≈ 2·10⁻² relative: what f32 resolves, not a
//! defect of the kernel; the f64 path (`crate::contact`) is the reference for such pairs.
//! Close, nearly parallel edges are the worst case: at d = 10⁻⁴·d̂ and sin²θ = 10⁻⁶ the
//! line–line value has κ_d ≈ 10⁸ and f32 no digits (measured: a mollified pair's projected
//! Hessian off by 4·10⁴ times the f64 one's norm); the mollifier fades such pairs
//! (m ≈ 2·10³·sin²θ), and a host that needs them exact evaluates them in f64.
//!
//! Measured against the f64 code (`tests/gpu/gpu_contact_kernels.rs`, 2,400 random and adversarial
//! pairs per seed, seeds 1–150): over pairs of condition κ = κ_d·κ_b·κ_m ≤ 100, relative errors
//! ≤ 1.3·10⁻⁷ (d²), 3.5·10⁻⁷ (energy, gradient) and 5.5·10⁻⁷ (Hessians) in the global norm;
//! every pair's d² within 2.0·ε·κ_d and its energy, gradient and Hessians within 5.8·ε·κ. The
//! GPU matches the twin bit for bit in d² on lavapipe (the rest within 5·10⁻⁷: log and
//! division) and within the same bounds on llvmpipe-GL (FMA contraction), where points built
//! exactly over an edge and tied parallel edges may take the neighbouring type (same distance).
//!
//! The 12×12 work arrays are module-scope `var<private>` in the WGSL, not pointer arguments:
//! GLSL copies array arguments in and out of every call, which made the GL driver's compile of
//! this kernel take ~110 s instead of ~9 (lavapipe ~5 s).
//!
//! Type codes (`ptype`): point–triangle 0–2 corner k (point–point), 3–5 edge k = (tₖ, tₖ₊₁)
//! (point–line), 6 face (point–plane); edge–edge 2i + j for endpoints (aᵢ, bⱼ), 4 + i for aᵢ
//! and the interior of b, 6 + j for bⱼ and the interior of a, 8 both interiors (line–line).
//!
//! # `ipc_gather` (one invocation per vertex)
//! Over the vertex→(pair, slot) CSR ([`crate::gpu::VertexCsr::from_pairs`], built on the host):
//! `g[v].xyz += Σ pair_grad[4·pair + slot]`, and with [`IPC_GATHER_HESSIAN`] `hdiag[v] += Σ`
//! the pair Hessians' diagonal 3×3 blocks, in CSR order — no atomics. The per-pair energies
//! sum with the `reduce_sum` kernel.

use super::need;
use super::sym12::project_psd12;
use crate::contact::distance::EdgeEdgeType;
use crate::gpu::{GpuMat3, GpuPair, GpuVec4, Params};
use crate::problem::TriangleFeature;
use crate::{JelloError, Result};
use glam::Vec3;
use rayon::prelude::*;

pub use crate::gpu::abi::{
    IPC_GATHER_HESSIAN, IPC_GRADIENT, IPC_HESSIAN, IPC_PROJECT, IPC_SENTINEL,
};
/// sin²θ below which two edges count as parallel in f32 (module docs).
pub const PARALLEL_SIN2_F32: f32 = f32::EPSILON;
/// Degenerate-length threshold of the classifications (the f64 code's 1e-300 has no f32 value;
/// the smallest normal is also safe where a device flushes subnormals).
const TINY: f32 = f32::MIN_POSITIVE;

/// The type code of a point–triangle feature (module docs).
pub fn pt_code(f: TriangleFeature) -> u32 {
    match f {
        TriangleFeature::Vertex(k) => k as u32,
        TriangleFeature::Edge(k) => 3 + k as u32,
        TriangleFeature::Face => 6,
    }
}

/// The point–triangle feature of a type code (`None` above 6).
pub fn pt_feature(code: u32) -> Option<TriangleFeature> {
    Some(match code {
        0..=2 => TriangleFeature::Vertex(code as usize),
        3..=5 => TriangleFeature::Edge(code as usize - 3),
        6 => TriangleFeature::Face,
        _ => return None,
    })
}

/// The type code of an edge–edge type (module docs).
pub fn ee_code(t: EdgeEdgeType) -> u32 {
    match t {
        EdgeEdgeType::Endpoints(i, j) => 2 * i as u32 + j as u32,
        EdgeEdgeType::EndpointA(i) => 4 + i as u32,
        EdgeEdgeType::EndpointB(j) => 6 + j as u32,
        EdgeEdgeType::Interiors => 8,
    }
}

/// The edge–edge type of a type code (`None` above 8).
pub fn ee_type_of(code: u32) -> Option<EdgeEdgeType> {
    Some(match code {
        0..=3 => EdgeEdgeType::Endpoints(code as usize / 2, code as usize % 2),
        4 | 5 => EdgeEdgeType::EndpointA(code as usize - 4),
        6 | 7 => EdgeEdgeType::EndpointB(code as usize - 6),
        8 => EdgeEdgeType::Interiors,
        _ => return None,
    })
}

// ---------------------------------------------------------------- classification

/// Closest feature of triangle `abc` to `p`: Ericson's walk, as
/// [`crate::problem::closest_feature_on_triangle`] (mirror of WGSL `pt_type`).
pub fn pt_type(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> u32 {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = ab.dot(ap);
    let d2 = ac.dot(ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return 0;
    }
    let bp = p - b;
    let d3 = ab.dot(bp);
    let d4 = ac.dot(bp);
    if d3 >= 0.0 && d4 <= d3 {
        return 1;
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return 3;
    }
    let cp = p - c;
    let d5 = ab.dot(cp);
    let d6 = ac.dot(cp);
    if d6 >= 0.0 && d5 <= d6 {
        return 2;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return 5;
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        return 4;
    }
    let denom = va + vb + vc;
    if denom.abs() <= TINY {
        // Degenerate (zero-area) triangle: the closest of its edges' closest points.
        let t = [a, b, c];
        let mut best = f32::INFINITY;
        let mut code = 0;
        for k in 0..3 {
            let (e0, e1) = (t[k], t[(k + 1) % 3]);
            let s = point_segment_param(p, e0, e1);
            let f = if s <= 0.0 {
                k as u32
            } else if s >= 1.0 {
                ((k + 1) % 3) as u32
            } else {
                3 + k as u32
            };
            let dist = (e0 + (e1 - e0) * s - p).length_squared();
            if dist < best {
                best = dist;
                code = f;
            }
        }
        return code;
    }
    6
}

/// The clamped parameter of the point of segment `e0e1` closest to `p` (0 for a zero-length
/// segment): [`crate::problem::segment_closest`]`(p, p, e0, e1).1`.
fn point_segment_param(p: Vec3, e0: Vec3, e1: Vec3) -> f32 {
    let d2 = e1 - e0;
    let e = d2.length_squared();
    if e <= TINY {
        return 0.0;
    }
    (d2.dot(p - e0) / e).clamp(0.0, 1.0)
}

/// Point–edge type as 0/1 (endpoint) or 2 (interior).
fn pe_type(p: Vec3, e0: Vec3, e1: Vec3) -> u32 {
    let t = point_segment_param(p, e0, e1);
    if t <= 0.0 {
        0
    } else if t >= 1.0 {
        1
    } else {
        2
    }
}

/// ‖(e₀ − p) × (e₁ − p)‖² / ‖e₁ − e₀‖².
fn point_line_value(p: Vec3, e0: Vec3, e1: Vec3) -> f32 {
    (e0 - p).cross(e1 - p).length_squared() / (e1 - e0).length_squared()
}

/// Closest features of edges `a0a1`, `b0b1` ([`crate::contact::distance::edge_edge_type`] with
/// the f32 parallel threshold, and the determinant of the closest-point system as ‖u × v‖²;
/// mirror of WGSL `ee_type`).
pub fn ee_type(a0: Vec3, a1: Vec3, b0: Vec3, b1: Vec3) -> u32 {
    let u = a1 - a0;
    let v = b1 - b0;
    let uu = u.length_squared();
    let vv = v.length_squared();
    let n = u.cross(v);
    if uu <= TINY || vv <= TINY || n.length_squared() < PARALLEL_SIN2_F32 * uu * vv {
        return ee_parallel_type(a0, a1, b0, b1);
    }
    // Ericson's segment–segment closest points (crate::problem::segment_closest), with the
    // unclamped line parameter s = (b·f − c·vv)/(uu·vv − b²) evaluated as (n × v)·r / ‖n‖²
    // (the same quantity by Lagrange's identity): the differences of products have relative
    // error ~ε/sin²θ, the cross-product forms ~ε/sinθ — the first misclassifies nearly
    // parallel edges in f32 (measured: sin²θ up to 4e-7 took an endpoint type for crossing
    // interiors).
    let r = a0 - b0;
    let f = v.dot(r);
    let c = u.dot(r);
    let b = u.dot(v);
    let denom = n.length_squared();
    let mut s = if denom > 0.0 {
        (n.cross(v).dot(r) / denom).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut t = (b * s + f) / vv;
    if t < 0.0 {
        t = 0.0;
        s = (-c / uu).clamp(0.0, 1.0);
    } else if t > 1.0 {
        t = 1.0;
        s = ((b - c) / uu).clamp(0.0, 1.0);
    }
    let end = |x: f32| {
        if x <= 0.0 {
            0
        } else if x >= 1.0 {
            1
        } else {
            2
        }
    };
    match (end(s), end(t)) {
        (2, 2) => 8,
        (2, j) => 6 + j,
        (i, 2) => 4 + i,
        (i, j) => 2 * i + j,
    }
}

/// Parallel (or degenerate) edges: the closest of the four endpoint-to-segment pairs, the
/// first on ties.
fn ee_parallel_type(a0: Vec3, a1: Vec3, b0: Vec3, b1: Vec3) -> u32 {
    let cand = [(a0, b0, b1), (a1, b0, b1), (b0, a0, a1), (b1, a0, a1)];
    let mut best = f32::INFINITY;
    let mut code = 0;
    for (k, (p, e0, e1)) in cand.into_iter().enumerate() {
        let ty = pe_type(p, e0, e1);
        let d = if ty == 2 {
            point_line_value(p, e0, e1)
        } else {
            (p - [e0, e1][ty as usize]).length_squared()
        };
        let own = (k % 2) as u32; // the endpoint's index on its own edge
        let ee = match (ty, k < 2) {
            (2, true) => 4 + own,
            (2, false) => 6 + own,
            (j, true) => 2 * own + j,
            (i, false) => 2 * i + own,
        };
        if d < best {
            best = d;
            code = ee;
        }
    }
    code
}

// ---------------------------------------------------------------- distance with derivatives

/// One classified distance as min_u ‖r‖², r = Σᵢ wᵢ(u)xᵢ over the pair's 4 vertices (mirror of
/// WGSL `Dist`): the value, r and w at the minimiser, ∂wᵢ/∂uₖ, the directions Dₖ = ∂r/∂uₖ and
/// the inverse Gram matrix (g₁₁, g₁₂, g₂₂) of the K ≤ 2 parameters.
#[derive(Clone, Copy, Debug, Default)]
struct Dist {
    value: f32,
    r: Vec3,
    w: [f32; 4],
    dw: [[f32; 2]; 4],
    dirs: [Vec3; 2],
    ginv: [f32; 3],
}

fn dist_point_point(x: &[Vec3; 4], i: usize, j: usize) -> Dist {
    let r = x[i] - x[j];
    let mut d = Dist {
        value: r.length_squared(),
        r,
        ..Dist::default()
    };
    d.w[i] = 1.0;
    d.w[j] = -1.0;
    d
}

fn dist_point_line(x: &[Vec3; 4], i: usize, j: usize, k: usize) -> Dist {
    let (p, e0, e1) = (x[i], x[j], x[k]);
    let e = e1 - e0;
    let ee = e.length_squared();
    let alpha = e.dot(p - e0) / ee;
    let mut d = Dist {
        value: point_line_value(p, e0, e1),
        r: (p - e0) - e * alpha,
        ..Dist::default()
    };
    d.w[i] = 1.0;
    d.w[j] = alpha - 1.0;
    d.w[k] = -alpha;
    d.dw[j][0] = 1.0;
    d.dw[k][0] = -1.0;
    d.dirs[0] = -e;
    d.ginv[0] = 1.0 / ee;
    d
}

/// min over (u₁, u₂) of ‖w + u₁D₁ + u₂D₂‖²: (value, r, u₁, u₂, G⁻¹) as `distance.rs`'s
/// `planar`, with det G = ‖D₁ × D₂‖².
fn planar(w: Vec3, d1: Vec3, d2: Vec3) -> (f32, Vec3, f32, f32, [f32; 3]) {
    let n = d1.cross(d2);
    let nn = n.length_squared();
    let h = w.dot(n);
    let (g11, g12, g22) = (d1.dot(d1), d1.dot(d2), d2.dot(d2));
    let (r1, r2) = (-d1.dot(w), -d2.dot(w));
    let u1 = (g22 * r1 - g12 * r2) / nn;
    let u2 = (g11 * r2 - g12 * r1) / nn;
    (
        h * h / nn,
        n * (h / nn),
        u1,
        u2,
        [g22 / nn, -g12 / nn, g11 / nn],
    )
}

fn dist_point_plane(x: &[Vec3; 4]) -> Dist {
    let (e1, e2) = (x[2] - x[1], x[3] - x[1]);
    let (value, r, beta, gamma, ginv) = planar(x[0] - x[1], -e1, -e2);
    Dist {
        value,
        r,
        w: [1.0, beta + gamma - 1.0, -beta, -gamma],
        dw: [[0.0, 0.0], [1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]],
        dirs: [-e1, -e2],
        ginv,
    }
}

fn dist_line_line(x: &[Vec3; 4]) -> Dist {
    let (u, v) = (x[1] - x[0], x[3] - x[2]);
    let (value, r, s, t, ginv) = planar(x[0] - x[2], u, -v);
    Dist {
        value,
        r,
        w: [1.0 - s, s, t - 1.0, -t],
        dw: [[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]],
        dirs: [u, -v],
        ginv,
    }
}

/// The classified distance of pair kind `kind` and type `code` on stencil `x`.
fn classified(x: &[Vec3; 4], kind: u32, code: u32) -> Dist {
    if kind == GpuPair::POINT_TRIANGLE {
        match code {
            0..=2 => dist_point_point(x, 0, 1 + code as usize),
            3..=5 => {
                let k = code as usize - 3;
                dist_point_line(x, 0, 1 + k, 1 + (k + 1) % 3)
            }
            _ => dist_point_plane(x),
        }
    } else {
        match code {
            0..=3 => dist_point_point(x, code as usize / 2, 2 + code as usize % 2),
            4 | 5 => dist_point_line(x, code as usize - 4, 2, 3),
            6 | 7 => dist_point_line(x, code as usize - 4, 0, 1),
            _ => dist_line_line(x),
        }
    }
}

impl Dist {
    /// ∂d²/∂x: 2wᵢr.
    fn gradient(&self) -> [f32; 12] {
        let mut g = [0.0f32; 12];
        for i in 0..4 {
            let gi = self.r * (2.0 * self.w[i]);
            g[3 * i] = gi.x;
            g[3 * i + 1] = gi.y;
            g[3 * i + 2] = gi.z;
        }
        g
    }

    /// ∂²d²/∂x² = f_xx − 2MG⁻¹Mᵀ, upper triangle computed and mirrored.
    fn hessian(&self, h: &mut [f32; 144]) {
        // M[(3i + a), k] = ∂wᵢ/∂uₖ·r_a + wᵢ·Dₖ_a, and MG = M·G⁻¹.
        let mut m = [[0.0f32; 2]; 12];
        let mut mg = [[0.0f32; 2]; 12];
        for row in 0..12 {
            let (i, a) = (row / 3, row % 3);
            m[row] = [0, 1].map(|k| self.dw[i][k] * self.r[a] + self.w[i] * self.dirs[k][a]);
            mg[row][0] = m[row][0] * self.ginv[0] + m[row][1] * self.ginv[1];
            mg[row][1] = m[row][0] * self.ginv[1] + m[row][1] * self.ginv[2];
        }
        for p in 0..12 {
            for q in p..12 {
                let mut x = -2.0 * (mg[p][0] * m[q][0] + mg[p][1] * m[q][1]);
                if p % 3 == q % 3 {
                    x += 2.0 * self.w[p / 3] * self.w[q / 3];
                }
                h[12 * p + q] = x;
                h[12 * q + p] = x;
            }
        }
    }
}

// ---------------------------------------------------------------- barrier and mollifier

/// ln(d/d̂) for 0 < d < d̂: 2 artanh(z), z = (d − d̂)/(d + d̂), by its series for d ≥ d̂/2
/// (|z| ≤ 1/3: 8 terms reach f32 rounding), `ln` below (module docs).
fn ln_ratio(d: f32, dhat: f32) -> f32 {
    if d >= 0.5 * dhat {
        let z = (d - dhat) / (d + dhat);
        let z2 = z * z;
        let mut s = 1.0 / 15.0;
        s = s * z2 + 1.0 / 13.0;
        s = s * z2 + 1.0 / 11.0;
        s = s * z2 + 1.0 / 9.0;
        s = s * z2 + 1.0 / 7.0;
        s = s * z2 + 1.0 / 5.0;
        s = s * z2 + 1.0 / 3.0;
        s = s * z2 + 1.0;
        2.0 * z * s
    } else {
        (d / dhat).ln()
    }
}

/// b(d), b′(d), b″(d) for 0 < d < d̂ ([`crate::contact::barrier::barrier`]).
fn barrier(d: f32, dhat: f32) -> [f32; 3] {
    let r = d - dhat;
    let l = ln_ratio(d, dhat);
    let rd = r / d;
    [
        -r * r * l,
        -(2.0 * r * l + r * rd),
        -(2.0 * l + 4.0 * rd - rd * rd),
    ]
}

/// The mollifier's c = ‖u × v‖² with gradient and (on demand) Hessian, and m, m′, m″ — or `None`
/// when c ≥ ε× (m = 1).
struct Mollifier {
    m: [f32; 3],
    grad: [f32; 12],
    u: Vec3,
    v: Vec3,
}

fn mollifier(x: &[Vec3; 4], eps: f32) -> Option<Mollifier> {
    let (u, v) = (x[1] - x[0], x[3] - x[2]);
    let c = u.cross(v).length_squared();
    let on = c < eps; // false for a NaN threshold, as in the WGSL
    if !on {
        return None;
    }
    let (uu, vv, uv) = (u.length_squared(), v.length_squared(), u.dot(v));
    let cu = (u * vv - v * uv) * 2.0;
    let cv = (v * uu - u * uv) * 2.0;
    let mut g = [0.0f32; 12];
    for a in 0..3 {
        g[a] = -cu[a];
        g[3 + a] = cu[a];
        g[6 + a] = -cv[a];
        g[9 + a] = cv[a];
    }
    let r = c / eps;
    Some(Mollifier {
        m: [(2.0 - r) * r, 2.0 * (1.0 - r) / eps, -2.0 / (eps * eps)],
        grad: g,
        u,
        v,
    })
}

impl Mollifier {
    /// ∂²c/∂x² entry (p, q), p ≤ q (`crate::contact::mollifier::edge_cross_squared`).
    fn hess(&self, p: usize, q: usize) -> f32 {
        let (i, a, j, b) = (p / 3, p % 3, q / 3, q % 3);
        let (u, v) = (self.u, self.v);
        let delta = if a == b { 1.0 } else { 0.0 };
        let x = match (i < 2, j < 2) {
            (true, true) => 2.0 * (v.length_squared() * delta - v[a] * v[b]),
            (false, false) => 2.0 * (u.length_squared() * delta - u[a] * u[b]),
            // p ≤ q: a mixed entry has p on edge a and q on edge b.
            _ => 2.0 * (2.0 * u[a] * v[b] - v[a] * u[b] - u.dot(v) * delta),
        };
        // u = a₁ − a₀, v = b₁ − b₀: vertex k enters with sign (−1, 1, −1, 1)ₖ.
        if (i % 2 == 0) == (j % 2 == 0) {
            x
        } else {
            -x
        }
    }
}

// ---------------------------------------------------------------- one pair

/// One pair's outputs.
struct PairOut {
    energy: f32,
    dist: f32,
    code: u32,
}

/// Evaluates one pair (mirror of WGSL `ipc_pair`); writes `grad`/`hess` when given.
fn pair(
    x: &[Vec3; 4],
    pr: &GpuPair,
    dhat2: f32,
    kappa: f32,
    project: bool,
    grad: Option<&mut [GpuVec4]>,
    hess: Option<&mut [f32]>,
) -> PairOut {
    let code = if pr.kind == GpuPair::POINT_TRIANGLE {
        pt_type(x[0], x[1], x[2], x[3])
    } else {
        ee_type(x[0], x[1], x[2], x[3])
    };
    let d = classified(x, pr.kind, code);
    let d2 = d.value;
    let active = d2 < dhat2 && d2 > 0.0;
    let mut out = PairOut {
        energy: 0.0,
        dist: d2,
        code,
    };
    if d2 <= 0.0 {
        out.energy = IPC_SENTINEL;
    }
    let zero_outputs = |grad: Option<&mut [GpuVec4]>, hess: Option<&mut [f32]>| {
        if let Some(g) = grad {
            g.fill([0.0; 4]);
        }
        if let Some(h) = hess {
            h.fill(0.0);
        }
    };
    if !active {
        zero_outputs(grad, hess);
        return out;
    }
    let [b, db, ddb] = barrier(d2, dhat2);
    let moll = if pr.kind == GpuPair::EDGE_EDGE {
        mollifier(x, pr.eps_x)
    } else {
        None
    };
    let m = moll.as_ref().map_or(1.0, |ml| ml.m[0]);
    out.energy = kappa * (m * b);
    if grad.is_none() && hess.is_none() {
        return out;
    }
    let g = d.gradient();
    if let Some(gout) = grad {
        for (i, gi) in gout.iter_mut().enumerate() {
            *gi = [0, 1, 2, 3].map(|a| {
                if a == 3 {
                    return 0.0;
                }
                let k = 3 * i + a;
                let mut x = m * (db * g[k]);
                if let Some(ml) = &moll {
                    x += b * (ml.m[1] * ml.grad[k]);
                }
                kappa * x
            });
        }
    }
    if let Some(h) = hess {
        let mut hd = [0.0f32; 144];
        d.hessian(&mut hd);
        for p in 0..12 {
            for q in p..12 {
                let mut x = m * (ddb * g[p] * g[q] + db * hd[12 * p + q]);
                if let Some(ml) = &moll {
                    let (dm, ddm) = (ml.m[1], ml.m[2]);
                    let gc = &ml.grad;
                    x += b * (ddm * gc[p] * gc[q] + dm * ml.hess(p, q))
                        + (dm * db) * (gc[p] * g[q] + g[p] * gc[q]);
                }
                x *= kappa;
                h[12 * p + q] = x;
                h[12 * q + p] = x;
            }
        }
        if project {
            project_psd12(h);
        }
    }
    out
}

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

/// Twin of `pair_relative` (shaders/shared/pair_record.wgsl): a pair's four vertices relative
/// to its first, from positions split as p = h + f (the `ipc_pairs` / `ipc_ccd` u1 > 0 layout:
/// h the step start's f32 position, f the rest — its low part plus the step's displacement):
/// r_k = (h_k − h_0) + (f_k − f_0), each component within ε(|r_k| + |f_k − f_0|) of the exact
/// difference. Translation leaves a pair's distance and derivatives unchanged, and the
/// coordinates round with the pair's size, not its distance from the origin.
pub fn pair_relative(h: &[Vec3; 4], f: &[Vec3; 4]) -> [Vec3; 4] {
    let mut r = [Vec3::ZERO; 4];
    for k in 1..4 {
        r[k] = (h[k] - h[0]) + (f[k] - f[0]);
    }
    r
}

/// Twin of `ipc_pairs.wgsl` (module docs): per pair i < n, `energy[i]` (J), `dist[i]` = d²
/// (m²), `ptype[i]`, and with [`IPC_GRADIENT`] `grad[4i + k]` (N, w = 0; k in the pair's vertex
/// order), with [`IPC_HESSIAN`] `hess[144i..]` (N/m). f0 = d̂² (m²), f1 = κ, u0 = flags, u1 > 0:
/// positions in two parts, vertex v at `x[v] + x[u1 + v]`, evaluated relative to the pair's
/// first vertex ([`pair_relative`]: the distance and its derivatives are unchanged and the
/// coordinates round with the pair's size, not with their distance from the origin); 0: at
/// `x[v]` (a distance between two vertices then rounds once, however far the others are).
#[allow(clippy::too_many_arguments)]
pub fn ipc_pairs(
    p: &Params,
    x: &[GpuVec4],
    pairs: &[GpuPair],
    energy: &mut [f32],
    dist: &mut [f32],
    ptype: &mut [u32],
    grad: &mut [GpuVec4],
    hess: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    let flags = p.u0;
    let want_g = flags & IPC_GRADIENT != 0;
    let want_h = flags & IPC_HESSIAN != 0;
    need(pairs.len(), n, "ipc_pairs pairs")?;
    need(energy.len(), n, "ipc_pairs energy")?;
    need(dist.len(), n, "ipc_pairs dist")?;
    need(ptype.len(), n, "ipc_pairs ptype")?;
    if want_g {
        need(grad.len(), 4 * n, "ipc_pairs grad")?;
    }
    if want_h {
        need(hess.len(), 144 * n, "ipc_pairs hess")?;
    }
    let at = p.u1 as usize;
    let nv = if at > 0 {
        need(x.len(), 2 * at, "ipc_pairs x (with fine parts)")?;
        at
    } else {
        x.len()
    };
    if let Some((i, pr)) = pairs[..n]
        .iter()
        .enumerate()
        .find(|(_, pr)| pr.v.iter().any(|&v| v as usize >= nv) || pr.kind > GpuPair::EDGE_EDGE)
    {
        return Err(JelloError::Invalid(format!(
            "ipc_pairs: pair {i} = {:?} (kind {}) indexes past {nv} vertices or has an unknown kind",
            pr.v, pr.kind
        )));
    }
    let (dhat2, kappa) = (p.f0, p.f1);
    let project = flags & IPC_PROJECT != 0;
    let mut gch: Vec<Option<&mut [GpuVec4]>> = if want_g {
        grad[..4 * n].chunks_mut(4).map(Some).collect()
    } else {
        (0..n).map(|_| None).collect()
    };
    let mut hch: Vec<Option<&mut [f32]>> = if want_h {
        hess[..144 * n].chunks_mut(144).map(Some).collect()
    } else {
        (0..n).map(|_| None).collect()
    };
    energy[..n]
        .par_iter_mut()
        .zip(dist[..n].par_iter_mut())
        .zip(ptype[..n].par_iter_mut())
        .zip(gch.par_iter_mut())
        .zip(hch.par_iter_mut())
        .enumerate()
        .for_each(|(i, ((((e, d), t), g), h))| {
            let pr = &pairs[i];
            let hs = pr.v.map(|v| v3(&x[v as usize]));
            let fs = if at > 0 {
                pr.v.map(|v| v3(&x[at + v as usize]))
            } else {
                [Vec3::ZERO; 4]
            };
            let xs = if at > 0 { pair_relative(&hs, &fs) } else { hs };
            let o = pair(&xs, pr, dhat2, kappa, project, g.take(), h.take());
            *e = o.energy;
            *d = o.dist;
            *t = o.code;
        });
    Ok(())
}

/// Twin of `ipc_gather.wgsl` (module docs): for vertex v < n, `g[v].xyz` gains the sum of
/// `pair_grad[4·pair + slot].xyz` over the CSR row of v (in order; `g[v].w = 0`), and with
/// [`IPC_GATHER_HESSIAN`] `hdiag[v]` the sum of the diagonal blocks at
/// `pair_hess[144·pair + 39·slot ..]`.
#[allow(clippy::too_many_arguments)]
pub fn ipc_gather(
    p: &Params,
    pair_grad: &[GpuVec4],
    pair_hess: &[f32],
    offsets: &[u32],
    csr_pairs: &[u32],
    csr_slot: &[u32],
    g: &mut [GpuVec4],
    hdiag: &mut [GpuMat3],
) -> Result<()> {
    let n = p.n as usize;
    let want_h = p.u0 & IPC_GATHER_HESSIAN != 0;
    need(g.len(), n, "ipc_gather g")?;
    let npairs = if want_h {
        need(hdiag.len(), n, "ipc_gather hdiag")?;
        (pair_grad.len() / 4).min(pair_hess.len() / 144)
    } else {
        pair_grad.len() / 4
    };
    super::gather::check_csr(offsets, csr_pairs, csr_slot, n, npairs)?;
    g[..n].par_iter_mut().enumerate().for_each(|(v, gv)| {
        let mut acc = Vec3::ZERO;
        for k in offsets[v] as usize..offsets[v + 1] as usize {
            acc += v3(&pair_grad[4 * csr_pairs[k] as usize + csr_slot[k] as usize]);
        }
        let s = v3(gv) + acc;
        *gv = [s.x, s.y, s.z, 0.0];
    });
    if want_h {
        hdiag[..n].par_iter_mut().enumerate().for_each(|(v, hv)| {
            let mut acc = [[0.0f32; 3]; 3];
            for k in offsets[v] as usize..offsets[v + 1] as usize {
                let base = 144 * csr_pairs[k] as usize + 39 * csr_slot[k] as usize;
                for (c, col) in acc.iter_mut().enumerate() {
                    for (r, x) in col.iter_mut().enumerate() {
                        *x += pair_hess[base + 12 * r + c];
                    }
                }
            }
            for (c, col) in acc.iter().enumerate() {
                for (r, x) in col.iter().enumerate() {
                    hv.cols[c][r] += x;
                }
            }
        });
    }
    Ok(())
}

/// Twin of `ipc_pair_hvp.wgsl`: per pair i < n and corner a, `out[4i + a]` = Σ over the other
/// corners b of the 3×3 block (a, b) of the pair's Hessian `hess[144i..]` (row-major) times
/// `d[stencils[i][b]]` (w = 0) — the coupling the per-vertex diagonal blocks leave out of a
/// Hessian-vector product. Stencil indices past `d` are an error.
pub fn ipc_pair_hvp(
    p: &Params,
    hess: &[f32],
    stencils: &[[u32; 4]],
    d: &[GpuVec4],
    out: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(hess.len(), 144 * n, "ipc_pair_hvp hess")?;
    need(stencils.len(), n, "ipc_pair_hvp stencils")?;
    need(out.len(), 4 * n, "ipc_pair_hvp out")?;
    if let Some(i) = (0..n).find(|&i| stencils[i].iter().any(|&v| v as usize >= d.len())) {
        return Err(JelloError::Invalid(format!(
            "ipc_pair_hvp: pair {i}'s stencil {:?} past {} vectors",
            stencils[i],
            d.len()
        )));
    }
    out[..4 * n]
        .par_chunks_mut(4)
        .enumerate()
        .for_each(|(i, o)| {
            let s = stencils[i];
            let base = 144 * i;
            for (a, oa) in o.iter_mut().enumerate() {
                let mut acc = [0.0f32; 3];
                for (b, &vb) in s.iter().enumerate() {
                    if b == a {
                        continue;
                    }
                    let db = d[vb as usize];
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        let row = base + 12 * (3 * a + r) + 3 * b;
                        *acc_r += hess[row] * db[0] + hess[row + 1] * db[1] + hess[row + 2] * db[2];
                    }
                }
                *oa = [acc[0], acc[1], acc[2], 0.0];
            }
        });
    Ok(())
}
