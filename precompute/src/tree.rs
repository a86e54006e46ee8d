//! A cluster tree over the free vertices: recursive median splits along the longest axis of
//! each node's bounding box (a k-d tree), so every node is a spatially compact vertex cluster
//! stored as a contiguous range of one permutation.
//!
//! JGS2 represents the far field of a vertex's perturbation subspace by per-node means (see
//! [`crate::jgs2`]); the run time sums the gradient over each node's range.

/// The cluster tree. Node 0 is the root; children follow their parent in depth-first order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterTree {
    /// The vertices in tree order: node `c` holds `perm[start[c]..end[c]]`.
    pub perm: Vec<u32>,
    /// First position of each node in `perm`.
    pub start: Vec<u32>,
    /// One past the last position of each node.
    pub end: Vec<u32>,
    /// Children `(left, right)` of internal nodes, `None` for leaves.
    pub children: Vec<Option<(u32, u32)>>,
    /// Parent of each node (`u32::MAX` for the root).
    pub parent: Vec<u32>,
}

impl ClusterTree {
    /// Builds the tree over `vertices` (ids into `positions`), splitting nodes larger than
    /// `leaf_size` at the median of their longest bounding-box axis.
    pub fn build(positions: &[[f64; 3]], vertices: &[u32], leaf_size: usize) -> Self {
        let mut t = ClusterTree {
            perm: vertices.to_vec(),
            ..Default::default()
        };
        if !vertices.is_empty() {
            t.split(positions, 0, vertices.len(), u32::MAX, leaf_size.max(1));
        }
        t
    }

    fn split(&mut self, pos: &[[f64; 3]], lo: usize, hi: usize, parent: u32, leaf: usize) -> u32 {
        let id = self.start.len() as u32;
        self.start.push(lo as u32);
        self.end.push(hi as u32);
        self.children.push(None);
        self.parent.push(parent);
        if hi - lo <= leaf {
            return id;
        }
        let mut min = [f64::INFINITY; 3];
        let mut max = [f64::NEG_INFINITY; 3];
        for &v in &self.perm[lo..hi] {
            for d in 0..3 {
                min[d] = min[d].min(pos[v as usize][d]);
                max[d] = max[d].max(pos[v as usize][d]);
            }
        }
        let axis = (0..3)
            .max_by(|&a, &b| (max[a] - min[a]).total_cmp(&(max[b] - min[b])))
            .unwrap_or(0);
        let mid = lo + (hi - lo) / 2;
        self.perm[lo..hi].select_nth_unstable_by(mid - lo, |&a, &b| {
            pos[a as usize][axis]
                .total_cmp(&pos[b as usize][axis])
                .then(a.cmp(&b))
        });
        let l = self.split(pos, lo, mid, id, leaf);
        let r = self.split(pos, mid, hi, id, leaf);
        self.children[id as usize] = Some((l, r));
        id
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True for a tree over no vertex.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// The vertices of node `c`.
    pub fn members(&self, c: usize) -> &[u32] {
        &self.perm[self.start[c] as usize..self.end[c] as usize]
    }

    /// The leaf holding each vertex (`u32::MAX` for vertices not in the tree), for `n` vertices.
    pub fn leaf_of(&self, n: usize) -> Vec<u32> {
        let mut out = vec![u32::MAX; n];
        for c in 0..self.len() {
            if self.children[c].is_none() {
                for &v in self.members(c) {
                    out[v as usize] = c as u32;
                }
            }
        }
        out
    }
}
