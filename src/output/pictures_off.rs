//! PNG frames without the `pictures` feature: there is no painter, so a run that asks for
//! `png` frames stops at set-up with one line naming the feature, instead of a build that
//! silently writes no pictures. The type is uninhabited: its methods can never be called.

use crate::error::{JelloError, Result};
use crate::problem::Model;
use crate::render::{LogScale, RgbaImage};
use std::path::Path;

/// Stands in for the painter of PNG frames when jello is built without `pictures`.
pub enum FramePainter {}

impl FramePainter {
    /// Always an error: PNG frames need the `pictures` feature.
    pub fn new(_model: &Model, _size: (u32, u32), _use_gpu: bool) -> Result<Self> {
        Err(JelloError::Invalid(
            "PNG frames (`output.png`, `--png`) need jello built with its `pictures` feature"
                .into(),
        ))
    }

    /// Unreachable: no painter exists without `pictures`.
    pub fn paint(&self, _x: &[f64], _t: f64, _path: &Path) -> Result<RgbaImage> {
        match *self {}
    }

    /// Unreachable: no painter exists without `pictures`.
    pub fn paint_field(
        &self,
        _x: &[f64],
        _values: &[f64],
        _unit: &str,
        _title: &str,
        _path: &Path,
    ) -> Result<(RgbaImage, Option<LogScale>)> {
        match *self {}
    }
}
