//! Symmetric sparse matrices with a fixed pattern.
//!
//! Only the upper triangle (row ≤ column) is stored, in compressed sparse column (CSC) form
//! with sorted row indices — the layout faer's Cholesky reads with `Side::Upper`.
//! The pattern is built once ([`SymmetricPattern`]); a [`ScatterMap`] then records, for every
//! (element, local entry), the index into the value array, so each Newton iteration refills
//! the matrix by a scatter-add with no searching.

use std::sync::Arc;

use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};

use crate::{PrecomputeError, Result};

/// Sentinel in a [`ScatterMap`]: this local entry is not stored (lower triangle or fixed DOF).
pub const SKIP: u32 = u32::MAX;

/// Upper-triangular CSC sparsity pattern of a symmetric `n × n` matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymmetricPattern {
    n: usize,
    col_ptr: Vec<usize>,
    row_idx: Vec<usize>,
}

impl SymmetricPattern {
    /// Builds the pattern from any list of `(row, col)` positions; each position and its
    /// mirror are included, and the diagonal is always present (Cholesky needs it).
    pub fn from_entries(
        n: usize,
        entries: impl IntoIterator<Item = (usize, usize)>,
    ) -> Result<Self> {
        let mut cols: Vec<Vec<usize>> = (0..n).map(|c| vec![c]).collect();
        for (r, c) in entries {
            if r >= n || c >= n {
                return Err(PrecomputeError::Invalid(format!(
                    "pattern entry ({r}, {c}) outside a {n}×{n} matrix"
                )));
            }
            let (r, c) = if r <= c { (r, c) } else { (c, r) };
            cols[c].push(r);
        }
        let mut col_ptr = Vec::with_capacity(n + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for mut rows in cols {
            rows.sort_unstable();
            rows.dedup();
            row_idx.extend_from_slice(&rows);
            col_ptr.push(row_idx.len());
        }
        Ok(Self {
            n,
            col_ptr,
            row_idx,
        })
    }

    /// Pattern of a matrix with `dofs_per_node` DOFs per node where every element couples
    /// all DOFs of all its nodes (e.g. tets: 4 nodes, 3 DOFs each → dense 12×12 blocks).
    pub fn from_elements<const K: usize>(
        n_nodes: usize,
        dofs_per_node: usize,
        elements: &[[u32; K]],
    ) -> Result<Self> {
        let d = dofs_per_node;
        // Node adjacency first (cheap), then expand to DOFs.
        let adj = node_adjacency(n_nodes, elements)?;
        let n = n_nodes * d;
        let mut col_ptr = Vec::with_capacity(n + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for node in 0..n_nodes {
            // neighbours (sorted) including the node itself, restricted to ≤ node
            let mut nb: Vec<usize> = adj
                .neighbours(node)
                .iter()
                .map(|&v| v as usize)
                .filter(|&v| v < node)
                .collect();
            nb.push(node);
            nb.sort_unstable();
            for a in 0..d {
                let col = node * d + a;
                for &v in &nb {
                    for b in 0..d {
                        let row = v * d + b;
                        if row <= col {
                            row_idx.push(row);
                        }
                    }
                }
                col_ptr.push(row_idx.len());
            }
        }
        Ok(Self {
            n,
            col_ptr,
            row_idx,
        })
    }

    /// Matrix dimension.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of stored (upper-triangular) entries.
    pub fn nnz(&self) -> usize {
        self.row_idx.len()
    }

    /// Column pointers (length `n + 1`).
    pub fn col_ptr(&self) -> &[usize] {
        &self.col_ptr
    }

    /// Row indices, sorted within each column.
    pub fn row_idx(&self) -> &[usize] {
        &self.row_idx
    }

    /// Index into the value array of entry `(row, col)` (either triangle), if stored.
    pub fn find(&self, row: usize, col: usize) -> Option<usize> {
        let (r, c) = if row <= col { (row, col) } else { (col, row) };
        if c >= self.n {
            return None;
        }
        let (lo, hi) = (self.col_ptr[c], self.col_ptr[c + 1]);
        self.row_idx[lo..hi].binary_search(&r).ok().map(|k| lo + k)
    }

    /// faer view of the pattern.
    pub fn symbolic(&self) -> SymbolicSparseColMatRef<'_, usize> {
        SymbolicSparseColMatRef::new_checked(self.n, self.n, &self.col_ptr, None, &self.row_idx)
    }

    /// Adjacency graph of the matrix after compressing each run of `block` consecutive DOFs
    /// into one node (self loops removed). Used to order the vertex graph of a 3-DOF problem.
    pub fn block_graph(&self, block: usize) -> Result<Adjacency> {
        if block == 0 || !self.n.is_multiple_of(block) {
            return Err(PrecomputeError::Invalid(format!(
                "block size {block} does not divide matrix size {}",
                self.n
            )));
        }
        let nb = self.n / block;
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); nb];
        for c in 0..self.n {
            for &r in &self.row_idx[self.col_ptr[c]..self.col_ptr[c + 1]] {
                let (bc, br) = (c / block, r / block);
                if bc != br {
                    lists[bc].push(br as u32);
                    lists[br].push(bc as u32);
                }
            }
        }
        Ok(Adjacency::from_lists(lists))
    }
}

