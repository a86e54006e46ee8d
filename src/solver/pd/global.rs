//! The global matrix of the projective-dynamics family and its prefactored solve.
//!
//! A = w_M·M + Σ_e w_e D_eᵀD_e, one n × n matrix shared by x, y and z (M lumped, D_e the
//! element operator of [`super::operator`], w_e from [`super::stiffness`]), restricted to the
//! free vertices: pinned vertices are eliminated, so a moving pin only changes right-hand
//! sides ([`GlobalSystem::subtract_pinned`]); QN's direction is zero on them. w_M is 1/h² for a
//! dynamic step (the inertia weight of [`crate::problem::StepProblem`]).
//!
//! Factorisation: faer's sparse LLᵀ through its low-level API — the symbolic analysis (with the
//! fill-reducing ordering of [`GlobalOptions::ordering`]) once per pin set, kept behind an
//! `Arc`, and a numeric factor per (pin set, w_M) — the `SymbolicLlt` once /
//! `Llt::try_new_with_symbolic` per refactor pattern, but with a METIS ordering, which
//! `SymbolicLlt::try_new` cannot take. Numeric factors are kept for the last
//! [`GlobalOptions::cached_factors`] values of w_M, so the substeps of the `inversion = "forbid"`
//! ladder (h/2, h/4, h/8) factor once each and a run that returns to h refactors nothing.
//! A changed pin set, time step or material rebuilds A; nothing else does
//! ([`GlobalSystem::factorizations`] counts numeric factorisations, [`GlobalSystem::analyses`]
//! symbolic ones; `tests/cpu/pd.rs`).
//!
//! The solve takes the three coordinates as the three columns of one n_free × 3 right-hand
//! side (one pass of triangular solves), sequentially (see [`GlobalSystem::solve`]).
//!
//! Ordering (measured, `benches/solvers.rs`, 2 cores): METIS nested dissection of the vertex
//! graph against AMD — on the 3,159-free-vertex Table I bar nnz(L) 289k vs 307k, factor
//! 6.3 vs 4.2 ms, 3-column solve 0.54 vs 0.42 ms; on the 15,104-free-vertex twist bar 2.94M vs
//! 4.21M, factor 58 vs 72 ms, solve 4.2 vs 4.9 ms. The solve runs every iteration and the
//! analysis once (108 vs 34 ms there), so METIS is the default.

use super::operator::{element_operator, operator_gram};
use super::stiffness::{element_weights, PAPER_INTERVAL};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::material::Material;
use crate::problem::Model;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{LltError, LltRegularization};
use faer::perm::PermRef;
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, CholeskySymbolicParams, LltRef, SymbolicCholesky,
    SymmetricOrdering,
};
use faer::{Conj, MatMut, Side};
use jello_precompute::cholesky::Ordering;
use jello_precompute::sparse::{SymSparse, SymmetricPattern};
use std::sync::Arc;

/// How the global matrix is built and factored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlobalOptions {
    /// Fill-reducing ordering of the n × n matrix (default METIS nested dissection of the
    /// vertex graph: `benches/solvers.rs` measures it against AMD).
    pub ordering: Ordering,
    /// Stretch interval of the k fit (default the paper's [0.5, 1.5]).
    pub interval: [f64; 2],
    /// Global multiplier on every w_e (default 1; ADMM's weight sweeps use it).
    pub weight_scale: f64,
    /// Numeric factors kept for different mass weights (default 4: h and the forbid ladder's
    /// h/2, h/4, h/8).
    pub cached_factors: usize,
}

impl Default for GlobalOptions {
    fn default() -> Self {
        GlobalOptions {
            ordering: Ordering::NestedDissection { block: 1 },
            interval: PAPER_INTERVAL,
            weight_scale: 1.0,
            cached_factors: 4,
        }
    }
}

