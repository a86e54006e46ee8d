//! Graph partitioning (METIS k-way) into compact parts of about equal size.
//!
//! JGS2 uses the parts as vertex *clusters*: the far field of a vertex's perturbation subspace
//! is sampled per cluster (see [`crate::jgs2`]).

use crate::sparse::Adjacency;
use crate::{PrecomputeError, Result};

/// Splits the nodes of `graph` into about `n / part_size` connected-ish parts with METIS k-way
/// (minimum edge cut), and returns the part of every node (`0..n_parts`, every part non-empty)
/// and the number of parts. Graphs with fewer than `2 · part_size` nodes form one part.
pub fn partition(graph: &Adjacency, part_size: usize) -> Result<(Vec<u32>, usize)> {
    let n = graph.len();
    if part_size == 0 {
        return Err(PrecomputeError::Invalid("partition: part size must be > 0".into()));
    }
    let n_parts = n / part_size;
    if n_parts < 2 || graph.adj.is_empty() {
        return Ok((vec![0; n], usize::from(n > 0)));
    }
    if graph.adj.len() >= i32::MAX as usize {
        return Err(PrecomputeError::Ordering(
            "graph too large for 32-bit METIS".into(),
        ));
    }
    let mut xadj: Vec<i32> = graph.xadj.iter().map(|&x| x as i32).collect();
    let mut adjncy: Vec<i32> = graph.adj.iter().map(|&x| x as i32).collect();
    let mut part = vec![0i32; n];
    metis::Graph::new(1, n_parts as i32, &mut xadj, &mut adjncy)
        .map_err(|e| PrecomputeError::Ordering(format!("METIS graph: {e:?}")))?
        .part_kway(&mut part)
        .map_err(|e| PrecomputeError::Ordering(format!("METIS k-way partition: {e:?}")))?;
    // METIS may leave a part empty on awkward graphs: renumber the used parts densely.
    let mut map = vec![u32::MAX; n_parts];
    let mut next = 0u32;
    let out: Vec<u32> = part
        .iter()
        .map(|&p| {
            let p = p as usize;
            if map[p] == u32::MAX {
                map[p] = next;
                next += 1;
            }
            map[p]
        })
        .collect();
    Ok((out, next as usize))
}
