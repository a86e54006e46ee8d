//! The fixed sparsity pattern of the incremental potential's Hessian and the element gather map
//! (both from `jello-precompute`), built once per model so each Newton iteration refills values
//! by a parallel gather with no searching.

use crate::error::{JelloError, Result};
use crate::problem::Model;
use jello_precompute::sparse::{pack_upper_blocks, BlockGatherMap, SymSparse, SymmetricPattern};
use rayon::prelude::*;
use std::sync::Arc;

/// One tet's Hessian (N/m) in the packed upper-block layout the block gather reads
/// ([`jello_precompute::sparse::pack_upper_blocks`]): its 10 node-pair 3×3 blocks, each
/// oriented as the global upper triangle stores it — 90 values instead of 144.
pub type PackedTetHessian = [f64; 90];

/// Packs full row-major 12×12 element Hessians (`full`, one per tet of `tets`) into `out`
/// ([`PackedTetHessian`]), in parallel.
pub fn pack_element_hessians(
    tets: &[[u32; 4]],
    full: &[[f64; 144]],
    out: &mut Vec<PackedTetHessian>,
) {
    out.resize(full.len(), [0.0; 90]);
    out.par_iter_mut()
        .zip(full.par_iter().zip(tets.par_iter()))
        .for_each(|(o, (h, t))| pack_upper_blocks(t, h, o));
}

/// Pattern, gather map (pinned vertices skipped) and diagonal positions of a model's Hessian.
#[derive(Clone, Debug)]
pub struct HessianLayout {
    /// Upper-triangular CSC pattern of the 3n×3n Hessian.
    pub pattern: Arc<SymmetricPattern>,
    /// Per stored 3×3 block, the packed element blocks that add into it
    /// ([`SymSparse::gather_blocks`] over [`PackedTetHessian`]s: the same bits as a sequential
    /// scatter of the full element matrices; faster than gathering value by value on
    /// armadillo_114k, `benches/newton.rs`): what [`crate::problem::StepProblem::assemble`]
    /// uses.
    pub block_gather: Arc<BlockGatherMap>,
    /// Index of each diagonal entry in the value array.
    pub diag: Vec<usize>,
}

impl HessianLayout {
    /// Builds the layout for `model` (pinned vertices' rows and columns get no element terms).
    pub fn new(model: &Model) -> Result<Self> {
        let err = |e: jello_precompute::PrecomputeError| JelloError::Solver(e.to_string());
        let nv = model.num_vertices();
        let pattern =
            Arc::new(SymmetricPattern::from_elements(nv, 3, &model.mesh.tets).map_err(err)?);
        let block_gather = Arc::new(
            BlockGatherMap::new(&pattern, &model.mesh.tets, Some(&model.pinned)).map_err(err)?,
        );
        let diag = (0..3 * nv)
            .map(|d| {
                pattern
                    .find(d, d)
                    .ok_or_else(|| JelloError::Solver("diagonal missing".into()))
            })
            .collect::<Result<_>>()?;
        Ok(HessianLayout {
            pattern,
            block_gather,
            diag,
        })
    }

    /// A zero matrix on this pattern.
    pub fn zeros(&self) -> SymSparse {
        SymSparse::zeros(self.pattern.clone())
    }
}
