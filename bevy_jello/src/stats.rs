//! Per-body statistics, a component Bevy systems and UIs can read.

use bevy::prelude::*;

/// What jello did for one soft body; the plugin inserts it when the body is built and updates
/// it after every fixed step.
#[derive(Component, Clone, Debug, Default)]
pub struct SoftBodyStats {
    /// Steps taken.
    pub steps: usize,
    /// Simulated time, s.
    pub time: f64,
    /// The solver (jello's name).
    pub solver: String,
    /// Where its kernels run: the adapter (name, API, kind), or "cpu".
    pub device: String,
    /// Vertices and tetrahedra of the body's mesh.
    pub vertices: usize,
    /// Tetrahedra of the body's mesh.
    pub tets: usize,
    /// Solver iterations of the last step.
    pub iterations: usize,
    /// Solver iterations over all steps.
    pub total_iterations: usize,
    /// The last step's final residual (the solver's stop measure, dimensionless).
    pub residual: f64,
    /// Whether the last step met its stop rule.
    pub converged: bool,
    /// The smallest volume ratio J = det F over the elements after the last step (1 at rest;
    /// ≤ 0 means inverted).
    pub min_j: f64,
    /// Inverted elements (J ≤ 0) after the last step.
    pub inverted: usize,
    /// Wall time of the last step, ms.
    pub step_ms: f64,
    /// Wall time of the last update of the drawn surface, ms.
    pub mesh_update_ms: f64,
    /// Why the body stopped (a failed build or step, said once in the log too); `None` while
    /// it runs.
    pub error: Option<String>,
}