/// The stiffness part on one pin set: pattern, values of Σ w_e D_eᵀD_e over free rows, the
/// free↔vertex maps, the coupling to pinned vertices and the symbolic factorisation.
struct PinSet {
    /// Per vertex: pinned.
    pinned: Vec<bool>,
    /// Free row of each vertex (`u32::MAX` for pinned ones).
    row: Vec<u32>,
    /// Vertex of each free row.
    vertex: Vec<u32>,
    stiffness: SymSparse,
    diag: Vec<usize>,
    /// (free row, pinned vertex, value) of Σ w_e D_eᵀD_e, merged.
    coupling: Vec<(u32, u32, f64)>,
    symbolic: Arc<SymbolicCholesky<usize>>,
}

/// One numeric factor: L's values for a mass weight.
struct Numeric {
    mass_weight: f64,
    values: Vec<f64>,
    /// Unique per factorisation (what cached solves key on).
    id: u64,
}

/// A = w_M M + Σ w_e D_eᵀD_e on the free vertices, factored; see the module docs.
pub struct GlobalSystem {
    options: GlobalOptions,
    nv: usize,
    materials: Vec<Material>,
    weights: Vec<f64>,
    pins: Option<PinSet>,
    numeric: Vec<Numeric>,
    analyses: usize,
    factorizations: usize,
    factor_ms: f64,
    work: Vec<f64>,
    scratch: Option<(usize, MemBuffer)>,
}

impl GlobalSystem {
    /// The weights of `model` (w_e = V_e k_e × scale); nothing is factored until
    /// [`Self::prepare`].
    pub fn new(model: &Model, options: GlobalOptions) -> Result<Self> {
        if !(options.weight_scale.is_finite() && options.weight_scale > 0.0) {
            return Err(JelloError::Invalid(format!(
                "PD weight scale must be > 0, got {}",
                options.weight_scale
            )));
        }
        let weights = element_weights(
            &model.materials,
            model.rest.iter().map(|r| r.volume),
            options.interval,
            options.weight_scale,
        )?;
        Ok(GlobalSystem {
            options,
            nv: model.num_vertices(),
            materials: model.materials.clone(),
            weights,
            pins: None,
            numeric: Vec::new(),
            analyses: 0,
            factorizations: 0,
            factor_ms: 0.0,
            work: Vec::new(),
            scratch: None,
        })
    }

    /// The options.
    pub fn options(&self) -> &GlobalOptions {
        &self.options
    }

    /// w_e per element.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Symbolic analyses so far (one per pin set; a material change redoes it).
    pub fn analyses(&self) -> usize {
        self.analyses
    }

    /// Numeric factorisations so far.
    pub fn factorizations(&self) -> usize {
        self.factorizations
    }

    /// Time spent in analyses and factorisations so far, ms.
    pub fn factor_ms(&self) -> f64 {
        self.factor_ms
    }

    /// Stored values of the current factor L (a measure of fill), 0 before [`Self::prepare`].
    pub fn factor_nnz(&self) -> usize {
        self.pins.as_ref().map_or(0, |p| p.symbolic.len_val())
    }

    /// Number of free vertices of the current pin set.
    pub fn free_vertices(&self) -> usize {
        self.pins.as_ref().map_or(0, |p| p.vertex.len())
    }

