//! Sparse Cholesky `A = L Lᵀ` with a once-per-pattern symbolic analysis.
//!
//! The fill-reducing ordering is chosen at analysis time ([`Ordering`]). METIS nested
//! dissection on the compressed node graph (a 3-DOF vertex is one node, expanded back into
//! its 3 DOFs) gives markedly less fill than AMD on 3-D elasticity matrices; AMD (faer's
//! default) is kept as an option. Numeric refactors reuse the symbolic analysis.
//!
//! This uses faer's lower-level `SymbolicCholesky` (what `SymbolicLlt` wraps) because only
//! that entry point accepts a custom permutation.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltError;
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::perm::PermRef;
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, CholeskySymbolicParams, LltRef, SymbolicCholesky,
    SymbolicCholeskyRaw, SymmetricOrdering,
};
use faer::{Conj, MatMut, Par, Side};

use crate::sparse::{SymSparse, SymmetricPattern};
use crate::{PrecomputeError, Result};

/// Fill-reducing ordering used by the symbolic analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ordering {
    /// METIS nested dissection of the graph obtained by merging each run of `block`
    /// consecutive DOFs into one node (use 3 for xyz-per-vertex problems, 1 otherwise).
    NestedDissection {
        /// DOFs per graph node.
        block: usize,
    },
    /// Approximate minimum degree (faer's built-in).
    Amd,
    /// No reordering (tests only: usually catastrophic fill).
    Identity,
}

impl Default for Ordering {
    fn default() -> Self {
        Ordering::NestedDissection { block: 3 }
    }
}

/// Sparse Cholesky factor of a symmetric positive-definite matrix with a fixed pattern.
pub struct SparseCholesky {
    pattern: std::sync::Arc<SymmetricPattern>,
    symbolic: SymbolicCholesky<usize>,
    l_values: Vec<f64>,
    factored: bool,
    ordering: Ordering,
    /// The custom permutation (forward, inverse) when the ordering made one.
    perm: Option<(Vec<usize>, Vec<usize>)>,
}

impl std::fmt::Debug for SparseCholesky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseCholesky")
            .field("n", &self.n())
            .field("ordering", &self.ordering)
            .field("factor_nnz", &self.factor_nnz())
            .field("factored", &self.factored)
            .finish()
    }
}

impl SparseCholesky {
    /// Symbolic analysis of `pattern` with the given ordering (once per pattern).
    pub fn analyze(pattern: std::sync::Arc<SymmetricPattern>, ordering: Ordering) -> Result<Self> {
        let perm = match ordering {
            Ordering::NestedDissection { block } => {
                let (fwd, inv) = nested_dissection(&pattern, block)?;
                Some((fwd, inv))
            }
            _ => None,
        };
        Self::analyze_permuted(pattern, ordering, perm)
    }

    /// Symbolic analysis of `pattern` (same dimension) with *this* factor's fill-reducing
    /// permutation: no new ordering is computed. For a pattern that grows a few entries (contact
    /// couplings added to an elastic pattern) this keeps the ordering of the original and costs
    /// only the elimination tree and column counts; with AMD the ordering is recomputed.
    pub fn analyze_like(&self, pattern: std::sync::Arc<SymmetricPattern>) -> Result<Self> {
        if pattern.n() != self.n() {
            return Err(PrecomputeError::Invalid(format!(
                "analyze_like: a {}×{0} pattern for a {}×{1} factor",
                pattern.n(),
                self.n()
            )));
        }
        Self::analyze_permuted(pattern, self.ordering, self.perm.clone())
    }

    fn analyze_permuted(
        pattern: std::sync::Arc<SymmetricPattern>,
        ordering: Ordering,
        perm: Option<(Vec<usize>, Vec<usize>)>,
    ) -> Result<Self> {
        let n = pattern.n();
        let ord = match (&perm, ordering) {
            (Some((fwd, inv)), _) => SymmetricOrdering::Custom(PermRef::new_checked(fwd, inv, n)),
            (None, Ordering::Identity) => SymmetricOrdering::Identity,
            (None, _) => SymmetricOrdering::Amd,
        };
        let symbolic = factorize_symbolic_cholesky(
            pattern.symbolic(),
            Side::Upper,
            ord,
            CholeskySymbolicParams::default(),
        )
        .map_err(|e| PrecomputeError::Numeric(format!("symbolic Cholesky: {e:?}")))?;
        let l_values = vec![0.0; symbolic.len_val()];
        Ok(Self {
            pattern,
            symbolic,
            l_values,
            factored: false,
            ordering,
            perm,
        })
    }

    /// Analysis followed by a first numeric factorisation of `a`.
    pub fn new(a: &SymSparse, ordering: Ordering) -> Result<Self> {
        let mut f = Self::analyze(a.pattern().clone(), ordering)?;
        f.refactor(a)?;
        Ok(f)
    }

