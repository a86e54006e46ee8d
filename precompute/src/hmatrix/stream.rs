//! The global-sketch H-matrix built from `G`'s columns as the JGS2 basis pass computes them
//! ([`StreamBuild`]), with no solve of its own.
//!
//! The basis pass (Eq. 23) solves `H̄ Y = S_iᵀ` for every free vertex: that is every column of
//! `G = H̄⁻¹`, all rows, in batches. The bases and couplings need only products with those
//! columns. Node ids are depth-first, so for a far block `I < J` cluster `I` precedes `J` in
//! the tree order; the batches come in tree order, so `I`'s columns are complete — and its
//! basis `Q_I` known — before `J`'s first column arrives. While `J`'s columns arrive:
//! - for an earlier partner `I < J`: `P_IJ = Q_Iᵀ G[I, J]`, gathered column by column; when
//!   `J` is complete, `S_IJ = P_IJ Q_J`;
//! - for a later partner `I > J` (its basis not known yet): the Gaussian sketch
//!   `G[I, J]ᵀ Ω_I` (`G` is symmetric, so this is `G[J, I] Ω_I`, J's rows of the sketch of its
//!   far row block).
//!
//! `J`'s sketch is `Y_J = Σ_{I > J} G[J, I] Ω_I + Σ_{I < J} P_IJᵀ Ω'_I` (`Ω'_I`: `k_I × p`
//! Gaussian), complete with `J`'s last column, and `Q_J` its truncated left singular vectors
//! (ε relative to the largest, as [`super::HMatrix::build`]). The second sum sketches
//! `G[J, I] Q_I` instead of `G[J, I]`: the block is represented as `Q_I S_IJ Q_Jᵀ`, and
//! `Q_Iᵀ G[I, J]`'s row space is all of `G[I, J]` that `Q_J` has to hold. It halves the
//! Gaussian products (each far block is read with `p` sketch columns from one side and `k_I`
//! from the other, instead of `p` from both plus `k_I`) at no loss of accuracy (tested
//! against the dense `G`).
//!
//! `Ω` is one Gaussian matrix over all rows (`3·nt × samples`); `Ω_I` is its rows of `I`
//! and `Ω'_I` the first `k_I` of them: the partners of a cluster are disjoint, so the stacked
//! pieces of one sketch are independent Gaussians.
//!
//! Batches may run concurrently (in tree order, a few in flight): a batch of `J` that needs
//! `Q_I` of a cluster still in flight waits for it. The earliest batch in flight never waits
//! (every cluster before it is complete, and within a batch the clusters are taken in the order
//! they end, each finished as soon as its last column is in), so the pass always progresses.

use crate::clock::Instant;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Condvar, Mutex, OnceLock};

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use super::{node_lists, partner, truncated_basis, HMatrix, HMatrixOptions};
use crate::tree::ClusterTree;
use crate::{PrecomputeError, Result};

/// Per cluster, what its columns have contributed so far.
#[derive(Default)]
struct Acc {
    /// `Y_J`, row-major `3|J| × samples` (allocated at J's first column).
    y: Vec<f64>,
    /// `(block, P_IJ)` for J's far partners `I < J`: column-major `k_I × 3|J|`.
    p: Vec<(u32, Vec<f64>)>,
}

/// The streamed build (see the module docs).
pub struct StreamBuild<'a> {
    tree: &'a ClusterTree,
    blocks: &'a [(u32, u32)],
    node_block_ptr: Vec<usize>,
    node_blocks: Vec<u32>,
    samples: usize,
    eps: f64,
    /// `Ω`, row-major `3·nt × samples`.
    omega: Vec<f64>,
    acc: Vec<Mutex<Acc>>,
    /// Tree positions of each active cluster whose columns have not arrived yet.
    remaining: Vec<AtomicUsize>,
    /// `Q_c`, column-major `3|c| × k_c`, set when c's last column has arrived.
    basis: Vec<OnceLock<Vec<f64>>>,
    /// `S_IJ` (row-major `k_I × k_J`), set when J's basis is.
    coupling: Vec<OnceLock<Vec<f64>>>,
    /// Inadmissible leaf pairs `(I, J)`, `I ≤ J`, in [`super::HMatrix::set_near`]'s order.
    near_pairs: Vec<(u32, u32)>,
    /// Per leaf `J`, its pairs `(pair index, I)` with `I ≤ J` (the blocks its columns fill).
    near_of: Vec<Vec<(u32, u32)>>,
    /// `G[I, J]` per near pair, row-major `3|I| × 3|J|`, filled from J's columns.
    near: Vec<Mutex<Vec<f64>>>,
    gate: Mutex<()>,
    wake: Condvar,
    failed: AtomicBool,
    /// Nanoseconds spent in [`Self::add_columns`] (the clusters' finishing included), all
    /// threads.
    busy_ns: AtomicU64,
}

