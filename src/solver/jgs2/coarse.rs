//! The coarse correction of [`ContactCoupling::Coarse`](super::ContactCoupling::Coarse): a
//! Galerkin solve of the step's quadratic model on a few affine modes per body, added to the
//! block-Jacobi direction of JGS2's model step.
//!
//! Why: in IPC contact JGS2's model step converges linearly, the residual falling by a factor
//! 0.97–0.98 per iteration on the bundled stack (docs/src/solvers/jgs2.md). Each vertex's local
//! system sees its own barrier block, and its subspace sees its body respond elastically, but
//! no local system sees that pressing one body into another moves both: the slow modes are
//! whole regions of the bodies moving against each other, which the paper's §7 coupling
//! (a contacting vertex's move extended to the vertices it touches) does not capture either
//! (1,125 iterations against 1,041 held on the stack). A correction on a coarse space that
//! holds those modes — per body, the affine motions (12) of each octant of the body's box —
//! removes them: the classical two-level idea, with JGS2's local steps as the smoother.
//!
//! The space is fixed per time step (octants and affine coordinates from the step start's
//! positions). Its operator PᵀHP is assembled at every accepted point from what the iteration
//! already holds (the projected element Hessians, the lumped inertia, the obstacle barrier
//! blocks and the IPC pairs' PSD blocks): O(elements) work, about one element-Hessian pass's
//! arithmetic, then a dense Cholesky of 12 × (octants) unknowns per body. The model step
//! minimises over its three directions with the true H, so the correction only has to point
//! the right way.

use super::local::{barrier_hessian, ElementCache};
use crate::problem::{Model, StepProblem};
use nalgebra::{DMatrix, DVector, Matrix3};

/// Most coarse unknowns the dense operator is formed for: 12 per cluster. A body is split into
/// octants while the total stays within this, else kept whole.
pub const MAX_COARSE_UNKNOWNS: usize = 1536;

/// Least free vertices an octant needs to carry its own affine modes (fewer cannot span them).
const MIN_CLUSTER_VERTICES: usize = 4;

/// The coarse space: per vertex its cluster and its affine coordinates (1, y) in it.
#[derive(Clone, Debug, Default)]
pub(super) struct CoarseSpace {
    /// Per vertex, its cluster (`u32::MAX`: pinned, no coarse modes).
    cluster: Vec<u32>,
    /// Per vertex, (1, y₁, y₂, y₃): y its position at the step start relative to its cluster's
    /// centroid, over the cluster's radius (dimensionless, |y| ≤ 1).
    phi: Vec<[f64; 4]>,
    /// Number of clusters (12 unknowns each).
    clusters: usize,
}

impl CoarseSpace {
    /// The octant clusters of every body of `model` at positions `x` (m), or whole bodies when
    /// octants would exceed [`MAX_COARSE_UNKNOWNS`] or leave an octant with fewer than four
    /// free vertices.
    pub(super) fn new(model: &Model, x: &[f64]) -> Self {
        let n = model.num_vertices();
        let split = 12 * 8 * model.bodies.len() <= MAX_COARSE_UNKNOWNS;
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for body in &model.bodies {
            let free: Vec<usize> = body
                .vertices
                .clone()
                .filter(|&v| !model.pinned[v])
                .collect();
            if free.is_empty() {
                continue;
            }
            let octants = split.then(|| octants(x, &free)).filter(|o| {
                o.iter()
                    .all(|g| g.is_empty() || g.len() >= MIN_CLUSTER_VERTICES)
            });
            match octants {
                Some(o) => groups.extend(o.into_iter().filter(|g| !g.is_empty())),
                None => groups.push(free),
            }
        }
        let mut cluster = vec![u32::MAX; n];
        let mut phi = vec![[0.0; 4]; n];
        for (c, g) in groups.iter().enumerate() {
            let mut centre = [0.0; 3];
            for &v in g {
                for k in 0..3 {
                    centre[k] += x[3 * v + k] / g.len() as f64;
                }
            }
            let radius = g
                .iter()
                .map(|&v| {
                    (0..3)
                        .map(|k| (x[3 * v + k] - centre[k]).powi(2))
                        .sum::<f64>()
                        .sqrt()
                })
                .fold(0.0f64, f64::max)
                .max(f64::MIN_POSITIVE);
            for &v in g {
                cluster[v] = c as u32;
                phi[v] = [
                    1.0,
                    (x[3 * v] - centre[0]) / radius,
                    (x[3 * v + 1] - centre[1]) / radius,
                    (x[3 * v + 2] - centre[2]) / radius,
                ];
            }
        }
        Self {
            cluster,
            phi,
            clusters: groups.len(),
        }
    }

    /// Coarse unknowns: 12 per cluster (index 12c + 4i + m: axis i, affine mode m).
    pub(super) fn unknowns(&self) -> usize {
        12 * self.clusters
    }

