//! How a run is recorded and what a backward pass does with unconverged steps.

/// Which states a [`super::Tape`] keeps for the backward pass; the others are recomputed from
/// the nearest kept one by re-solving the steps (bit for bit: the f64 Newton solve is
/// deterministic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpointing {
    /// Every state: no recomputation, memory O(steps).
    All,
    /// Every k-th state (k ≥ 1): each segment is recomputed once, memory O(steps/k + k).
    Every(usize),
    /// Griewank's binomial (revolve) schedule with this many snapshots besides the initial
    /// state: memory O(snapshots), the fewest recomputed steps for that memory.
    Binomial(usize),
}

/// What a backward pass does when a step it differentiates did not meet the stop rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unconverged {
    /// Refuse with one error naming the first such step (the default).
    #[default]
    Refuse,
    /// Differentiate anyway and list the steps in [`super::Gradients::unconverged_steps`].
    Flag,
}

/// How a [`super::Tape`] solves and keeps its steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordOptions {
    /// Newton's characteristic-norm tolerance (default 1e-10): the adjoint is exact at an
    /// exact stationary point, and a step stopped at residual ε perturbs the gradient by
    /// O(ε) relative; central differences of the forward need the states resolved far below
    /// their step size.
    pub tolerance: f64,
    /// Newton's iteration cap per step (default 200).
    pub max_iterations: usize,
    /// Which states are kept (default [`Checkpointing::All`]).
    pub checkpointing: Checkpointing,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            tolerance: 1e-10,
            max_iterations: 200,
            checkpointing: Checkpointing::All,
        }
    }
}