/// Undirected graph in CSR form (sorted, duplicate-free neighbour lists, no self loops).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adjacency {
    /// Offsets into `adj` (length `n + 1`).
    pub xadj: Vec<usize>,
    /// Concatenated neighbour lists.
    pub adj: Vec<u32>,
}

impl Adjacency {
    fn from_lists(lists: Vec<Vec<u32>>) -> Self {
        let mut xadj = Vec::with_capacity(lists.len() + 1);
        let mut adj = Vec::new();
        xadj.push(0);
        for mut l in lists {
            l.sort_unstable();
            l.dedup();
            adj.extend_from_slice(&l);
            xadj.push(adj.len());
        }
        Self { xadj, adj }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.xadj.len() - 1
    }

    /// True when the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Neighbours of `node`.
    pub fn neighbours(&self, node: usize) -> &[u32] {
        &self.adj[self.xadj[node]..self.xadj[node + 1]]
    }
}

/// Node adjacency of an element mesh: two nodes are adjacent when an element holds both.
pub fn node_adjacency<const K: usize>(n_nodes: usize, elements: &[[u32; K]]) -> Result<Adjacency> {
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); n_nodes];
    for (e, el) in elements.iter().enumerate() {
        for &a in el {
            if a as usize >= n_nodes {
                return Err(PrecomputeError::Invalid(format!(
                    "element {e} references node {a} but there are {n_nodes} nodes"
                )));
            }
        }
        for (i, &a) in el.iter().enumerate() {
            for (j, &b) in el.iter().enumerate() {
                if i != j {
                    if a == b {
                        return Err(PrecomputeError::Invalid(format!(
                            "element {e} repeats node {a}"
                        )));
                    }
                    lists[a as usize].push(b);
                }
            }
        }
    }
    Ok(Adjacency::from_lists(lists))
}

/// For every element and every entry of its dense local matrix (row-major, `n_local²`
/// entries), the index into the value array of a [`SymSparse`], or [`SKIP`].
///
/// Lower-triangular global entries are skipped (the element matrix is symmetric, so its
/// upper mirror carries the same value), as are entries touching a fixed DOF.
#[derive(Clone, Debug)]
pub struct ScatterMap {
    n_local: usize,
    idx: Vec<u32>,
}

