//! The TOML scene format and how a [`Scene`] becomes a [`crate::problem::Model`].
//!
//! A scene lists objects (a mesh file or a generator, a transform, a material with optional
//! per-region overrides, an initial velocity), pins with kinematic scripts, obstacles, gravity,
//! the time step, the number of steps, the solver and its parameters, and output options.
//! Every invalid value is reported as `FILE: key `dotted.key`: reason`. See
//! `assets/scenes/README.md` for the format with units and defaults.

mod build;
mod spec;

pub use build::{BuiltScene, RunConfig, SOLVERS};
pub use spec::*;

use crate::error::{JelloError, Result};
use std::path::{Path, PathBuf};

/// A parsed scene file.
#[derive(Clone, Debug)]
pub struct Scene {
    /// The file it came from (used in error messages and to resolve relative mesh paths).
    pub path: PathBuf,
    /// The parsed content.
    pub spec: SceneSpec,
}

impl Scene {
    /// Reads and parses a scene file. Unknown keys, wrong types and missing required keys are
    /// errors naming the file, line and key.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| JelloError::io(path, e))?;
        Self::parse(path, &text)
    }

    /// Parses scene text; `path` is used for messages and relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let spec: SceneSpec = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(0);
            JelloError::parse(path, line, e.message().replace('\n', " "))
        })?;
        Ok(Scene {
            path: path.to_path_buf(),
            spec,
        })
    }
}
