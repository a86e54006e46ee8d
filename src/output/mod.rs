//! Outputs: atomic file writes, frames, statistics, plots.

mod atomic;
mod frames;
mod pictures;
pub mod plot;
mod stats;

pub use atomic::{atomic_write, atomic_write_with};
pub use frames::{FrameOptions, FrameWriter};
pub use pictures::FramePainter;
pub use stats::{RunStats, StepStats};
