//! The multilevel Newton direction on a backend's vectors: the operations it needs beyond
//! [`Backend`] ([`MultilevelBackend`]: the levels' lift, restriction and block Jacobi, the two
//! Hessians' products and the smoother's Jacobi) and the direction written once on them
//! ([`LevelsDirection`]: the affine and SMS levels' block-Jacobi PCGs, the residual update
//! `r ← r − H U q`, the smoother's Jacobi PCG; every PCG is [`BackendPcg`]).
//!
//! The device implements the trait (`device.rs`: the Hessians and the levels' blocks uploaded,
//! one kernel per operation). The f64 path does not: it applies the host's f64 operators in
//! place, where an implementation of this trait would first copy each iteration's Hessians into
//! the backend, and it has what the device lacks (direct subspace solves, the JGS2 smoother's
//! flexible PCG) — `solver.rs` computes it with [`crate::solver::pcg::pcg`] on the same
//! operators, and `tests/gpu/gpu_multilevel.rs` compares the two.

use super::levels::Level;
use super::operator::HessianOperator;
use crate::error::Result;
use crate::solver::backend::{Backend, Coef, Combine};
use crate::solver::pcg::{BackendPcg, HostCorrection};

/// Which of an iteration's two Hessians an operation applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hessian {
    /// H with the cubature element terms: the levels' Galerkin products.
    Levels,
    /// H_l with the lagged elastic Hessian: the smoother's.
    Smoother,
}

/// The multilevel direction's operations on a backend (see the module docs). Levels are
/// numbered 0 (affine) and 1 (SMS); full-space vectors are [`Backend::vector`]s, a level's are
/// [`Backend::flat_vector`]s of [`Level::dim`] numbers (12 per handle).
pub trait MultilevelBackend: Backend {
    /// Takes the levels (either may be absent) and the vertices' pin flags, once per model.
    fn ml_attach(&mut self, levels: [Option<&Level>; 2], pinned: &[bool]) -> Result<()>;
    /// This iteration's Hessians (`h_sub` for the levels, `h_lag` for the smoother; H_l's
    /// inverse diagonal is the smoother's Jacobi preconditioner), replacing the last ones.
    fn ml_set_hessians(&mut self, h_sub: &HessianOperator, h_lag: &HessianOperator) -> Result<()>;
    /// Level `k`'s block-Jacobi blocks for this iteration: the inverted 12×12 Galerkin
    /// diagonal blocks, row-major, one per handle ([`super::invert_blocks`]).
    fn ml_set_blocks(&mut self, k: usize, inverted: &[[f64; 144]]) -> Result<()>;
    /// `u ← P U q` (level `k`, zero at pins).
    fn ml_lift(&mut self, k: usize, q: Self::Vector, u: Self::Vector) -> Result<()>;
    /// `q ← Uᵀ P y` (level `k`).
    fn ml_restrict(&mut self, k: usize, y: Self::Vector, q: Self::Vector) -> Result<()>;
    /// `y ← H x` with the Hessian `h` (`y` ≠ `x`).
    fn ml_apply(&mut self, h: Hessian, x: Self::Vector, y: Self::Vector) -> Result<()>;
    /// `out ← Uᵀ H U q` (level `k`, [`Hessian::Levels`]).
    fn ml_galerkin(&mut self, k: usize, q: Self::Vector, out: Self::Vector) -> Result<()>;
    /// `z ← B r` with level `k`'s blocks.
    fn ml_block_jacobi(&mut self, k: usize, r: Self::Vector, z: Self::Vector) -> Result<()>;
    /// `z ← diag(H_l)⁻¹ r`.
    fn ml_jacobi(&mut self, r: Self::Vector, z: Self::Vector) -> Result<()>;
}

/// What [`LevelsDirection::solve`] returns.
#[derive(Clone, Debug, Default)]
pub struct DirectionSolve {
    /// The direction (3n, m).
    pub d: Vec<f64>,
    /// Its subspace part `d_s` (3n, m; zero without levels).
    pub d_s: Vec<f64>,
    /// PCG iterations: affine, SMS, full space.
    pub counts: [usize; 3],
}

/// How [`LevelsDirection::solve`] runs: levels first or not, their PCG's stop, the smoother's.
pub struct DirectionRun<'a, 'c> {
    /// Run the levels before the smoother (else the smoother alone, from zero).
    pub subspace: bool,
    /// Added to the SMS level's block Jacobi by the host (its affine coarse correction).
    pub sms_correction: Option<&'a mut HostCorrection<'c>>,
    /// The levels' relative PCG tolerance and iteration cap.
    pub level_tolerance: f64,
    pub level_max: usize,
    /// The smoother's iteration count N_cg (a cap) and relative tolerance.
    pub n_cg: usize,
    pub full_tolerance: f64,
}