impl<'a> StreamBuild<'a> {
    /// A build over `tree` for the far `blocks` (`I < J`), options as [`HMatrix::build`]'s
    /// (the sketch kind is not read: this is the global sketch).
    /// `near`: per leaf, the leaves of its inadmissible pairs (`BlockPartition::near`): their
    /// dense blocks of `G` are copied from the columns too.
    pub fn new(
        tree: &'a ClusterTree,
        blocks: &'a [(u32, u32)],
        near: &[Vec<u32>],
        opts: &HMatrixOptions,
    ) -> Result<Self> {
        super::check_options(opts)?;
        let nn = tree.len();
        if near.len() != nn
            || near.iter().enumerate().any(|(i, js)| {
                !js.is_empty() && tree.children[i].is_some()
                    || js
                        .iter()
                        .any(|&j| j as usize >= nn || tree.children[j as usize].is_some())
            })
        {
            return Err(PrecomputeError::Invalid(
                "H-matrix far field: the near lists are not per leaf of the tree".into(),
            ));
        }
        let near_pairs = super::near_pairs(near);
        let mut near_of = vec![Vec::new(); nn];
        for (k, &(i, j)) in near_pairs.iter().enumerate() {
            near_of[j as usize].push((k as u32, i));
        }
        for &(i, j) in blocks {
            if i >= j || j as usize >= nn {
                return Err(PrecomputeError::Invalid(format!(
                    "H-matrix far field: block ({i}, {j}) is not I < J < {nn}"
                )));
            }
        }
        let (node_block_ptr, node_blocks) = node_lists(nn, blocks);
        let remaining = (0..nn)
            .map(|c| {
                let active = node_block_ptr[c + 1] > node_block_ptr[c];
                AtomicUsize::new(if active {
                    (tree.end[c] - tree.start[c]) as usize
                } else {
                    0
                })
            })
            .collect();
        Ok(Self {
            tree,
            blocks,
            node_block_ptr,
            node_blocks,
            samples: opts.samples,
            eps: opts.eps,
            omega: super::gaussian_omega(3 * tree.perm.len(), opts.samples, opts.seed),
            acc: (0..nn).map(|_| Mutex::new(Acc::default())).collect(),
            remaining,
            basis: (0..nn).map(|_| OnceLock::new()).collect(),
            coupling: (0..blocks.len()).map(|_| OnceLock::new()).collect(),
            near: (0..near_pairs.len())
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            near_pairs,
            near_of,
            gate: Mutex::new(()),
            wake: Condvar::new(),
            failed: AtomicBool::new(false),
            busy_ns: AtomicU64::new(0),
        })
    }

    fn active(&self, c: usize) -> bool {
        self.node_block_ptr[c + 1] > self.node_block_ptr[c]
    }

    fn size(&self, c: usize) -> usize {
        3 * (self.tree.end[c] - self.tree.start[c]) as usize
    }

    fn row0(&self, c: usize) -> usize {
        3 * self.tree.start[c] as usize
    }

