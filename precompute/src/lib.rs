//! Offline f64 numerics for jello.
//!
//! Pure numerics over plain arrays and sparse matrices (no GPU, no scene types):
//! - [`sparse`]: a symmetric sparse matrix with a fixed pattern and a precomputed
//!   element scatter map, so refilling values is a scatter-add with no search;
//! - [`cholesky`]: sparse Cholesky with a once-per-pattern symbolic analysis
//!   (METIS nested dissection or AMD) and cheap numeric refactors;
//! - [`eigen`]: lowest eigenpairs of `A φ = μ M φ` by shift-invert block Krylov;
//! - [`nnls`]: Lawson–Hanson non-negative least squares;
//! - [`tree`]: a k-d cluster tree over vertices;
//! - [`hmatrix`]: a uniform H-matrix of `H̄⁻¹`'s far blocks (JGS2's optional compressed far
//!   field);
//! - [`jgs2`]: the JGS2 offline precompute (perturbation subspaces: exact near field,
//!   tree-sampled far field with optional cubature, rest reduced Hessians);
//! - [`partition`]: METIS element partitions into subdomains (DOT's domain decomposition)
//!   and their cache artifact;
//! - [`sms`]: sparse material-aware skinning bases (stiffness-weighted heat-geodesic K-means
//!   partitions, local biharmonic weights), their modal moment-fitting cubature, the N_cg
//!   rule and their cache artifact, for the multilevel solver;
//! - [`clock`]: the `Instant` every timing uses (the browser's clock on wasm32);
//! - [`artifact`]: a versioned, checksummed file format for the JGS2 basis (and the framing
//!   every precompute artifact shares).

// Index loops mirror the maths (rows/columns of small dense blocks) and read better here.
#![allow(clippy::needless_range_loop)]

pub mod artifact;
pub mod cholesky;
pub mod clock;
pub mod eigen;
pub mod error;
pub mod hmatrix;
pub mod jgs2;
pub mod nnls;
pub mod partition;
mod rng;
pub mod sms;
pub mod sparse;
pub mod tree;

pub use error::{PrecomputeError, Result};

/// Serialises every METIS call in the process: METIS draws from a process-global random
/// state (GKlib's), so concurrent calls (tests, rayon) would make orderings and partitions
/// depend on timing — and a cached partition must be the one a rebuild gives.
#[cfg(feature = "metis")]
pub(crate) fn metis_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