/// One level's vectors and PCG.
struct LevelVectors<B: Backend> {
    pcg: BackendPcg<B>,
    b: B::Vector,
    q: B::Vector,
}

/// The multilevel Newton direction's vectors on a backend, allocated once per model.
pub struct LevelsDirection<B: Backend> {
    levels: [Option<LevelVectors<B>>; 2],
    full: BackendPcg<B>,
    rhs: B::Vector,
    r: B::Vector,
    d: B::Vector,
    ds: B::Vector,
    u: B::Vector,
    hu: B::Vector,
}

impl<B: MultilevelBackend> LevelsDirection<B> {
    /// Allocates the vectors for levels of `dims` numbers (affine, SMS; `None` when absent).
    pub fn new(be: &mut B, dims: [Option<usize>; 2]) -> Result<Self> {
        let mut levels: [Option<LevelVectors<B>>; 2] = [None, None];
        for (slot, dim) in levels.iter_mut().zip(dims) {
            if let Some(dim) = dim {
                *slot = Some(LevelVectors {
                    pcg: BackendPcg::new(be, Some(dim))?,
                    b: be.flat_vector("level rhs", dim)?,
                    q: be.flat_vector("level solution", dim)?,
                });
            }
        }
        Ok(LevelsDirection {
            levels,
            full: BackendPcg::new(be, None)?,
            rhs: be.vector("-g")?,
            r: be.vector("residual")?,
            d: be.vector("direction")?,
            ds: be.vector("subspace direction")?,
            u: be.vector("lift")?,
            hu: be.vector("H lift")?,
        })
    }

    /// The direction for right-hand side `rhs` (= −g, zero at pinned DOFs) on the Hessians
    /// and blocks set for this iteration: with `run.subspace`, each level in turn solves
    /// `UᵀHU q = Uᵀ r` by block-Jacobi PCG from zero and updates `d += U q`, `r −= H U q`; then
    /// the smoother runs Jacobi PCG on `H_l d = rhs` from `d` (from zero without the levels).
    pub fn solve(&self, be: &mut B, rhs: &[f64], run: DirectionRun) -> Result<DirectionSolve> {
        let DirectionRun {
            subspace,
            mut sms_correction,
            level_tolerance,
            level_max,
            n_cg,
            full_tolerance,
        } = run;
        let one = Coef::constant(1.0);
        be.write_vector(self.rhs, rhs)?;
        be.combine(self.r, one, self.rhs, Combine::Set, None)?;
        be.combine(self.d, Coef::constant(0.0), self.rhs, Combine::Set, None)?;
        let mut counts = [0; 3];
        if subspace {
            for (k, slot) in self.levels.iter().enumerate() {
                let Some(lv) = slot else { continue };
                be.ml_restrict(k, self.r, lv.b)?;
                let correction = if k == 1 {
                    sms_correction.as_deref_mut()
                } else {
                    None
                };
                let out = lv.pcg.solve(
                    be,
                    &mut |be: &mut B, v, o| be.ml_galerkin(k, v, o),
                    &mut |be: &mut B, r, z| be.ml_block_jacobi(k, r, z),
                    correction,
                    lv.b,
                    lv.q,
                    false,
                    level_tolerance,
                    level_max,
                )?;
                counts[k] = out.iterations;
                // d += U q;  r −= H U q.
                be.ml_lift(k, lv.q, self.u)?;
                be.ml_apply(Hessian::Levels, self.u, self.hu)?;
                be.combine(self.d, one, self.u, Combine::Add, None)?;
                be.combine(self.r, Coef::constant(-1.0), self.hu, Combine::Add, None)?;
            }
        }
        be.combine(self.ds, one, self.d, Combine::Set, None)?;
        let out = self.full.solve(
            be,
            &mut |be: &mut B, v, o| be.ml_apply(Hessian::Smoother, v, o),
            &mut |be: &mut B, r, z| be.ml_jacobi(r, z),
            None,
            self.rhs,
            self.d,
            subspace,
            full_tolerance,
            n_cg,
        )?;
        counts[2] = out.iterations;
        Ok(DirectionSolve {
            d: be.read_vector(self.d)?,
            d_s: be.read_vector(self.ds)?,
            counts,
        })
    }
}
