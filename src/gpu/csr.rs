//! The vertex→element CSR the gather kernels walk.

use crate::{JelloError, Result};

/// For each vertex v, the (tet, corner) pairs it belongs to:
/// `tets[offsets[v]..offsets[v+1]]` and `local[..]` (corner 0–3), tets in increasing order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VertexCsr {
    /// `num_vertices + 1` row starts.
    pub offsets: Vec<u32>,
    /// Element ids.
    pub tets: Vec<u32>,
    /// Corner of the vertex in that element (0..4), stored as u32 for the GPU.
    pub local: Vec<u32>,
}

impl VertexCsr {
    /// Builds the CSR; errors on an index ≥ `num_vertices` or more than u32::MAX entries.
    pub fn new(tets: &[[u32; 4]], num_vertices: usize) -> Result<Self> {
        let entries = tets
            .len()
            .checked_mul(4)
            .filter(|&n| n <= u32::MAX as usize);
        let Some(entries) = entries else {
            return Err(JelloError::Invalid("too many tets for a u32 CSR".into()));
        };
        let mut count = vec![0u32; num_vertices + 1];
        for (e, t) in tets.iter().enumerate() {
            for &v in t {
                if v as usize >= num_vertices {
                    return Err(JelloError::Invalid(format!(
                        "tet {e} references vertex {v}, mesh has {num_vertices}"
                    )));
                }
                count[v as usize + 1] += 1;
            }
        }
        for i in 0..num_vertices {
            count[i + 1] += count[i];
        }
        let offsets = count.clone();
        let mut next = count;
        let mut ct = vec![0u32; entries];
        let mut cl = vec![0u32; entries];
        for (e, t) in tets.iter().enumerate() {
            for (l, &v) in t.iter().enumerate() {
                let k = next[v as usize] as usize;
                ct[k] = e as u32;
                cl[k] = l as u32;
                next[v as usize] += 1;
            }
        }
        Ok(VertexCsr {
            offsets,
            tets: ct,
            local: cl,
        })
    }
    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}