    /// Dimension.
    pub fn n(&self) -> usize {
        self.pattern.n()
    }

    /// Ordering used.
    pub fn ordering(&self) -> Ordering {
        self.ordering
    }

    /// Number of stored values of `L` (a measure of fill; supernodal storage counts blocks).
    pub fn factor_nnz(&self) -> usize {
        self.symbolic.len_val()
    }

    /// Floating-point operations of one numeric factorisation: Σ_j c_j(c_j + 1) over the
    /// columns of `L`, c_j the entries below column j's diagonal (one multiply and one add per
    /// entry of each column update, the count dense Cholesky's n³/3 comes from). From the
    /// supernodal structure (a supernode of width w with r rows below its diagonal block gives
    /// its k-th column c = w − 1 − k + r); `None` for a simplicial factor.
    pub fn factor_flops(&self) -> Option<f64> {
        let SymbolicCholeskyRaw::Supernodal(s) = self.symbolic.raw() else {
            return None;
        };
        let ptr = s.col_ptr_for_row_idx();
        let mut flops = 0.0;
        for (k, (&b, &e)) in s
            .supernode_begin()
            .iter()
            .zip(s.supernode_end())
            .enumerate()
        {
            let w = e - b;
            let r = (ptr[k + 1] - ptr[k]) as f64;
            for col in 0..w {
                let c = (w - 1 - col) as f64 + r;
                flops += c * (c + 1.0);
            }
        }
        Some(flops)
    }

    /// True when the factorisation is supernodal (as opposed to simplicial).
    pub fn is_supernodal(&self) -> bool {
        matches!(self.symbolic.raw(), SymbolicCholeskyRaw::Supernodal(_))
    }

    /// Numeric factorisation of `a`, which must share this factor's pattern.
    /// Returns [`PrecomputeError::NotPositiveDefinite`] when `a` is not SPD; the factor is
    /// then unusable until a successful refactor.
    pub fn refactor(&mut self, a: &SymSparse) -> Result<()> {
        self.refactor_with(a, faer::get_global_parallelism())
    }

    /// [`Self::refactor`] with explicit parallelism: pass `Par::Seq` when the caller already
    /// factors many matrices in parallel (DOT's subdomains).
    pub fn refactor_with(&mut self, a: &SymSparse, par: Par) -> Result<()> {
        if !std::sync::Arc::ptr_eq(a.pattern(), &self.pattern) && **a.pattern() != *self.pattern {
            return Err(PrecomputeError::Invalid(
                "refactor: matrix pattern differs from the analysed one".into(),
            ));
        }
        if a.values().iter().any(|v| !v.is_finite()) {
            self.factored = false;
            return Err(PrecomputeError::Invalid(
                "refactor: matrix has non-finite values".into(),
            ));
        }
        self.factored = false;
        let req = self
            .symbolic
            .factorize_numeric_llt_scratch::<f64>(par, Default::default());
        let mut mem = MemBuffer::try_new(req)
            .map_err(|_| PrecomputeError::Numeric("out of memory".into()))?;
        let res = self.symbolic.factorize_numeric_llt::<f64>(
            &mut self.l_values,
            a.as_faer(),
            Side::Upper,
            LltRegularization::default(),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        );
        match res {
            Ok(_) => {
                self.factored = true;
                Ok(())
            }
            Err(LltError::NonPositivePivot { index }) => {
                Err(PrecomputeError::NotPositiveDefinite { column: index })
            }
        }
    }

    fn check_ready(&self, len: usize, k: usize) -> Result<()> {
        if !self.factored {
            return Err(PrecomputeError::Invalid(
                "solve with a factor that holds no valid factorisation".into(),
            ));
        }
        if len != self.n() * k {
            return Err(PrecomputeError::Invalid(format!(
                "right-hand side has {len} values, expected {} × {k}",
                self.n()
            )));
        }
        Ok(())
    }

    /// Solves `A x = b` in place (`rhs` holds `b` on entry, `x` on exit).
    pub fn solve_in_place(&self, rhs: &mut [f64]) -> Result<()> {
        self.solve_many_in_place(rhs, 1)
    }

    /// Solves `A X = B` in place for a dense column-major `n × k` block, using faer's global
    /// parallelism.
    pub fn solve_many_in_place(&self, rhs: &mut [f64], k: usize) -> Result<()> {
        self.solve_many_in_place_with(rhs, k, faer::get_global_parallelism())
    }

    /// Like [`Self::solve_many_in_place`] with explicit parallelism: pass `Par::Seq` when the
    /// caller already runs many solves in parallel (e.g. rayon over RHS batches).
    pub fn solve_many_in_place_with(&self, rhs: &mut [f64], k: usize, par: Par) -> Result<()> {
        self.solve_many_in_place_scratch(rhs, k, par, &mut SolveScratch::default())
    }

