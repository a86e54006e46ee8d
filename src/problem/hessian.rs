//! The fixed sparsity pattern of the incremental potential's Hessian and the element scatter map
//! (both from `jello-precompute`), built once per model so each Newton iteration refills values
//! by a scatter-add with no searching.

use crate::error::{JelloError, Result};
use crate::problem::Model;
use jello_precompute::sparse::{
    tet_dofs, BlockGatherMap, GatherMap, ScatterMap, SymSparse, SymmetricPattern,
};
use std::sync::Arc;

/// Pattern, scatter map (pinned DOFs skipped) and diagonal positions of a model's Hessian.
#[derive(Clone, Debug)]
pub struct HessianLayout {
    /// Upper-triangular CSC pattern of the 3n×3n Hessian.
    pub pattern: Arc<SymmetricPattern>,
    /// Per element and local 12×12 entry: index into the value array (or skipped).
    pub scatter: ScatterMap,
    /// The scatter map's transpose: per stored value, the element entries that add into it
    /// (assembly by a parallel gather, [`SymSparse::gather`]).
    pub gather: Arc<GatherMap>,
    /// The same by 3×3 blocks ([`SymSparse::gather_blocks`]: equal bit for bit, ~3× faster on
    /// armadillo_114k): what [`crate::problem::StepProblem::assemble`] uses.
    pub block_gather: Arc<BlockGatherMap>,
    /// Index of each diagonal entry in the value array.
    pub diag: Vec<usize>,
}

impl HessianLayout {
    /// Builds the layout for `model` (pinned DOFs are excluded from element scatter).
    pub fn new(model: &Model) -> Result<Self> {
        let err = |e: jello_precompute::PrecomputeError| JelloError::Solver(e.to_string());
        let nv = model.num_vertices();
        let pattern =
            Arc::new(SymmetricPattern::from_elements(nv, 3, &model.mesh.tets).map_err(err)?);
        let fixed: Vec<bool> = (0..3 * nv).map(|k| model.pinned[k / 3]).collect();
        let scatter = ScatterMap::new(&pattern, 12, &tet_dofs(&model.mesh.tets), Some(&fixed))
            .map_err(err)?;
        let gather = Arc::new(GatherMap::new(&scatter, pattern.nnz()).map_err(err)?);
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
            scatter,
            gather,
            block_gather,
            diag,
        })
    }

    /// A zero matrix on this pattern.
    pub fn zeros(&self) -> SymSparse {
        SymSparse::zeros(self.pattern.clone())
    }
}