impl ScatterMap {
    /// Builds the map. `elem_dofs` holds `n_local` global DOF indices per element, flat;
    /// `fixed` (optional, one flag per DOF) marks DOFs whose rows/columns are not assembled.
    pub fn new(
        pattern: &SymmetricPattern,
        n_local: usize,
        elem_dofs: &[usize],
        fixed: Option<&[bool]>,
    ) -> Result<Self> {
        if n_local == 0 || !elem_dofs.len().is_multiple_of(n_local) {
            return Err(PrecomputeError::Invalid(
                "element DOF list length is not a multiple of n_local".into(),
            ));
        }
        if pattern.nnz() >= SKIP as usize {
            return Err(PrecomputeError::Invalid(
                "pattern too large for u32 scatter indices".into(),
            ));
        }
        if let Some(f) = fixed {
            if f.len() != pattern.n() {
                return Err(PrecomputeError::Invalid(format!(
                    "fixed mask has {} entries, matrix has {} DOFs",
                    f.len(),
                    pattern.n()
                )));
            }
        }
        let is_fixed = |d: usize| fixed.is_some_and(|f| f[d]);
        let mut idx = Vec::with_capacity(elem_dofs.len() * n_local);
        for (e, dofs) in elem_dofs.chunks_exact(n_local).enumerate() {
            for &r in dofs {
                for &c in dofs {
                    if r > c || is_fixed(r) || is_fixed(c) {
                        idx.push(SKIP);
                        continue;
                    }
                    let k = pattern.find(r, c).ok_or_else(|| {
                        PrecomputeError::Invalid(format!(
                            "element {e}: entry ({r}, {c}) is not in the pattern"
                        ))
                    })?;
                    idx.push(k as u32);
                }
            }
        }
        Ok(Self { n_local, idx })
    }

    /// Local matrix size.
    pub fn n_local(&self) -> usize {
        self.n_local
    }

    /// Number of elements.
    pub fn n_elements(&self) -> usize {
        self.idx.len() / (self.n_local * self.n_local)
    }

    /// Value-array indices of element `e` (row-major local entries).
    pub fn element(&self, e: usize) -> &[u32] {
        let s = self.n_local * self.n_local;
        &self.idx[e * s..(e + 1) * s]
    }
}

/// The transpose of a [`ScatterMap`]: for each stored value, the flat indices
/// (`e·n_local² + local entry`) of the element entries that add into it, ascending. Assembling
/// by gathering — each value summed from its own list — runs in parallel over the values with
/// no write conflicts, and adds in the order a sequential scatter over the elements does, so
/// [`SymSparse::gather`] equals [`SymSparse::scatter_add`] over all elements bit for bit.
#[derive(Clone, Debug)]
pub struct GatherMap {
    offsets: Vec<u32>,
    sources: Vec<u32>,
    /// Length of the element-entry array it reads (`n_elements · n_local²`).
    n_entries: usize,
}

impl GatherMap {
    /// Inverts `map` for a pattern of `nnz` stored values.
    pub fn new(map: &ScatterMap, nnz: usize) -> Result<Self> {
        // targets[src]: the value the element entry src adds into (SKIP: none).
        let targets = &map.idx;
        if targets.len() >= SKIP as usize {
            return Err(PrecomputeError::Invalid(
                "too many element entries for u32 gather indices".into(),
            ));
        }
        if let Some(&k) = targets.iter().find(|&&k| k != SKIP && k as usize >= nnz) {
            return Err(PrecomputeError::Invalid(format!(
                "scatter target {k} outside a pattern of {nnz} values"
            )));
        }
        let mut offsets = vec![0u32; nnz + 1];
        for &k in targets.iter().filter(|&&k| k != SKIP) {
            offsets[k as usize + 1] += 1;
        }
        for i in 0..nnz {
            offsets[i + 1] += offsets[i];
        }
        let mut next: Vec<u32> = offsets[..nnz].to_vec();
        let mut sources = vec![0u32; offsets[nnz] as usize];
        for (src, &k) in targets.iter().enumerate() {
            if k != SKIP {
                let slot = &mut next[k as usize];
                sources[*slot as usize] = src as u32;
                *slot += 1;
            }
        }
        Ok(Self {
            offsets,
            sources,
            n_entries: targets.len(),
        })
    }

