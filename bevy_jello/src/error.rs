//! The crate's error type.

/// What can go wrong building or stepping a soft body.
#[derive(Debug, thiserror::Error)]
pub enum BevyJelloError {
    /// jello refused the body's scene or failed a step.
    #[error(transparent)]
    Jello(#[from] jello::JelloError),
    /// A body's description is not a valid jello scene.
    #[error("soft body {0}")]
    Body(String),
}
