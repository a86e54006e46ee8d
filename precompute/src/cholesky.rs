//! Sparse Cholesky `A = L Lᵀ` with a once-per-pattern symbolic analysis.
//!
//! The fill-reducing ordering is chosen at analysis time ([`Ordering`]). METIS nested
//! dissection on the compressed node graph (a 3-DOF vertex is one node, expanded back into
//! its 3 DOFs) gives markedly less fill than AMD on 3-D elasticity matrices; AMD (faer's
//! default) is kept as an option, and stands in for nested dissection in a build without the
//! `metis` feature (wasm32: METIS is a C library). Numeric refactors reuse the symbolic analysis.
//!
//! This uses faer's lower-level `SymbolicCholesky` (what `SymbolicLlt` wraps) because only
//! that entry point accepts a custom permutation.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltError;
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::perm::PermRef;
use faer::sparse::linalg::cholesky::supernodal::{SupernodalLltRef, SymbolicSupernodalCholesky};
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
    /// AMD in a build without the `metis` feature: the same factor up to round-off, with more
    /// fill.
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

impl Ordering {
    /// The fill-reducing permutation `(fwd, inv)` this ordering computes from `pattern` itself
    /// (nested dissection), or `None` when faer's analysis orders (AMD, and nested dissection
    /// without the `metis` feature) or nothing is reordered (identity).
    #[cfg_attr(not(feature = "metis"), allow(unused_variables))]
    pub fn permutation(
        self,
        pattern: &SymmetricPattern,
    ) -> Result<Option<(Vec<usize>, Vec<usize>)>> {
        match self {
            #[cfg(feature = "metis")]
            Ordering::NestedDissection { block } => nested_dissection(pattern, block).map(Some),
            #[cfg(not(feature = "metis"))]
            Ordering::NestedDissection { .. } => Ok(None),
            Ordering::Amd | Ordering::Identity => Ok(None),
        }
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
        let perm = ordering.permutation(&pattern)?;
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

    /// Position of each row in the elimination order (`inv[old] = new`), `None` when the factor
    /// does not permute. Right-hand sides whose nonzeros lie close in this order share most of
    /// their forward-solve work (see [`Self::solve_many_in_place_scratch`]).
    pub fn elimination_positions(&self) -> Option<&[usize]> {
        self.symbolic.perm().map(|p| p.arrays().1)
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
        self.solve_rows_in_place(rhs, k, par, scratch, None)
    }

    /// [`Self::solve_many_in_place_scratch`] on right-hand sides whose rows are stored in the
    /// caller's order: row `r` of each column of `rhs` (on entry and on exit) stands for row
    /// `rows[r]` of `A` (`rows` a permutation of `0..n`). The JGS2 basis stores `Ū_i`'s rows in
    /// cluster-tree order, so that its per-node sums read them sequentially; the solve's own
    /// permutation absorbs the reordering at no cost.
    pub fn solve_many_in_place_rows(
        &self,
        rhs: &mut [f64],
        k: usize,
        par: Par,
        scratch: &mut SolveScratch,
        rows: &[usize],
    ) -> Result<()> {
        if rows.len() != self.n() {
            return Err(PrecomputeError::Invalid(format!(
                "row order has {} entries for {} rows",
                rows.len(),
                self.n()
            )));
        }
        self.solve_rows_in_place(rhs, k, par, scratch, Some(rows))
    }

    /// `A X = [e_{units[0]} e_{units[1]} …]` with the rows of `out` in the order `rows` (see
    /// [`Self::solve_many_in_place_rows`]): column `j` of the right-hand side is 1 at row
    /// `units[j]` of `out` and 0 elsewhere. `out` (`n × units.len()`, column-major) needs no
    /// initialisation: the JGS2 basis no longer zero-fills a 65 MB block per batch only for
    /// the solve to search it for its few nonzeros.
    pub fn solve_unit_columns_rows(
        &self,
        out: &mut [f64],
        units: &[usize],
        par: Par,
        scratch: &mut SolveScratch,
        rows: &[usize],
    ) -> Result<()> {
        let (n, k) = (self.n(), units.len());
        if rows.len() != n || units.iter().any(|&u| u >= n) {
            return Err(PrecomputeError::Invalid(format!(
                "row order of {} entries or unit rows {units:?} for {n} rows",
                rows.len()
            )));
        }
        self.check_ready(out.len(), k)?;
        if k == 0 {
            return Ok(());
        }
        if let SymbolicCholeskyRaw::Supernodal(sn) = self.symbolic.raw() {
            let perm = self.symbolic.perm().map(|p| p.arrays());
            let map = |r: usize| perm.map_or(rows[r], |(_, inv)| inv[rows[r]]);
            let SolveScratch { x, tmp, .. } = scratch;
            x.clear();
            x.resize(n * k, 0.0);
            for (j, &u) in units.iter().enumerate() {
                x[map(u) * k + j] = 1.0;
            }
            supernodal_solve(sn, &self.l_values, map, out, k, x, tmp, par);
            return Ok(());
        }
        out.fill(0.0);
        for (j, &u) in units.iter().enumerate() {
            out[j * n + u] = 1.0;
        }
        self.solve_rows_in_place(out, k, par, scratch, Some(rows))
    }

    fn solve_rows_in_place(
        &self,
        rhs: &mut [f64],
        k: usize,
        par: Par,
        scratch: &mut SolveScratch,
        rows: Option<&[usize]>,
    ) -> Result<()> {
        self.check_ready(rhs.len(), k)?;
        if k == 0 {
            return Ok(());
        }
        let n = self.n();
        match self.symbolic.raw() {
            SymbolicCholeskyRaw::Supernodal(sn) => {
                let perm = self.symbolic.perm().map(|p| p.arrays());
                let SolveScratch { x, tmp, .. } = scratch;
                // Row r of `rhs` is row `inv[rows[r]]` of the factored system.
                let map = |r: usize| {
                    let d = rows.map_or(r, |m| m[r]);
                    perm.map_or(d, |(_, inv)| inv[d])
                };
                x.clear();
                x.resize(n * k, 0.0);
                // x[map(r)] = rhs[r], read column by column (sequential) and written only where
                // nonzero (sparse right-hand sides are mostly zero); the bit test keeps a −0.0
                // as faer would.
                for j in 0..k {
                    for (r, v) in rhs[j * n..(j + 1) * n].iter().enumerate() {
                        if v.to_bits() != 0 {
                            x[map(r) * k + j] = *v;
                        }
                    }
                }
                supernodal_solve(sn, &self.l_values, map, rhs, k, x, tmp, par);
            }
            SymbolicCholeskyRaw::Simplicial(_) => {
                // Small systems only: put the rows in `A`'s order around faer's solve.
                let mut x = std::mem::take(&mut scratch.x);
                x.clear();
                x.resize(n * k, 0.0);
                if let Some(m) = rows {
                    for j in 0..k {
                        for (r, &d) in m.iter().enumerate() {
                            x[j * n + d] = rhs[j * n + r];
                        }
                    }
                } else {
                    x.copy_from_slice(rhs);
                }
                let req = self.symbolic.solve_in_place_scratch::<f64>(k, par);
                let mem = scratch.get(req)?;
                let mat = MatMut::from_column_major_slice_mut(&mut x, n, k);
                LltRef::<usize, f64>::new(&self.symbolic, &self.l_values).solve_in_place_with_conj(
                    Conj::No,
                    mat,
                    par,
                    MemStack::new(mem),
                );
                if let Some(m) = rows {
                    for j in 0..k {
                        for (r, &d) in m.iter().enumerate() {
                            rhs[j * n + r] = x[j * n + d];
                        }
                    }
                } else {
                    rhs.copy_from_slice(&x);
                }
                scratch.x = x;
            }
        }
        Ok(())
    }

    /// faer's own dense solve: the reference the tests check [`Self::solve_many_in_place_scratch`]
    /// against (which works on row-major right-hand sides and skips zero blocks).
    #[doc(hidden)]
    pub fn solve_many_in_place_reference(&self, rhs: &mut [f64], k: usize, par: Par) -> Result<()> {
        self.check_ready(rhs.len(), k)?;
        if k == 0 {
            return Ok(());
        }
        let req = self.symbolic.solve_in_place_scratch::<f64>(k, par);
        let mut mem = MemBuffer::try_new(req)
            .map_err(|_| PrecomputeError::Numeric("out of memory".into()))?;
        let mat = MatMut::from_column_major_slice_mut(rhs, self.n(), k);
        LltRef::<usize, f64>::new(&self.symbolic, &self.l_values).solve_in_place_with_conj(
            Conj::No,
            mat,
            par,
            MemStack::new(&mut mem),
        );
        Ok(())
    }
}

/// `A X = B` through a supernodal `P A Pᵀ = L Lᵀ` (`map(r)`: the row of `P A Pᵀ` that row `r`
/// of `rhs` stands for), the right-hand sides given in `x` (row-major, already permuted: row
/// `map(r)` holds row `r`), the solution written to `rhs`: faer's
/// `LltRef::solve_in_place_with_conj` (the same kernels in the same order), with two changes:
/// - The permuted right-hand sides live row-major in `x` (`n × k`, row stride `k`), and the
///   kernels work on row-major views of it: the gathers and scatters of each supernode's
///   off-diagonal rows then move `k` contiguous values per row. Column-major, each row of the
///   pattern touched `k` cache lines spread over the whole block; on armadillo_114k (96
///   columns, 65 MB per block) those scalar loops took 37% of the JGS2 precompute's CPU time.
///   The products may block differently on row-major operands, so results can differ from
///   faer's in the last bits (1e-16 relative in the tests; the armadillo_114k artifact came
///   out byte-identical).
/// - The forward pass skips every supernode whose rows are exactly zero in every column. Such
///   a block stays zero (its descendants left it so), and faer would only subtract
///   `L_bot · 0` from its ancestors. The JGS2 basis solves identity columns: `L⁻¹Pᵀe_i` is
///   nonzero only on the elimination-tree path above `i`, so for a batch of vertices that
///   are close in the elimination order the forward pass touches a small part of `L` (the
///   backward pass is dense and done in full).
#[allow(clippy::too_many_arguments)]
fn supernodal_solve(
    sn: &SymbolicSupernodalCholesky<usize>,
    l_values: &[f64],
    map: impl Fn(usize) -> usize,
    rhs: &mut [f64],
    k: usize,
    x: &mut [f64],
    tmp: &mut Vec<f64>,
    par: Par,
) {
    use faer::linalg::matmul::matmul_with_conj;
    use faer::linalg::triangular_solve::{
        solve_lower_triangular_in_place_with_conj, solve_upper_triangular_in_place_with_conj,
    };
    use faer::reborrow::{Reborrow, ReborrowMut};
    use faer::{Accum, MatRef};
    let n = sn.nrows();
    let l = SupernodalLltRef::new(sn, l_values);
    for s in 0..sn.n_supernodes() {
        let s = l.supernode(s);
        let ls = s.val();
        let size = ls.ncols();
        let (ls_top, ls_bot) = ls.split_at_row(size);
        let (head, rest) = x.split_at_mut((s.start() + size) * k);
        let top = &mut head[s.start() * k..];
        if top.iter().all(|v| *v == 0.0) {
            continue;
        }
        let mut xt = MatMut::from_row_major_slice_mut(top, size, k);
        solve_lower_triangular_in_place_with_conj(ls_top, Conj::No, xt.rb_mut(), par);
        let p = s.pattern().len();
        tmp.clear();
        tmp.resize(p * k, 0.0);
        matmul_with_conj(
            MatMut::from_row_major_slice_mut(tmp, p, k),
            Accum::Replace,
            ls_bot,
            Conj::No,
            xt.rb(),
            Conj::No,
            1.0,
            par,
        );
        // Pattern rows lie below the supernode (in `rest`).
        let base = s.start() + size;
        for (&i, t) in s.pattern().iter().zip(tmp.chunks_exact(k)) {
            let row = &mut rest[(i - base) * k..(i - base + 1) * k];
            for (v, t) in row.iter_mut().zip(t) {
                *v -= t;
            }
        }
    }
    for s in (0..sn.n_supernodes()).rev() {
        let s = l.supernode(s);
        let ls = s.val();
        let size = ls.ncols();
        let (ls_top, ls_bot) = ls.split_at_row(size);
        let p = s.pattern().len();
        let (head, rest) = x.split_at_mut((s.start() + size) * k);
        let base = s.start() + size;
        tmp.clear();
        for &i in s.pattern() {
            tmp.extend_from_slice(&rest[(i - base) * k..(i - base + 1) * k]);
        }
        let mut xt = MatMut::from_row_major_slice_mut(&mut head[s.start() * k..], size, k);
        matmul_with_conj(
            xt.rb_mut(),
            Accum::Add,
            ls_bot.transpose(),
            Conj::Yes,
            MatRef::from_row_major_slice(tmp, p, k),
            Conj::No,
            -1.0,
            par,
        );
        solve_upper_triangular_in_place_with_conj(ls_top.transpose(), Conj::Yes, xt, par);
    }
    // rhs[r] = x[map(r)]: a blocked transpose of `x` into `rhs` (still in the solver's row
    // order), then each column permuted through a copy of itself. Reading `x` at `map(r)`
    // directly missed the cache on nearly every row (`map` sends consecutive rows all over
    // the 65 MB block): 20% of the JGS2 precompute, even eight columns at a time. A column is
    // 0.7 MB, so the permuting reads stay in cache.
    const BLOCK: usize = 32;
    for (b, xs) in x.chunks(BLOCK * k).enumerate() {
        let r0 = b * BLOCK;
        for (j, col) in rhs.chunks_exact_mut(n).enumerate() {
            for (v, xr) in col[r0..].iter_mut().zip(xs.chunks_exact(k)) {
                *v = xr[j];
            }
        }
    }
    tmp.clear();
    tmp.resize(n, 0.0);
    for col in rhs.chunks_exact_mut(n) {
        tmp.copy_from_slice(col);
        for (r, v) in col.iter_mut().enumerate() {
            *v = tmp[map(r)];
        }
    }
}

/// Reusable workspace of [`SparseCholesky::solve_many_in_place_scratch`]: grown to the largest
/// request seen (size and alignment), never shrunk.
#[derive(Default)]
pub struct SolveScratch {
    /// The permuted right-hand sides of a supernodal solve, row-major.
    x: Vec<f64>,
    /// One supernode's off-diagonal rows of them, row-major.
    tmp: Vec<f64>,
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
#[cfg(feature = "metis")]
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
