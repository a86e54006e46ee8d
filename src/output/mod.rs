//! Outputs: atomic file writes, frames, statistics, plots, and the run directory (manifest,
//! checkpoint).

mod atomic;
mod checkpoint;
mod fields;
mod frames;
mod manifest;
#[cfg(feature = "pictures")]
mod pictures;
#[cfg(not(feature = "pictures"))]
#[path = "pictures_off.rs"]
mod pictures;
#[cfg(feature = "plots")]
pub mod plot;
pub mod run_dir;
mod stats;

pub use atomic::{atomic_write, atomic_write_with};
pub use checkpoint::{Checkpoint, CheckpointHeader, RunIdentity};
pub use fields::{cell_fields, material_ids, von_mises, CellFields};
pub use frames::{
    frame_name, object_frame_name, object_pvd_name, FrameData, FrameOptions, FrameWriter,
    DISPLACEMENT, JACOBIAN, MATERIAL_ID, OBJECT_ID, RESIDUAL, VELOCITY, VON_MISES,
};
pub use manifest::{FrameEntry, Manifest, RunStatus, FORMAT as MANIFEST_FORMAT, MANIFEST};
pub use pictures::FramePainter;
pub use stats::{RunStats, StepStats};