    /// PᵀHP at `x` (m): inertia M/ĥ², the obstacle barrier's per-vertex blocks, the projected
    /// element Hessians of `cache` and the IPC pair blocks `pairs` (N/m on the coarse
    /// coordinates).
    pub(super) fn operator<'a>(
        &self,
        problem: &StepProblem,
        cache: &ElementCache,
        x: &[f64],
        pairs: impl Iterator<Item = (&'a [u32; 4], &'a nalgebra::SMatrix<f64, 12, 12>)>,
    ) -> DMatrix<f64> {
        let model = problem.model;
        let k = self.unknowns();
        let mut a = DMatrix::<f64>::zeros(k, k);
        let ih2 = problem.inertia;
        for v in 0..model.num_vertices() {
            if self.cluster[v] == u32::MAX {
                continue;
            }
            let block =
                barrier_hessian(problem, x, v) + Matrix3::identity() * (model.mass[v] * ih2);
            self.add(&mut a, v, v, |i, j| block[(i, j)]);
        }
        for (t, tet) in model.mesh.tets.iter().enumerate() {
            let h = &cache.hess[t];
            for (p, &va) in tet.iter().enumerate() {
                for (q, &vb) in tet.iter().enumerate() {
                    self.add(&mut a, va as usize, vb as usize, |i, j| {
                        h[(3 * p + i, 3 * q + j)]
                    });
                }
            }
        }
        let n = model.num_vertices();
        for (ids, h) in pairs {
            for (p, &va) in ids.iter().enumerate() {
                for (q, &vb) in ids.iter().enumerate() {
                    if (va as usize) < n && (vb as usize) < n {
                        self.add(&mut a, va as usize, vb as usize, |i, j| {
                            h[(3 * p + i, 3 * q + j)]
                        });
                    }
                }
            }
        }
        // Round-off only: every contribution above is symmetric.
        (&a + a.transpose()) * 0.5
    }

    /// a += Pᵥₐᵀ K Pᵥᵦ for the 3×3 block K (`kab(i, j)`) between vertices `va` and `vb`.
    fn add(&self, a: &mut DMatrix<f64>, va: usize, vb: usize, kab: impl Fn(usize, usize) -> f64) {
        let (ca, cb) = (self.cluster[va], self.cluster[vb]);
        if ca == u32::MAX || cb == u32::MAX {
            return;
        }
        let (pa, pb) = (&self.phi[va], &self.phi[vb]);
        let (ra, rb) = (12 * ca as usize, 12 * cb as usize);
        for i in 0..3 {
            for j in 0..3 {
                let kij = kab(i, j);
                if kij == 0.0 {
                    continue;
                }
                for (m, &fm) in pa.iter().enumerate() {
                    for (q, &fq) in pb.iter().enumerate() {
                        a[(ra + 4 * i + m, rb + 4 * j + q)] += fm * kij * fq;
                    }
                }
            }
        }
    }

    /// The correction −P A⁻¹ Pᵀ g (m) for the gradient `g` (N, zero on pinned vertices): A's
    /// Cholesky factor, or its pseudo-inverse on the eigenvalues above 1e-12 of the largest
    /// where a cluster's vertices leave an affine mode undetermined (a flat octant).
    pub(super) fn correction(&self, a: DMatrix<f64>, g: &[f64]) -> Vec<f64> {
        let k = self.unknowns();
        let mut r = DVector::<f64>::zeros(k);
        for (v, &c) in self.cluster.iter().enumerate() {
            if c == u32::MAX {
                continue;
            }
            for i in 0..3 {
                for (m, &f) in self.phi[v].iter().enumerate() {
                    r[12 * c as usize + 4 * i + m] -= f * g[3 * v + i];
                }
            }
        }
        let c = match a.clone().cholesky() {
            Some(l) => l.solve(&r),
            None => {
                let eig = a.symmetric_eigen();
                let top = eig.eigenvalues.iter().fold(0.0f64, |m, v| m.max(*v));
                let mut c = DVector::zeros(k);
                for (j, &lam) in eig.eigenvalues.iter().enumerate() {
                    if lam > 1e-12 * top {
                        let v = eig.eigenvectors.column(j);
                        c += v * (v.dot(&r) / lam);
                    }
                }
                c
            }
        };
        let mut d = vec![0.0; g.len()];
        for (v, &cl) in self.cluster.iter().enumerate() {
            if cl == u32::MAX {
                continue;
            }
            for i in 0..3 {
                d[3 * v + i] = (0..4)
                    .map(|m| self.phi[v][m] * c[12 * cl as usize + 4 * i + m])
                    .sum();
            }
        }
        d
    }
}

/// The free vertices `free` split by the midplanes of their bounding box at `x` (8 groups,
/// some possibly empty).
fn octants(x: &[f64], free: &[usize]) -> Vec<Vec<usize>> {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for &v in free {
        for k in 0..3 {
            lo[k] = lo[k].min(x[3 * v + k]);
            hi[k] = hi[k].max(x[3 * v + k]);
        }
    }
    let mid: Vec<f64> = (0..3).map(|k| 0.5 * (lo[k] + hi[k])).collect();
    let mut out = vec![Vec::new(); 8];
    for &v in free {
        let o = (0..3)
            .map(|k| usize::from(x[3 * v + k] > mid[k]) << k)
            .sum::<usize>();
        out[o].push(v);
    }
    out
}
