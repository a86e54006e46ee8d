//! Error type of the precompute crate.

use thiserror::Error;

/// Everything that can go wrong in the offline numerics.
#[derive(Debug, Error)]
pub enum PrecomputeError {
    /// The matrix handed to a Cholesky factorisation is not (numerically) positive definite.
    #[error("matrix is not positive definite (non-positive pivot at permuted column {column})")]
    NotPositiveDefinite {
        /// Column of the permuted matrix where the factorisation broke down.
        column: usize,
    },
    /// METIS failed to compute an ordering.
    #[error("METIS ordering failed: {0}")]
    Ordering(String),
    /// Caller passed inconsistent or invalid data (sizes, NaNs, out-of-range indices...).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The operation needs a part this build was compiled without (a cargo feature, such as
    /// `metis`, that a wasm32 build lacks).
    #[error("not in this build: {0}")]
    Unavailable(String),
    /// A numerical routine failed (out of memory inside faer, eigen solver breakdown, ...).
    #[error("numerical failure: {0}")]
    Numeric(String),
    /// Reading or writing a precompute artifact failed.
    #[error(transparent)]
    Artifact(#[from] crate::artifact::ArtifactError),
}

/// Result alias of the precompute crate.
pub type Result<T> = std::result::Result<T, PrecomputeError>;
