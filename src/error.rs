//! The crate's error type. Every user-facing failure is one of these, rendered as one line that
//! names the file and the line or key at fault.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = JelloError> = std::result::Result<T, E>;

/// Everything that can go wrong in jello. `Display` gives one line suitable for a CLI.
#[derive(Debug, thiserror::Error)]
pub enum JelloError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content is malformed (line is 1-based; 0 when not applicable,
    /// e.g. binary formats where `what` names the byte offset or record instead).
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    /// A mesh is structurally invalid (bad indices, NaN coordinates, degenerate elements...).
    #[error("{path}: {msg}")]
    Mesh { path: PathBuf, msg: String },
    /// A scene file has an invalid value; `key` is the dotted TOML path (e.g. `objects[0].material.E`).
    #[error("{path}: key `{key}`: {msg}")]
    Scene {
        path: PathBuf,
        key: String,
        msg: String,
    },
    /// Impossible material parameters (E ≤ 0, ν outside (-1, 0.5), ...).
    #[error("invalid material: {0}")]
    Material(String),
    /// A GPU-side failure: no adapter, validation error, device lost, readback timeout.
    #[error("gpu: {0}")]
    Gpu(String),
    /// A numerical failure in a solver (factorisation failed, NaN in the state, ...).
    #[error("solver: {0}")]
    Solver(String),
    /// Anything else that is the caller's fault (bad argument to a library function).
    #[error("{0}")]
    Invalid(String),
}

impl JelloError {
    /// Helper for I/O errors that keeps the path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JelloError::Io {
            path: path.into(),
            source,
        }
    }
    /// Helper for parse errors.
    pub fn parse(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        JelloError::Parse {
            path: path.into(),
            line,
            msg: msg.into(),
        }
    }
    /// Helper for mesh validation errors.
    pub fn mesh(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        JelloError::Mesh {
            path: path.into(),
            msg: msg.into(),
        }
    }
    /// Helper for scene errors.
    pub fn scene(path: impl Into<PathBuf>, key: impl Into<String>, msg: impl Into<String>) -> Self {
        JelloError::Scene {
            path: path.into(),
            key: key.into(),
            msg: msg.into(),
        }
    }
}
