//! `manifest.json`: what a run directory holds and how far its run got. Written atomically when
//! the run starts, before and after every frame, and when it ends, so at any moment it lists
//! every file the run wrote (or was about to write) and the last step whose frame and
//! checkpoint are on disk.

use crate::error::{JelloError, Result};
use crate::output::atomic_write;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// File name of the manifest inside a run directory.
pub const MANIFEST: &str = "manifest.json";
/// Value of [`Manifest::format`].
pub const FORMAT: &str = "jello-run 1";

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Stepping (or killed without a chance to say otherwise: see [`Manifest::pid`]).
    Running,
    /// Every requested step done.
    Complete,
    /// Stopped by an error ([`Manifest::message`]); the last good frame and stats stay.
    Failed,
    /// Stopped by SIGINT/SIGTERM (or a cancellation flag) after finishing a step's writes.
    Interrupted,
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        })
    }
}

/// One frame on disk.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameEntry {
    /// Step (0 = the initial state).
    pub step: usize,
    /// Time, s.
    pub time: f64,
}

/// The whole `manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// jello version that last wrote it.
    pub jello_version: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why a run failed (one line), or how it was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Process id of the jello writing the run (a `running` run whose process is gone was
    /// killed without warning: SIGKILL, power loss).
    pub pid: u32,
    /// Scene file, as given.
    pub scene: String,
    /// FNV-1a-64 (hex) of the scene file's bytes.
    pub scene_hash: String,
    /// Solver name (as in stats.json).
    pub solver: String,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// GPU adapter (null on the CPU).
    pub adapter: Option<String>,
    /// Why this backend (e.g. "only a software adapter (llvmpipe) was found ...").
    pub backend_reason: String,
    /// Steps asked for.
    pub requested_steps: usize,
    /// Steps solved (stats.json lists them).
    pub completed_steps: usize,
    /// The last step whose frame, stats and checkpoint are all on disk (`--resume` starts
    /// after it).
    pub last_complete_step: usize,
    /// Steps at which the run was resumed, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed_at: Vec<usize>,
    /// Frames on disk, in step order.
    pub frames: Vec<FrameEntry>,
    /// Every file the run wrote or was about to write, relative to the run directory
    /// (`--overwrite` removes exactly these).
    pub files: Vec<String>,
}

impl Manifest {
    /// Adds `file` (relative to the run directory) to [`Manifest::files`] unless listed.
    pub fn add_file(&mut self, file: &str) {
        if !self.files.iter().any(|f| f == file) {
            self.files.push(file.to_owned());
        }
    }

    /// Writes `dir/manifest.json` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| JelloError::Invalid(format!("manifest: {e}")))?;
        atomic_write(&dir.join(MANIFEST), &json)
    }

    /// Reads `dir/manifest.json`: `Ok(None)` when there is none, an error naming the file when
    /// it is not a manifest this jello understands.
    pub fn read(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(JelloError::io(&path, e)),
        };
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
            JelloError::parse(&path, e.line(), format!("not a jello run manifest: {e}"))
        })?;
        if m.format != FORMAT {
            return Err(JelloError::parse(
                &path,
                0,
                format!("manifest format `{}`, expected `{FORMAT}`", m.format),
            ));
        }
        Ok(Some(m))
    }

    /// True when this manifest says `running` and its process still exists on this machine
    /// (another jello is writing the directory). Always false off Unix.
    pub fn writer_alive(&self) -> bool {
        self.status == RunStatus::Running && self.pid != std::process::id() && pid_alive(self.pid)
    }
}

#[cfg(unix)]
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // Signal 0 checks existence and permission without sending anything; EPERM means the
    // process exists but belongs to someone else.
    // SAFETY: kill(2) with signal 0 has no effect on the target.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn pid_alive(_pid: u32) -> bool {
    false
}