    /// Makes A for `model` with pinned vertices `pinned` and mass weight `mass_weight` (1/s²)
    /// current, (re)building only what changed. Returns whether anything was factored.
    pub fn prepare(&mut self, model: &Model, pinned: &[bool], mass_weight: f64) -> Result<bool> {
        if model.num_vertices() != self.nv || model.materials.len() != self.materials.len() {
            return Err(JelloError::Solver(
                "PD global matrix: the model is not the one it was built for".into(),
            ));
        }
        if !(mass_weight.is_finite() && mass_weight >= 0.0) {
            return Err(JelloError::Solver(format!(
                "PD global matrix: mass weight must be finite and ≥ 0, got {mass_weight}"
            )));
        }
        let t0 = Instant::now();
        let mut changed = false;
        if model.materials != self.materials {
            self.weights = element_weights(
                &model.materials,
                model.rest.iter().map(|r| r.volume),
                self.options.interval,
                self.options.weight_scale,
            )?;
            self.materials = model.materials.clone();
            self.pins = None;
        }
        if self.pins.as_ref().is_none_or(|p| p.pinned != pinned) {
            self.pins = Some(self.build_pin_set(model, pinned)?);
            self.numeric.clear();
            // The solve's scratch size depends on the symbolic factor.
            self.scratch = None;
            self.analyses += 1;
            changed = true;
        }
        match self
            .numeric
            .iter()
            .position(|n| n.mass_weight == mass_weight)
        {
            Some(i) => {
                let n = self.numeric.remove(i);
                self.numeric.push(n);
            }
            None => {
                let values = self.factor(model, mass_weight)?;
                self.factorizations += 1;
                changed = true;
                if self.numeric.len() >= self.options.cached_factors.max(1) {
                    self.numeric.remove(0);
                }
                self.numeric.push(Numeric {
                    mass_weight,
                    values,
                    id: self.factorizations as u64,
                });
            }
        }
        if changed {
            self.factor_ms += t0.elapsed().as_secs_f64() * 1e3;
        }
        Ok(changed)
    }

