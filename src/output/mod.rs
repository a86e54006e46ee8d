//! Outputs: atomic file writes, frames, statistics, plots.

mod atomic;

pub use atomic::{atomic_write, atomic_write_with};