    /// Number of stored values it fills.
    pub fn nnz(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// [`GatherMap`] by 3×3 blocks, for a [`SymmetricPattern::from_elements`] pattern with 3 DOFs
/// per node: per stored node-pair block, the element blocks that add into it, ascending by
/// element. It reads the elements' matrices in the packed upper-block layout
/// ([`pack_upper_blocks`]: per element only its K(K+1)/2 node-pair blocks, each 9 contiguous
/// values oriented as the global upper triangle stores it) — for a tet 90 values instead of
/// 144, so the element pass writes and the gather reads 37.5% fewer bytes, and every source is
/// one run of 9 values where the scalar gather reads 9 scattered ones through 9 index lists.
/// [`SymSparse::gather_blocks`] sums every value over the same sources in the same order as
/// the scalar gather, so the two agree bit for bit.
#[derive(Clone, Debug)]
pub struct BlockGatherMap {
    /// Element size in nodes (local matrix `3K × 3K`).
    nodes: usize,
    /// Per column node `b`: its blocks are `col_blocks[b]..col_blocks[b + 1]`, in the column's
    /// row order (row nodes ascending, the diagonal block last).
    col_blocks: Vec<u32>,
    /// Per block: its sources are `block_src[k]..block_src[k + 1]`.
    block_src: Vec<u32>,
    /// Where each source block starts in the packed element entries: `9·(e·K(K+1)/2 + slot)`
    /// ([`pack_upper_blocks`]).
    sources: Vec<u32>,
    /// Stored values of the pattern it was built for.
    nnz: usize,
    n_entries: usize,
}

impl BlockGatherMap {
    /// The map of `elements` (K nodes each) on `pattern`, which must be
    /// `SymmetricPattern::from_elements(n_nodes, 3, elements)`; `fixed_nodes` (optional, one
    /// flag per node) marks nodes whose rows and columns are not assembled (as a
    /// [`ScatterMap`] with all three DOFs of those nodes fixed).
    pub fn new<const K: usize>(
        pattern: &SymmetricPattern,
        elements: &[[u32; K]],
        fixed_nodes: Option<&[bool]>,
    ) -> Result<Self> {
        let n = pattern.n();
        if !n.is_multiple_of(3) {
            return Err(PrecomputeError::Invalid(format!(
                "block gather: {n} DOFs is not 3 per node"
            )));
        }
        let nn = n / 3;
        if let Some(f) = fixed_nodes {
            if f.len() != nn {
                return Err(PrecomputeError::Invalid(format!(
                    "fixed mask has {} nodes, matrix has {nn}",
                    f.len()
                )));
            }
        }
        let per_element = 9 * packed_blocks(K);
        if elements.len() * per_element >= SKIP as usize {
            return Err(PrecomputeError::Invalid(
                "too many element blocks for u32 gather indices".into(),
            ));
        }
        let cp = pattern.col_ptr();
        // Column 3b's rows are 3 per row node, ascending, ending with node b itself (one row):
        // its block count is ⌈length / 3⌉, and every column 3b + j holds the same nodes.
        let mut col_blocks = Vec::with_capacity(nn + 1);
        col_blocks.push(0u32);
        for b in 0..nn {
            let len = cp[3 * b + 1] - cp[3 * b];
            let count = len.div_ceil(3);
            col_blocks.push(col_blocks[b] + count as u32);
        }
        let nblocks = col_blocks[nn] as usize;
        // The block of upper pair (a ≤ b): its index in b's column.
        let block_of = |a: usize, b: usize| -> Result<usize> {
            let k = pattern.find(3 * a, 3 * b).ok_or_else(|| {
                PrecomputeError::Invalid(format!("block ({a}, {b}) is not in the pattern"))
            })?;
            Ok(col_blocks[b] as usize + (k - cp[3 * b]) / 3)
        };
        let is_fixed = |v: usize| fixed_nodes.is_some_and(|f| f[v]);
        // The upper node pairs (a ≤ b, neither fixed) of each element with their packed slots,
        // in the order of the element's (row corner, column corner) pairs — the order the scalar
        // gather visits them in, so both sum the same sources in the same order.
        let pairs = |el: &[u32; K]| {
            let mut out = Vec::with_capacity(K * K);
            for (ca, &a) in el.iter().enumerate() {
                for (cb, &b) in el.iter().enumerate() {
                    let (a, b) = (a as usize, b as usize);
                    if a <= b && !is_fixed(a) && !is_fixed(b) {
                        out.push((a, b, packed_slot(K, ca.min(cb), ca.max(cb))));
                    }
                }
            }
            out
        };
        let mut block_src = vec![0u32; nblocks + 1];
        let mut slots = Vec::with_capacity(elements.len() * (K * (K + 1)) / 2);
        for el in elements {
            for (a, b, _) in pairs(el) {
                let k = block_of(a, b)?;
                block_src[k + 1] += 1;
                slots.push(k as u32);
            }
        }
        for k in 0..nblocks {
            block_src[k + 1] += block_src[k];
        }
        let mut next: Vec<u32> = block_src[..nblocks].to_vec();
        let mut sources = vec![0u32; block_src[nblocks] as usize];
        let mut slot_iter = slots.into_iter();
        for (e, el) in elements.iter().enumerate() {
            for (_, _, slot) in pairs(el) {
                let k = slot_iter.next().expect("one slot per pair") as usize;
                sources[next[k] as usize] = (e * per_element + 9 * slot) as u32;
                next[k] += 1;
            }
        }
        // The layout `gather_blocks` writes by: every block's entries where `find` puts them.
        let rows = pattern.row_idx();
        for b in 0..nn {
            let first = col_blocks[b] as usize;
            for j in 0..3 {
                let col = 3 * b + j;
                let count = col_blocks[b + 1] as usize - first;
                if cp[col + 1] - cp[col] != 3 * (count - 1) + j + 1 || rows[cp[col + 1] - 1] != col
                {
                    return Err(PrecomputeError::Invalid(format!(
                        "column {col} is not laid out in 3×3 blocks"
                    )));
                }
            }
        }
        Ok(Self {
            nodes: K,
            col_blocks,
            block_src,
            sources,
            nnz: pattern.nnz(),
            n_entries: elements.len() * per_element,
        })
    }

    /// Number of stored values it fills.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Packed values per element it reads (`9·K(K+1)/2`, [`pack_upper_blocks`]).
    pub fn packed_len(&self) -> usize {
        9 * packed_blocks(self.nodes)
    }
}

/// Node-pair blocks of a K-node element in the packed upper-block layout: K(K+1)/2.
pub const fn packed_blocks(k: usize) -> usize {
    k * (k + 1) / 2
}

/// Slot of the corner pair (c1 ≤ c2) of a K-node element in the packed layout: the pairs in
/// row-major order of the upper triangle, (0,0), (0,1), …, (0,K−1), (1,1), …
const fn packed_slot(k: usize, c1: usize, c2: usize) -> usize {
    c1 * k - c1 * (c1.saturating_sub(1)) / 2 + (c2 - c1)
}

/// Packs one element's matrix (3K × 3K, row-major in `full`, DOFs node-major) into the upper
/// block layout [`SymSparse::gather_blocks`] reads: for each corner pair c1 ≤ c2 (in the order
/// (0,0), (0,1), …, (0,K−1), (1,1), …) the 3×3 block whose rows belong to the corner with the smaller global node
/// index (`element[c]`), row-major — the block the global upper triangle stores; `out` holds
/// `9·K(K+1)/2` values. For a symmetric matrix this is its upper triangle by blocks; for any
/// matrix it holds exactly the entries a gather of the full matrix would read.
#[inline]
pub fn pack_upper_blocks<const K: usize>(element: &[u32; K], full: &[f64], out: &mut [f64]) {
    let n = 3 * K;
    let full = &full[..n * n];
    let out = &mut out[..9 * packed_blocks(K)];
    let mut slot = 0;
    for c1 in 0..K {
        for c2 in c1..K {
            let (r, c) = if element[c1] <= element[c2] {
                (c1, c2)
            } else {
                (c2, c1)
            };
            for i in 0..3 {
                let from = (3 * r + i) * n + 3 * c;
                out[9 * slot + 3 * i..9 * slot + 3 * i + 3].copy_from_slice(&full[from..from + 3]);
            }
            slot += 1;
        }
    }
}

/// Global DOF list (flat, 12 per tet) of a tet mesh with 3 DOFs per vertex, vertex-major.
pub fn tet_dofs(tets: &[[u32; 4]]) -> Vec<usize> {
    let mut out = Vec::with_capacity(tets.len() * 12);
    for t in tets {
        for &v in t {
            for d in 0..3 {
                out.push(3 * v as usize + d);
            }
        }
    }
    out
}

/// Stored entries from which [`SymSparse::mul_vec`] runs in parallel (below, a task costs more
/// than the product).
pub const PARALLEL_MUL_NNZ: usize = 1 << 16;

/// Symmetric sparse matrix: shared pattern + upper-triangular values.
#[derive(Clone, Debug)]
pub struct SymSparse {
    pattern: Arc<SymmetricPattern>,
    values: Vec<f64>,
}

impl SymSparse {
    /// All-zero matrix on `pattern`.
    pub fn zeros(pattern: Arc<SymmetricPattern>) -> Self {
        let values = vec![0.0; pattern.nnz()];
        Self { pattern, values }
    }

    /// Matrix from a pattern and its upper-triangular values.
    pub fn from_values(pattern: Arc<SymmetricPattern>, values: Vec<f64>) -> Result<Self> {
        if values.len() != pattern.nnz() {
            return Err(PrecomputeError::Invalid(format!(
                "{} values for a pattern with {} entries",
                values.len(),
                pattern.nnz()
            )));
        }
        Ok(Self { pattern, values })
    }

    /// The pattern.
    pub fn pattern(&self) -> &Arc<SymmetricPattern> {
        &self.pattern
    }

    /// Dimension.
    pub fn n(&self) -> usize {
        self.pattern.n
    }

    /// Upper-triangular values (CSC order).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Mutable values (CSC order).
    pub fn values_mut(&mut self) -> &mut [f64] {
        &mut self.values
    }

    /// Sets every value to zero (pattern kept).
    pub fn clear(&mut self) {
        self.values.fill(0.0);
    }

    /// Adds element `e`'s dense local matrix (row-major, `n_local²`) through `map`.
    pub fn scatter_add(&mut self, map: &ScatterMap, e: usize, local: &[f64]) {
        debug_assert_eq!(local.len(), map.n_local * map.n_local);
        for (&k, &v) in map.element(e).iter().zip(local) {
            if k != SKIP {
                self.values[k as usize] += v;
            }
        }
    }

    /// Panics unless a gather map of `nnz` values over `n_entries` element entries fits this
    /// matrix and `local` (of length `local_len`).
    fn check_gather(&self, nnz: usize, n_entries: usize, local_len: usize) {
        assert_eq!(nnz, self.values.len(), "gather map of another pattern");
        assert_eq!(
            local_len, n_entries,
            "gather: {local_len} element entries for a map of {n_entries}"
        );
    }

    /// Sets every value to the sum of its element entries (`local`: the elements' dense local
    /// matrices, row-major, concatenated: all of them) through `map`, in parallel over the
    /// values; equal bit for bit to [`Self::clear`] followed by [`Self::scatter_add`] over all
    /// elements in order. Panics when `local` is not the map's element-entry count.
    pub fn gather(&mut self, map: &GatherMap, local: &[f64]) {
        use rayon::prelude::*;
        self.check_gather(map.nnz(), map.n_entries, local.len());
        // Chunks of values large enough to amortise the task, small enough to balance.
        const CHUNK: usize = 4096;
        self.values
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, vals)| {
                let base = c * CHUNK;
                for (i, v) in vals.iter_mut().enumerate() {
                    let (a, b) = (map.offsets[base + i], map.offsets[base + i + 1]);
                    let mut acc = 0.0;
                    for &src in &map.sources[a as usize..b as usize] {
                        acc += local[src as usize];
                    }
                    *v = acc;
                }
            });
    }

