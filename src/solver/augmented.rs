//! Newton's matrix when IPC contact couples vertices that share no element: the elastic
//! pattern plus the contact pairs' 3×3 blocks.
//!
//! The contact pairs change from iteration to iteration, so the pattern does too. Rebuilding it
//! and its fill-reducing ordering every iteration would cost a METIS run per iteration; instead
//! an [`AugmentedSystem`] holds a set of extra vertex couplings and is reused while the pairs'
//! couplings stay inside it. A new one is analysed with the elastic factor's permutation
//! ([`SparseCholesky::analyze_like`]): contact adds a few off-diagonal blocks to a mesh
//! graph, so the elastic ordering stays a good one and only the elimination tree and column
//! counts are redone.
//!
//! Growth policy: within a step the held set only grows (the union of what the iterations
//! needed), so a contact front sweeping over the surface costs one analysis per new block set,
//! not one per iteration; at the first iteration of a step a set that no longer covers the
//! pairs, or holds more than twice (plus 256) the couplings needed, is rebuilt from what is
//! needed, so stale couplings from earlier contacts do not accumulate fill.

use crate::error::{JelloError, Result};
use jello_precompute::cholesky::SparseCholesky;
use jello_precompute::sparse::{SymSparse, SymmetricPattern};
use std::sync::Arc;

/// The elastic pattern plus contact couplings, with its matrix and factor.
pub(crate) struct AugmentedSystem {
    /// Extra vertex couplings `[a, b]` (a < b) held, sorted.
    couplings: Vec<[u32; 2]>,
    /// Per value of the elastic pattern: its index in this pattern's values.
    map: Vec<usize>,
    /// Index of each diagonal entry in the values.
    pub diag: Vec<usize>,
    /// The assembled matrix.
    pub matrix: SymSparse,
    /// Its factor.
    pub factor: SparseCholesky,
}

impl AugmentedSystem {
    /// The pattern `base` with the 3×3 blocks of `couplings`, analysed with `like`'s ordering.
    fn new(
        base: &SymmetricPattern,
        like: &SparseCholesky,
        couplings: Vec<[u32; 2]>,
    ) -> Result<Self> {
        let err = |e: jello_precompute::PrecomputeError| JelloError::Solver(e.to_string());
        let n = base.n();
        let (cp, ri) = (base.col_ptr(), base.row_idx());
        let existing = (0..n).flat_map(|c| ri[cp[c]..cp[c + 1]].iter().map(move |&r| (r, c)));
        let extra = couplings.iter().flat_map(|&[a, b]| {
            (0..9).map(move |k| (3 * a as usize + k / 3, 3 * b as usize + k % 3))
        });
        let pattern =
            Arc::new(SymmetricPattern::from_entries(n, existing.chain(extra)).map_err(err)?);
        let mut map = Vec::with_capacity(ri.len());
        for c in 0..n {
            for &r in &ri[cp[c]..cp[c + 1]] {
                map.push(
                    pattern
                        .find(r, c)
                        .expect("the augmented pattern holds the base"),
                );
            }
        }
        let diag = (0..n)
            .map(|d| pattern.find(d, d).expect("the diagonal is always present"))
            .collect();
        let factor = like.analyze_like(pattern.clone()).map_err(err)?;
        Ok(AugmentedSystem {
            couplings,
            map,
            diag,
            matrix: SymSparse::zeros(pattern),
            factor,
        })
    }

    /// Whether every coupling of `needed` (sorted) is held.
    fn covers(&self, needed: &[[u32; 2]]) -> bool {
        needed
            .iter()
            .all(|c| self.couplings.binary_search(c).is_ok())
    }

    /// Copies the elastic matrix `base` into this pattern (the contact entries start at 0).
    pub fn load(&mut self, base: &SymSparse) {
        self.matrix.clear();
        let values = self.matrix.values_mut();
        for (&k, &v) in self.map.iter().zip(base.values()) {
            values[k] = v;
        }
    }
}

/// The augmented system of a Newton solver across iterations and steps.
#[derive(Default)]
pub(crate) struct ContactSystems {
    current: Option<AugmentedSystem>,
    /// Symbolic analyses done so far (a figure for reports and benches).
    pub analyses: usize,
}

impl ContactSystems {
    /// The system built last, if any.
    pub fn current(&self) -> Option<&AugmentedSystem> {
        self.current.as_ref()
    }

    /// A system holding `needed` (sorted extra couplings, none of them in `base`), reusing the
    /// current one when the growth policy (module docs) allows; `first` marks a step's first
    /// iteration.
    pub fn ensure(
        &mut self,
        base: &SymmetricPattern,
        like: &SparseCholesky,
        needed: Vec<[u32; 2]>,
        first: bool,
    ) -> Result<&mut AugmentedSystem> {
        let keep = match &self.current {
            Some(s) if s.covers(&needed) => !first || s.couplings.len() <= 2 * needed.len() + 256,
            _ => false,
        };
        if !keep {
            let couplings = match (&self.current, first) {
                (Some(s), false) => union(&s.couplings, &needed),
                _ => needed,
            };
            self.current = Some(AugmentedSystem::new(base, like, couplings)?);
            self.analyses += 1;
        }
        Ok(self.current.as_mut().expect("set above"))
    }
}

/// The sorted union of two sorted, unique lists.
fn union(a: &[[u32; 2]], b: &[[u32; 2]]) -> Vec<[u32; 2]> {
    let mut out: Vec<[u32; 2]> = a.iter().chain(b).copied().collect();
    out.sort_unstable();
    out.dedup();
    out
}