    /// [`Self::solve_many_in_place_with`] with its workspace kept in `scratch` across calls:
    /// a loop of many multi-RHS solves (the JGS2 basis: one per batch of vertices, tens of
    /// MB of workspace each on a 100k-tet mesh) then allocates once instead of once per solve,
    /// and the kernel stops zero-filling fresh pages for every call.
    pub fn solve_many_in_place_scratch(
        &self,
        rhs: &mut [f64],
        k: usize,
        par: Par,
        scratch: &mut SolveScratch,
    ) -> Result<()> {
        self.check_ready(rhs.len(), k)?;
        if k == 0 {
            return Ok(());
        }
        let n = self.n();
        let req = self.symbolic.solve_in_place_scratch::<f64>(k, par);
        let mem = scratch.get(req)?;
        let mat = MatMut::from_column_major_slice_mut(rhs, n, k);
        LltRef::<usize, f64>::new(&self.symbolic, &self.l_values).solve_in_place_with_conj(
            Conj::No,
            mat,
            par,
            MemStack::new(mem),
        );
        Ok(())
    }
}

/// Reusable workspace of [`SparseCholesky::solve_many_in_place_scratch`]: grown to the largest
/// request seen (size and alignment), never shrunk.
#[derive(Default)]
pub struct SolveScratch {
    mem: Option<MemBuffer>,
    size: usize,
    align: usize,
}

impl SolveScratch {
    /// A buffer that satisfies `req`, reusing the current one when it is large enough.
    fn get(&mut self, req: faer::dyn_stack::StackReq) -> Result<&mut MemBuffer> {
        let fits =
            self.mem.is_some() && req.size_bytes() <= self.size && req.align_bytes() <= self.align;
        if !fits {
            let (size, align) = (
                req.size_bytes().max(self.size),
                req.align_bytes().max(self.align),
            );
            let grown = faer::dyn_stack::StackReq::new_aligned::<u8>(size, align);
            self.mem = None; // free the old buffer before allocating the new one
            self.mem = Some(
                MemBuffer::try_new(grown)
                    .map_err(|_| PrecomputeError::Numeric("out of memory".into()))?,
            );
            (self.size, self.align) = (size, align);
        }
        Ok(self.mem.as_mut().expect("allocated above"))
    }
}

/// METIS nested-dissection permutation `(fwd, inv)` of the pattern's DOFs, computed on the
/// graph that merges each `block` consecutive DOFs into one node.
/// `fwd[new] = old`, `inv[old] = new` (faer's convention).
pub fn nested_dissection(
    pattern: &SymmetricPattern,
    block: usize,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let n = pattern.n();
    let g = pattern.block_graph(block)?;
    let nb = g.len();
    let node_fwd: Vec<usize> = if nb <= 1 || g.adj.is_empty() {
        (0..nb).collect()
    } else {
        if g.adj.len() >= i32::MAX as usize {
            return Err(PrecomputeError::Ordering(
                "graph too large for 32-bit METIS".into(),
            ));
        }
        let mut xadj: Vec<i32> = g.xadj.iter().map(|&x| x as i32).collect();
        let mut adjncy: Vec<i32> = g.adj.iter().map(|&x| x as i32).collect();
        let mut nvtxs = nb as i32;
        let mut options = [0i32; metis_sys::METIS_NOPTIONS as usize];
        let mut perm = vec![0i32; nb];
        let mut iperm = vec![0i32; nb];
        let _metis = crate::metis_lock();
        // SAFETY: all arrays are sized as METIS documents (xadj n+1, adjncy 2|E|, perm/iperm n,
        // options METIS_NOPTIONS); METIS only reads xadj/adjncy and writes perm/iperm.
        let status = unsafe {
            metis_sys::METIS_SetDefaultOptions(options.as_mut_ptr());
            metis_sys::METIS_NodeND(
                &mut nvtxs,
                xadj.as_mut_ptr(),
                adjncy.as_mut_ptr(),
                std::ptr::null_mut(),
                options.as_mut_ptr(),
                perm.as_mut_ptr(),
                iperm.as_mut_ptr(),
            )
        };
        if status != metis_sys::rstatus_et_METIS_OK {
            return Err(PrecomputeError::Ordering(format!(
                "METIS_NodeND returned status {status}"
            )));
        }
        // METIS: perm[new] = old ("fill-reducing permutation"), iperm[old] = new.
        perm.iter().map(|&p| p as usize).collect()
    };
    let mut fwd = Vec::with_capacity(n);
    for &node in &node_fwd {
        for d in 0..block {
            fwd.push(node * block + d);
        }
    }
    let mut inv = vec![0usize; n];
    for (new, &old) in fwd.iter().enumerate() {
        inv[old] = new;
    }
    Ok((fwd, inv))
}