    /// [`Self::gather`] by 3×3 blocks ([`BlockGatherMap`]), in parallel over column nodes,
    /// from the element matrices packed by [`pack_upper_blocks`] (element after element): the
    /// same values as gathering the full matrices, bit for bit. Panics when `local` is not the
    /// map's packed entry count or the map is of another pattern.
    pub fn gather_blocks(&mut self, map: &BlockGatherMap, local: &[f64]) {
        use rayon::prelude::*;
        self.check_gather(map.nnz(), map.n_entries, local.len());
        let nn = map.col_blocks.len() - 1;
        assert_eq!(
            3 * nn,
            self.pattern.n,
            "block gather map of another pattern"
        );
        // The map's block layout was checked against this pattern's columns when it was built.
        let pattern = self.pattern.clone();
        let col_ptr = pattern.col_ptr();
        // Column nodes per task: enough to amortise it, few enough to balance.
        const NODES: usize = 128;
        let mut parts = Vec::with_capacity(nn.div_ceil(NODES));
        let mut rest: &mut [f64] = &mut self.values;
        for b0 in (0..nn).step_by(NODES) {
            let b1 = (b0 + NODES).min(nn);
            let (head, tail) = rest.split_at_mut(col_ptr[3 * b1] - col_ptr[3 * b0]);
            parts.push((b0, b1, head));
            rest = tail;
        }
        parts.into_par_iter().for_each(|(b0, b1, vals)| {
            let base = col_ptr[3 * b0];
            for b in b0..b1 {
                let (first, last) = (map.col_blocks[b] as usize, map.col_blocks[b + 1] as usize);
                for blk in first..last {
                    let mut acc = [[0.0f64; 3]; 3];
                    let (s0, s1) = (map.block_src[blk] as usize, map.block_src[blk + 1] as usize);
                    for &at in &map.sources[s0..s1] {
                        let l = &local[at as usize..at as usize + 9];
                        for (i, row) in acc.iter_mut().enumerate() {
                            row[0] += l[3 * i];
                            row[1] += l[3 * i + 1];
                            row[2] += l[3 * i + 2];
                        }
                    }
                    let m = blk - first;
                    let diagonal = blk + 1 == last;
                    for j in 0..3 {
                        let col = col_ptr[3 * b + j] - base + 3 * m;
                        let rows = if diagonal { j + 1 } else { 3 };
                        for (i, row) in acc.iter().enumerate().take(rows) {
                            vals[col + i] = row[j];
                        }
                    }
                }
            }
        });
    }

