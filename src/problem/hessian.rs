//! The fixed sparsity pattern of the incremental potential's Hessian and the element gather map
//! (both from `jello-precompute`), built once per model so each Newton iteration refills values
//! by a parallel gather with no searching.

use crate::error::{JelloError, Result};
use crate::problem::Model;
use jello_precompute::sparse::{BlockGatherMap, SymSparse, SymmetricPattern};
use std::sync::Arc;

/// Pattern, gather map (pinned vertices skipped) and diagonal positions of a model's Hessian.
#[derive(Clone, Debug)]
pub struct HessianLayout {
    /// Upper-triangular CSC pattern of the 3n×3n Hessian.
    pub pattern: Arc<SymmetricPattern>,
    /// Per stored 3×3 block, the element blocks that add into it ([`SymSparse::gather_blocks`]:
    /// the same bits as a sequential scatter, 1.3–1.6× faster than gathering value by value on
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