    /// Marks the build failed (a batch's solve went wrong) and wakes every waiter, which
    /// then returns an error instead of waiting for a basis that will never come.
    pub fn abort(&self) {
        self.failed.store(true, AtomicOrdering::SeqCst);
        let _g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    /// True once [`Self::abort`] was called.
    pub fn failed(&self) -> bool {
        self.failed.load(AtomicOrdering::SeqCst)
    }

    /// CPU seconds spent in the products and the clusters' finishing, summed over threads.
    pub fn cpu_seconds(&self) -> f64 {
        self.busy_ns.load(AtomicOrdering::Relaxed) as f64 * 1e-9
    }

    /// `Q_c`, waiting for it while c's last columns are in flight on another thread.
    fn wait_basis(&self, c: usize) -> Result<&[f64]> {
        if let Some(q) = self.basis[c].get() {
            return Ok(q);
        }
        let mut g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(q) = self.basis[c].get() {
                return Ok(q);
            }
            if self.failed.load(AtomicOrdering::SeqCst) {
                return Err(PrecomputeError::Numeric(
                    "H-matrix far field: the build was aborted".into(),
                ));
            }
            g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Adds the columns of tree positions `lo..hi`: `y` is `G[:, those DOFs]`, column-major
    /// with `n` rows (the tree-ordered layout: row `3p + d` is DOF `d` of tree position `p`;
    /// rows past `3·nt` are not read), `3·(hi − lo)` columns. Every position must be added
    /// exactly once; clusters whose columns are then complete are finished on this thread.
    pub fn add_columns(&self, lo: usize, hi: usize, y: &[f64], n: usize) -> Result<()> {
        let t0 = Instant::now();
        let out = self.add_columns_timed(lo, hi, y, n);
        self.busy_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, AtomicOrdering::Relaxed);
        out
    }

    fn add_columns_timed(&self, lo: usize, hi: usize, y: &[f64], n: usize) -> Result<()> {
        let tree = self.tree;
        let nt = tree.perm.len();
        if lo >= hi || hi > nt || n < 3 * nt || y.len() != n * 3 * (hi - lo) {
            return Err(PrecomputeError::Invalid(format!(
                "H-matrix stream: positions {lo}..{hi} of {nt} with {} values of {n} rows",
                y.len()
            )));
        }
        self.copy_near(lo, hi, y, n);
        // The active clusters that hold some of these positions.
        let mut hit = Vec::new();
        let mut stack = if tree.is_empty() {
            vec![]
        } else {
            vec![0usize]
        };
        while let Some(c) = stack.pop() {
            if tree.end[c] as usize <= lo || tree.start[c] as usize >= hi {
                continue;
            }
            if self.active(c) {
                hit.push(c);
            }
            if let Some((l, r)) = tree.children[c] {
                stack.push(l as usize);
                stack.push(r as usize);
            }
        }
        // In order of where each cluster ends (the smaller first at the same end): a cluster
        // far from one before it in this same batch needs that one's basis, finished below
        // as soon as its last column is in, before the later cluster's products.
        hit.sort_by_key(|&c| (tree.end[c], self.size(c)));
        for &jc in &hit {
            let a = (tree.start[jc] as usize).max(lo);
            let b = (tree.end[jc] as usize).min(hi);
            self.add_cluster_columns(jc, a, b, lo, y, n)?;
            let before = self.remaining[jc].fetch_sub(b - a, AtomicOrdering::SeqCst);
            if before < b - a {
                return Err(PrecomputeError::Invalid(format!(
                    "H-matrix stream: cluster {jc}'s columns were added twice"
                )));
            }
            if before == b - a {
                self.finish_cluster(jc);
            }
        }
        Ok(())
    }

    /// The near blocks `G[I, J]` (`I ≤ J`) of the leaves `J` these columns belong to.
    fn copy_near(&self, lo: usize, hi: usize, y: &[f64], n: usize) {
        let tree = self.tree;
        let mut stack = if tree.is_empty() {
            vec![]
        } else {
            vec![0usize]
        };
        while let Some(c) = stack.pop() {
            if tree.end[c] as usize <= lo || tree.start[c] as usize >= hi {
                continue;
            }
            if let Some((l, r)) = tree.children[c] {
                stack.push(l as usize);
                stack.push(r as usize);
                continue;
            }
            let (a, b) = (
                (tree.start[c] as usize).max(lo),
                (tree.end[c] as usize).min(hi),
            );
            let (mj, off, nc) = (self.size(c), 3 * (a - tree.start[c] as usize), 3 * (b - a));
            for &(k, ic) in &self.near_of[c] {
                let (ri, mi) = (self.row0(ic as usize), self.size(ic as usize));
                let mut blk = self.near[k as usize]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if blk.is_empty() {
                    *blk = vec![0.0; mi * mj];
                }
                for q in 0..nc {
                    let col = &y[(3 * (a - lo) + q) * n + ri..][..mi];
                    for (r, &v) in col.iter().enumerate() {
                        blk[r * mj + off + q] = v;
                    }
                }
            }
        }
    }

    /// Cluster `jc`'s share of the columns: positions `a..b` (within the batch from `lo`).
    fn add_cluster_columns(
        &self,
        jc: usize,
        a: usize,
        b: usize,
        lo: usize,
        y: &[f64],
        n: usize,
    ) -> Result<()> {
        let (tree, p) = (self.tree, self.samples);
        let (c0, nc) = (3 * (a - lo), 3 * (b - a));
        let mut t = vec![0.0; nc * p];
        let mut pieces = Vec::new();
        for &bk in &self.node_blocks[self.node_block_ptr[jc]..self.node_block_ptr[jc + 1]] {
            let ic = partner(self.blocks, jc, bk);
            let (ri, mi) = (self.row0(ic), self.size(ic));
            // G[I, cols]: rows ri.., columns c0.. of `y`.
            let g = MatRef::from_column_major_slice_with_stride(&y[c0 * n + ri..], mi, nc, n);
            if ic > jc {
                // A later partner: the Gaussian sketch G[I, cols]ᵀ Ω_I.
                let om = MatRef::from_row_major_slice(&self.omega[ri * p..(ri + mi) * p], mi, p);
                matmul(
                    MatMut::from_row_major_slice_mut(&mut t, nc, p),
                    Accum::Add,
                    g.transpose(),
                    om,
                    1.0,
                    Par::Seq,
                );
            } else {
                // An earlier one (its basis known): P_IJ = Q_Iᵀ G[I, J], which both the
                // coupling and J's sketch are made of.
                let q = self.wait_basis(ic)?;
                let ki = q.len() / mi;
                if ki > 0 {
                    let mut piece = vec![0.0; ki * nc];
                    matmul(
                        MatMut::from_column_major_slice_mut(&mut piece, ki, nc),
                        Accum::Replace,
                        MatRef::from_column_major_slice(q, mi, ki).transpose(),
                        g,
                        1.0,
                        Par::Seq,
                    );
                    pieces.push((bk, ki, piece));
                }
            }
        }
        let mj = self.size(jc);
        let off = 3 * (a - tree.start[jc] as usize);
        let mut acc = self.acc[jc].lock().unwrap_or_else(|e| e.into_inner());
        if acc.y.is_empty() {
            acc.y = vec![0.0; mj * p];
        }
        for (d, s) in acc.y[off * p..(off + nc) * p].iter_mut().zip(&t) {
            *d += s;
        }
        for (bk, ki, piece) in pieces {
            let at = match acc.p.iter().position(|(b, _)| *b == bk) {
                Some(at) => at,
                None => {
                    acc.p.push((bk, vec![0.0; ki * mj]));
                    acc.p.len() - 1
                }
            };
            acc.p[at].1[off * ki..(off + nc) * ki].copy_from_slice(&piece);
        }
        Ok(())
    }

    /// `Q_J` from the complete sketch, then `S_IJ = P_IJ Q_J` for J's partners `I < J`.
    fn finish_cluster(&self, jc: usize) {
        let mut acc = std::mem::take(&mut *self.acc[jc].lock().unwrap_or_else(|e| e.into_inner()));
        let (mj, p) = (self.size(jc), self.samples);
        if acc.y.is_empty() {
            acc.y = vec![0.0; mj * p];
        }
        // The earlier partners' share of the sketch: P_IJᵀ Ω'_I (see the module docs).
        for (bk, pij) in &acc.p {
            let ic = self.blocks[*bk as usize].0 as usize;
            let ki = pij.len() / mj;
            let ri = self.row0(ic);
            matmul(
                MatMut::from_row_major_slice_mut(&mut acc.y, mj, p),
                Accum::Add,
                MatRef::from_column_major_slice(pij, ki, mj).transpose(),
                MatRef::from_row_major_slice(&self.omega[ri * p..(ri + ki) * p], ki, p),
                1.0,
                Par::Seq,
            );
        }
        let q = truncated_basis(nalgebra::DMatrix::from_row_slice(mj, p, &acc.y), self.eps);
        let kj = q.len() / mj.max(1);
        for (bk, pij) in acc.p {
            let ki = pij.len() / mj;
            let mut s = vec![0.0; ki * kj];
            if ki * kj > 0 {
                matmul(
                    MatMut::from_row_major_slice_mut(&mut s, ki, kj),
                    Accum::Replace,
                    MatRef::from_column_major_slice(&pij, ki, mj),
                    MatRef::from_column_major_slice(&q, mj, kj),
                    1.0,
                    Par::Seq,
                );
            }
            let _ = self.coupling[bk as usize].set(s);
        }
        let _ = self.basis[jc].set(q);
        let _g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    /// The H-matrix (its near blocks exact, copied from the columns) once every tree
    /// position's columns have been added.
    pub fn finish(self) -> Result<HMatrix> {
        let nn = self.tree.len();
        if let Some(c) = (0..nn).find(|&c| self.remaining[c].load(AtomicOrdering::SeqCst) > 0) {
            return Err(PrecomputeError::Invalid(format!(
                "H-matrix stream: cluster {c}'s columns are incomplete"
            )));
        }
        let sizes: Vec<usize> = (0..nn).map(|c| self.size(c)).collect();
        // Exact capacities (a doubling Vec would hold up to twice the H-matrix at its peak),
        // and the small per-cluster and per-block pieces handed back to the OS as they are
        // copied (`Trim`): freed into the heap, ~10⁵ of them would stay resident beside the
        // flat arrays (+0.9 GB of peak RSS on armadillo_114k).
        let total = |cells: &[OnceLock<Vec<f64>>]| -> usize {
            cells.iter().map(|c| c.get().map_or(0, Vec::len)).sum()
        };
        let mut trim = Trim::default();
        let mut rank = Vec::with_capacity(nn);
        let mut basis_ptr = Vec::with_capacity(nn + 1);
        let mut basis = Vec::with_capacity(total(&self.basis));
        for (c, cell) in self.basis.into_iter().enumerate() {
            let q = cell.into_inner().unwrap_or_default();
            rank.push((q.len() / sizes[c].max(1)) as u32);
            basis_ptr.push(basis.len());
            basis.extend_from_slice(&q);
            trim.freed(q);
        }
        basis_ptr.push(basis.len());
        let mut coupling_ptr = Vec::with_capacity(self.blocks.len() + 1);
        let mut coupling = Vec::with_capacity(total(&self.coupling));
        for (cell, &(i, j)) in self.coupling.into_iter().zip(self.blocks) {
            coupling_ptr.push(coupling.len());
            let want = rank[i as usize] as usize * rank[j as usize] as usize;
            match cell.into_inner() {
                Some(s) if s.len() == want => {
                    coupling.extend_from_slice(&s);
                    trim.freed(s);
                }
                // A rank-0 cluster: the block is zero to the sketch's tolerance.
                _ => coupling.extend(std::iter::repeat_n(0.0, want)),
            }
        }
        coupling_ptr.push(coupling.len());
        let near_total: usize = self
            .near_pairs
            .iter()
            .map(|&(i, j)| sizes[i as usize] * sizes[j as usize])
            .sum();
        let mut near_ptr = Vec::with_capacity(self.near_pairs.len() + 1);
        let mut near = Vec::with_capacity(near_total);
        for (cell, &(i, j)) in self.near.into_iter().zip(&self.near_pairs) {
            let b = cell.into_inner().unwrap_or_else(|e| e.into_inner());
            if b.len() != sizes[i as usize] * sizes[j as usize] {
                return Err(PrecomputeError::Invalid(format!(
                    "H-matrix stream: near pair ({i}, {j}) was not filled"
                )));
            }
            near_ptr.push(near.len());
            near.extend_from_slice(&b);
            trim.freed(b);
        }
        near_ptr.push(near.len());
        trim.now();
        let (node_near_ptr, node_near) = node_lists(nn, &self.near_pairs);
        Ok(HMatrix {
            near_pairs: self.near_pairs,
            near_ptr,
            near,
            node_near,
            node_near_ptr,
            rank,
            basis_ptr,
            basis,
            blocks: self.blocks.to_vec(),
            coupling_ptr,
            coupling,
            node_blocks: self.node_blocks,
            node_block_ptr: self.node_block_ptr,
        })
    }
}

/// Hands freed heap memory back to the OS every 16 MB of pieces dropped (glibc only; elsewhere
/// a no-op).
#[derive(Default)]
struct Trim {
    pending: usize,
}

impl Trim {
    fn freed(&mut self, piece: Vec<f64>) {
        self.pending += 8 * piece.capacity();
        drop(piece);
        if self.pending >= 16 << 20 {
            self.now();
        }
    }

    fn now(&mut self) {
        self.pending = 0;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: `malloc_trim` only returns free pages of the allocator's own arenas to the
        // OS; it takes no pointer and has no precondition.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