    /// Entry `(row, col)` (zero when not stored).
    pub fn get(&self, row: usize, col: usize) -> f64 {
        self.pattern.find(row, col).map_or(0.0, |k| self.values[k])
    }

    /// Adds `d[i]` to diagonal entry `i`.
    pub fn add_diagonal(&mut self, d: &[f64]) {
        for (i, &di) in d.iter().enumerate().take(self.n()) {
            if let Some(k) = self.pattern.find(i, i) {
                self.values[k] += di;
            }
        }
    }

    /// Replaces the rows and columns of flagged DOFs by those of the identity.
    pub fn set_identity_rows(&mut self, fixed: &[bool]) {
        let p = &self.pattern;
        for c in 0..p.n {
            for k in p.col_ptr[c]..p.col_ptr[c + 1] {
                let r = p.row_idx[k];
                if fixed.get(r).copied().unwrap_or(false) || fixed.get(c).copied().unwrap_or(false)
                {
                    self.values[k] = if r == c { 1.0 } else { 0.0 };
                }
            }
        }
    }

    /// The same matrix on a pattern of its non-zero entries and the whole diagonal (which a
    /// pattern always holds): for a matrix that fills few entries of a wide pattern — the
    /// per-vertex terms of a Hessian on the elastic pattern — every product and traversal
    /// then costs what is non-zero. Products are equal bit for bit for finite inputs.
    pub fn without_zeros(&self) -> SymSparse {
        let p = &self.pattern;
        let mut col_ptr = Vec::with_capacity(p.n + 1);
        let mut row_idx = Vec::new();
        let mut values = Vec::new();
        col_ptr.push(0);
        for c in 0..p.n {
            for k in p.col_ptr[c]..p.col_ptr[c + 1] {
                let r = p.row_idx[k];
                if r == c || self.values[k] != 0.0 {
                    row_idx.push(r);
                    values.push(self.values[k]);
                }
            }
            col_ptr.push(row_idx.len());
        }
        SymSparse {
            pattern: Arc::new(SymmetricPattern {
                n: p.n,
                col_ptr,
                row_idx,
            }),
            values,
        }
    }