    fn build_pin_set(&self, model: &Model, pinned: &[bool]) -> Result<PinSet> {
        let nv = self.nv;
        if pinned.len() != nv {
            return Err(JelloError::Solver(format!(
                "PD global matrix: {} pin flags for {nv} vertices",
                pinned.len()
            )));
        }
        let mut row = vec![u32::MAX; nv];
        let mut vertex = Vec::new();
        for v in 0..nv {
            if !pinned[v] {
                row[v] = vertex.len() as u32;
                vertex.push(v as u32);
            }
        }
        let nf = vertex.len();
        if nf == 0 {
            return Err(JelloError::Solver(
                "PD global matrix: every vertex is pinned".into(),
            ));
        }
        let err = |e: jello_precompute::PrecomputeError| JelloError::Solver(e.to_string());
        let entries = model.mesh.tets.iter().flat_map(|t| {
            let r = t.map(|v| row[v as usize]);
            (0..4).flat_map(move |a| {
                (0..4)
                    .filter(move |&b| r[a] != u32::MAX && r[b] != u32::MAX && r[a] <= r[b])
                    .map(move |b| (r[a] as usize, r[b] as usize))
            })
        });
        let pattern = Arc::new(SymmetricPattern::from_entries(nf, entries).map_err(err)?);
        let mut stiffness = SymSparse::zeros(pattern.clone());
        let mut coupling: Vec<(u32, u32, f64)> = Vec::new();
        {
            let values = stiffness.values_mut();
            for (t, tet) in model.mesh.tets.iter().enumerate() {
                let gram = operator_gram(&element_operator(&model.rest[t]));
                let w = self.weights[t];
                for a in 0..4 {
                    let ra = row[tet[a] as usize];
                    if ra == u32::MAX {
                        continue;
                    }
                    for b in 0..4 {
                        let rb = row[tet[b] as usize];
                        if rb == u32::MAX {
                            coupling.push((ra, tet[b], w * gram[a][b]));
                        } else if ra <= rb {
                            let k = pattern.find(ra as usize, rb as usize).ok_or_else(|| {
                                JelloError::Solver("pattern entry missing".into())
                            })?;
                            values[k] += w * gram[a][b];
                        }
                    }
                }
            }
        }
        coupling.sort_by_key(|c| (c.0, c.1));
        let mut merged: Vec<(u32, u32, f64)> = Vec::with_capacity(coupling.len());
        for c in coupling {
            match merged.last_mut() {
                Some(m) if m.0 == c.0 && m.1 == c.1 => m.2 += c.2,
                _ => merged.push(c),
            }
        }
        let diag = (0..nf)
            .map(|i| {
                pattern
                    .find(i, i)
                    .ok_or_else(|| JelloError::Solver("diagonal missing".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        // A block of 0 DOFs per node means one here.
        let ordering = match self.options.ordering {
            Ordering::NestedDissection { block } => Ordering::NestedDissection {
                block: block.max(1),
            },
            other => other,
        };
        let perm = ordering.permutation(&pattern).map_err(err)?;
        let ord = match (&perm, ordering) {
            (Some((fwd, inv)), _) => SymmetricOrdering::Custom(PermRef::new_checked(fwd, inv, nf)),
            (None, Ordering::Identity) => SymmetricOrdering::Identity,
            (None, _) => SymmetricOrdering::Amd,
        };
        let symbolic = factorize_symbolic_cholesky(
            pattern.symbolic(),
            Side::Upper,
            ord,
            CholeskySymbolicParams::default(),
        )
        .map_err(|e| JelloError::Solver(format!("PD global matrix: symbolic Cholesky: {e:?}")))?;
        Ok(PinSet {
            pinned: pinned.to_vec(),
            row,
            vertex,
            stiffness,
            diag,
            coupling: merged,
            symbolic: Arc::new(symbolic),
        })
    }

    fn factor(&mut self, model: &Model, mass_weight: f64) -> Result<Vec<f64>> {
        let pins = self.pins.as_ref().expect("pin set built before factoring");
        let mut a = SymSparse::from_values(
            pins.stiffness.pattern().clone(),
            pins.stiffness.values().to_vec(),
        )
        .map_err(|e| JelloError::Solver(e.to_string()))?;
        {
            let values = a.values_mut();
            for (i, &v) in pins.vertex.iter().enumerate() {
                values[pins.diag[i]] += mass_weight * model.mass[v as usize];
            }
        }
        let par = faer::get_global_parallelism();
        let sym = &pins.symbolic;
        let mut l = vec![0.0; sym.len_val()];
        let mut mem =
            MemBuffer::try_new(sym.factorize_numeric_llt_scratch::<f64>(par, Default::default()))
                .map_err(|_| JelloError::Solver("PD global matrix: out of memory".into()))?;
        sym.factorize_numeric_llt::<f64>(
            &mut l,
            a.as_faer(),
            Side::Upper,
            LltRegularization::default(),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        )
        .map_err(|e| match e {
            LltError::NonPositivePivot { index } => JelloError::Solver(format!(
                "PD global matrix is not positive definite (pivot {index}): a body with no pin \
                 and no mass weight (a static solve needs pins)"
            )),
        })?;
        Ok(l)
    }

    /// A applied to a free-row vector stored per vertex (3n, interleaved; pinned entries
    /// ignored) into `out` (3n; pinned entries set to 0): for tests and residual checks.
    pub fn apply(&self, model: &Model, x: &[f64], out: &mut [f64]) -> Result<()> {
        let (pins, num) = self.current()?;
        let nf = pins.vertex.len();
        let mw = num.mass_weight;
        out.iter_mut().for_each(|v| *v = 0.0);
        let mut col = vec![0.0; nf];
        let mut res = vec![0.0; nf];
        for c in 0..3 {
            for (i, &v) in pins.vertex.iter().enumerate() {
                col[i] = x[3 * v as usize + c];
            }
            pins.stiffness.mul_vec(&col, &mut res);
            for (i, &v) in pins.vertex.iter().enumerate() {
                out[3 * v as usize + c] = res[i] + mw * model.mass[v as usize] * col[i];
            }
        }
        Ok(())
    }

    /// Subtracts A_fp x_p (the coupling of free rows to pinned vertices' positions in `x`,
    /// 3n interleaved) from `rhs` (3n): the right-hand side of a global step whose pins sit at
    /// `x`'s values.
    pub fn subtract_pinned(&self, x: &[f64], rhs: &mut [f64]) -> Result<()> {
        let pins = self.pins.as_ref().ok_or_else(not_prepared)?;
        for &(r, p, w) in &pins.coupling {
            let v = pins.vertex[r as usize] as usize;
            for c in 0..3 {
                rhs[3 * v + c] -= w * x[3 * p as usize + c];
            }
        }
        Ok(())
    }

    fn current(&self) -> Result<(&PinSet, &Numeric)> {
        match (&self.pins, self.numeric.last()) {
            (Some(p), Some(n)) => Ok((p, n)),
            _ => Err(not_prepared()),
        }
    }

    /// An id of the current numeric factor, unique over the system's life (solves cached
    /// against A — e.g. A⁻¹ columns — are valid while it is unchanged).
    pub fn factor_id(&self) -> Option<u64> {
        self.numeric.last().map(|n| n.id)
    }

    /// Solves A r = q in place for a per-vertex vector (3n, interleaved `[x0 y0 z0 x1 …]`):
    /// the three coordinates as three right-hand-side columns of one solve; pinned entries are
    /// set to 0.
    pub fn solve(&mut self, rhs: &mut [f64]) -> Result<()> {
        if rhs.len() != 3 * self.nv {
            return Err(JelloError::Solver(format!(
                "PD solve: {} values for {} vertices",
                rhs.len(),
                self.nv
            )));
        }
        self.solve_strided(rhs, 3, |v, c| 3 * v + c)
    }

    /// Solves A R = Q in place for `k` per-vertex scalar fields stored column-major
    /// (`fields[c·n + v]`, n = vertices); pinned entries are set to 0.
    pub fn solve_fields(&mut self, fields: &mut [f64], k: usize) -> Result<()> {
        let n = self.nv;
        if fields.len() != n * k {
            return Err(JelloError::Solver(format!(
                "PD solve: {} values for {k} fields of {n} vertices",
                fields.len()
            )));
        }
        self.solve_strided(fields, k, |v, c| c * n + v)
    }

    fn solve_strided(
        &mut self,
        rhs: &mut [f64],
        k: usize,
        at: impl Fn(usize, usize) -> usize,
    ) -> Result<()> {
        if k == 0 {
            return Ok(());
        }
        // Sequential: with three right-hand sides faer's parallel supernodal solve spends more
        // on synchronisation than it saves (2 cores, 3,159 free vertices: 4.99 ms in parallel,
        // 0.54 ms sequential; 15,104: 26.0 vs 4.2 ms — `benches/solvers.rs`).
        let par = faer::Par::Seq;
        let mut work = std::mem::take(&mut self.work);
        let mut scratch = self.scratch.take();
        let result = (|| {
            let (pins, num) = self.current()?;
            let nf = pins.vertex.len();
            work.resize(k * nf, 0.0);
            for (i, &v) in pins.vertex.iter().enumerate() {
                for c in 0..k {
                    work[c * nf + i] = rhs[at(v as usize, c)];
                }
            }
            if scratch.as_ref().is_none_or(|(kk, _)| *kk != k) {
                let need = pins.symbolic.solve_in_place_scratch::<f64>(k, par);
                scratch = Some((
                    k,
                    MemBuffer::try_new(need)
                        .map_err(|_| JelloError::Solver("PD solve: out of memory".into()))?,
                ));
            }
            let (_, mem) = scratch.as_mut().expect("allocated above");
            let mat = MatMut::from_column_major_slice_mut(&mut work, nf, k);
            LltRef::<usize, f64>::new(&pins.symbolic, &num.values).solve_in_place_with_conj(
                Conj::No,
                mat,
                par,
                MemStack::new(mem),
            );
            rhs.iter_mut().for_each(|v| *v = 0.0);
            for (i, &v) in pins.vertex.iter().enumerate() {
                for c in 0..k {
                    rhs[at(v as usize, c)] = work[c * nf + i];
                }
            }
            Ok(())
        })();
        self.work = work;
        if k == 3 {
            self.scratch = scratch;
        }
        result
    }

    /// Whether vertex `v` is a free row of the current pin set.
    pub fn is_free(&self, v: usize) -> bool {
        self.pins
            .as_ref()
            .is_some_and(|p| p.row.get(v).is_some_and(|&r| r != u32::MAX))
    }
}

fn not_prepared() -> JelloError {
    JelloError::Solver("PD global matrix used before `prepare`".into())
}