    /// `y = A x`. Large matrices (≥ [`PARALLEL_MUL_NNZ`] stored entries) run in parallel:
    /// the columns split into one contiguous range per rayon thread (at most 4, balanced by
    /// entries), each scattered into its own vector as below, and the vectors summed. The
    /// result then differs from the sequential one by round-off (the sum's order depends on
    /// the thread count; fixed for a given count).
    pub fn mul_vec(&self, x: &[f64], y: &mut [f64]) {
        let p = &self.pattern;
        let parts = rayon::current_num_threads().clamp(1, 4);
        if p.nnz() >= PARALLEL_MUL_NNZ && parts > 1 {
            self.mul_vec_split(x, y, parts);
            return;
        }
        self.mul_cols(0..p.n, x, y);
    }

    /// [`Self::mul_vec`] over `parts` column ranges of (about) equal entry counts, in parallel.
    fn mul_vec_split(&self, x: &[f64], y: &mut [f64], parts: usize) {
        use rayon::prelude::*;
        let p = &self.pattern;
        let nnz = p.nnz();
        let mut bounds = vec![0usize];
        for i in 1..parts {
            let target = i * nnz / parts;
            bounds.push(p.col_ptr.partition_point(|&k| k < target).min(p.n));
        }
        bounds.push(p.n);
        thread_local! {
            // The calling thread's scratch vectors, kept between products (a PCG calls this
            // thousands of times on one size); a nested call on the same thread allocates.
            static SCRATCH: std::cell::RefCell<Vec<Vec<f64>>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let mut run = |extra: &mut Vec<Vec<f64>>| {
            extra.resize_with(parts - 1, Vec::new);
            for e in extra.iter_mut() {
                e.resize(p.n, 0.0);
            }
            // Range 0 scatters into y itself, the others into their own vectors.
            rayon::join(
                || self.mul_cols(bounds[0]..bounds[1], x, y),
                || {
                    extra.par_iter_mut().enumerate().for_each(|(i, yp)| {
                        self.mul_cols(bounds[i + 1]..bounds[i + 2], x, yp);
                    })
                },
            );
            // Entries per task of the final sum: enough to amortise it.
            const CHUNK: usize = 4096;
            y.par_chunks_mut(CHUNK).enumerate().for_each(|(c, ys)| {
                for (o, yi) in ys.iter_mut().enumerate() {
                    for e in extra.iter() {
                        *yi += e[c * CHUNK + o];
                    }
                }
            });
        };
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut kept) => run(&mut kept),
            Err(_) => run(&mut Vec::new()),
        });
    }

    /// `y = A[:, cols] x[cols]` with its mirror: the sequential scatter of the stored entries
    /// of columns `cols` into `y` (zeroed first).
    fn mul_cols(&self, cols: std::ops::Range<usize>, x: &[f64], y: &mut [f64]) {
        let p = &self.pattern;
        y.fill(0.0);
        for c in cols {
            let xc = x[c];
            let mut acc = 0.0;
            for k in p.col_ptr[c]..p.col_ptr[c + 1] {
                let r = p.row_idx[k];
                let v = self.values[k];
                if r == c {
                    acc += v * xc;
                } else {
                    y[r] += v * xc;
                    acc += v * x[r];
                }
            }
            y[c] += acc;
        }
    }

    /// `Y = A X` for a column-major `n × k` block.
    pub fn mul_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.n();
        for j in 0..k {
            self.mul_vec(&x[j * n..(j + 1) * n], &mut y[j * n..(j + 1) * n]);
        }
    }

    /// Dense copy, column-major `n × n` (both triangles).
    pub fn to_dense(&self) -> Vec<f64> {
        let n = self.n();
        let p = &self.pattern;
        let mut d = vec![0.0; n * n];
        for c in 0..n {
            for k in p.col_ptr[c]..p.col_ptr[c + 1] {
                let r = p.row_idx[k];
                d[c * n + r] = self.values[k];
                d[r * n + c] = self.values[k];
            }
        }
        d
    }

    /// faer view (upper triangle).
    pub fn as_faer(&self) -> SparseColMatRef<'_, usize, f64> {
        SparseColMatRef::new(self.pattern.symbolic(), &self.values)
    }
}
