//! `checkpoint.bin`: the exact state of a run at its last frame, for `jello run --resume`.
//!
//! The step map of every solver is a function of (positions, velocities, time) alone — plus,
//! under BDF2, the previous step's positions and velocities ([`crate::problem::History`]):
//! Newton refactors its Hessian every step, JGS2/VBD (CPU and device) rebuild their element
//! caches and reset their "previous step" directions at each step's start, pins and forces
//! depend on the time only. So these, bit-exact, plus the step index continue the same
//! trajectory.
//!
//! Layout (little endian):
//!
//! | offset   | bytes | content                                              |
//! |----------|-------|------------------------------------------------------|
//! | 0        | 8     | magic `JELLOCKP`                                     |
//! | 8        | 4     | format version ([`VERSION`])                         |
//! | 12       | 4     | header length L                                      |
//! | 16       | L     | header, JSON ([`CheckpointHeader`])                  |
//! | 16+L     | 8     | time t, s (f64)                                      |
//! | 24+L     | 8n    | positions x, m (f64; n = `header.dofs`)              |
//! | 24+L+8n  | 8n    | velocities v, m/s (f64)                              |
//! | 24+L+16n | 8n    | `header.history` only: previous positions xⁿ⁻¹, m    |
//! | 24+L+24n | 8n    | `header.history` only: previous velocities vⁿ⁻¹, m/s |
//! | end − 8  | 8     | FNV-1a-64 of every byte before it                    |
//!
//! Format 1 (before BDF2) had no `history` and is still read.

use crate::error::{JelloError, Result};
use crate::problem::History;
use jello_precompute::artifact::fnv1a64;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Magic bytes at the start of a checkpoint.
pub const MAGIC: &[u8; 8] = b"JELLOCKP";
/// Format version this build writes (2: the optional BDF2 history). It reads 1 and 2.
pub const VERSION: u32 = 2;
/// The oldest format this build reads (1: no history).
const OLDEST_VERSION: u32 = 1;
/// Largest header accepted when reading (a corrupt length must not allocate gigabytes).
const MAX_HEADER: usize = 1 << 20;

/// What a trajectory depends on besides its state: a resume whose identity differs is refused.
/// Floating-point settings are kept as Rust's shortest round-trip text so they compare exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// FNV-1a-64 (hex) of the scene with `[simulation] steps` and `[output]` removed (so a run
    /// can be extended and its outputs changed) together with the rest positions and tets of
    /// the meshes it loaded (so an edited mesh file counts as a changed scene).
    pub scene_key: String,
    /// Solver (`newton`, `jgs2`, `vbd`).
    pub solver: String,
    /// JGS2/VBD sweep (`jacobi`, `gs`), when set.
    pub variant: Option<String>,
    /// Stop rule (`cn`, `dx`).
    pub stop: String,
    /// The stop rule's tolerance.
    pub tolerance: String,
    /// Iteration cap per step, when set.
    pub max_iterations: Option<usize>,
    /// Time step, s.
    pub h: String,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// The GPU adapter (`None` on the CPU). A different adapter is allowed (with a note): the
    /// f32 kernels then give a trajectory within the GPU tolerance, not bit for bit.
    pub adapter: Option<String>,
}

impl RunIdentity {
    /// The first setting (other than the backend and adapter) in which `self` (the checkpoint)
    /// differs from `now` (this run), as `what: checkpoint value vs this run's`.
    pub fn mismatch(&self, now: &RunIdentity) -> Option<String> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "default".into());
        let its = |v: &Option<usize>| v.map(|n| n.to_string()).unwrap_or("default".into());
        let pairs = [
            ("solver", self.solver.clone(), now.solver.clone()),
            ("variant", opt(&self.variant), opt(&now.variant)),
            ("stop rule", self.stop.clone(), now.stop.clone()),
            ("tolerance", self.tolerance.clone(), now.tolerance.clone()),
            (
                "max_iterations",
                its(&self.max_iterations),
                its(&now.max_iterations),
            ),
            ("h", self.h.clone(), now.h.clone()),
        ];
        if self.scene_key != now.scene_key {
            return Some(
                "the scene changed since the checkpoint (anything besides [simulation] steps and \
                 [output], or a mesh it loads)"
                    .into(),
            );
        }
        pairs
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("{what} was `{a}`, this run has `{b}`"))
    }
}

/// The JSON header of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointHeader {
    /// jello version that wrote it.
    pub jello_version: String,
    /// Steps completed (the state is at the end of this step; 0 = the initial state).
    pub step: usize,
    /// Number of position (and velocity) values: 3 × vertices.
    pub dofs: usize,
    /// Whether the previous step's positions and velocities follow the state (a BDF2 run
    /// after its first step); absent in format 1.
    #[serde(default)]
    pub history: bool,
    /// What the trajectory depends on.
    pub identity: RunIdentity,
}

/// A run's state at the end of `header.step`.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Step, size and identity.
    pub header: CheckpointHeader,
    /// Time, s.
    pub t: f64,
    /// Positions, m (flattened xyz).
    pub x: Vec<f64>,
    /// Velocities, m/s.
    pub v: Vec<f64>,
    /// The previous step's positions and velocities, when `header.history`.
    pub history: Option<History>,
}

impl Checkpoint {
    /// The file's bytes (see the module docs).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let n = self.header.dofs;
        if self.x.len() != n || self.v.len() != n {
            return Err(JelloError::Invalid(format!(
                "checkpoint: {} positions and {} velocities for {n} dofs",
                self.x.len(),
                self.v.len()
            )));
        }
        if self.header.history != self.history.is_some() {
            return Err(JelloError::Invalid(
                "checkpoint: the header's history flag disagrees with the history held".into(),
            ));
        }
        if let Some(p) = &self.history {
            if p.x.len() != n || p.v.len() != n {
                return Err(JelloError::Invalid(format!(
                    "checkpoint: {} previous positions and {} previous velocities for {n} dofs",
                    p.x.len(),
                    p.v.len()
                )));
            }
        }
        let header = serde_json::to_vec(&self.header)
            .map_err(|e| JelloError::Invalid(format!("checkpoint header: {e}")))?;
        let states = if self.history.is_some() { 4 } else { 2 };
        let mut b = Vec::with_capacity(16 + header.len() + 8 * (states * n + 2));
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(&header);
        b.extend_from_slice(&self.t.to_le_bytes());
        let previous = self.history.iter().flat_map(|p| p.x.iter().chain(&p.v));
        for v in self.x.iter().chain(&self.v).chain(previous) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let sum = fnv1a64(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        Ok(b)
    }

    /// Parses a checkpoint; `path` names it in errors (one line each: wrong magic, version,
    /// size or checksum, bad header).
    pub fn from_bytes(path: &Path, b: &[u8]) -> Result<Self> {
        let bad = |msg: String| JelloError::parse(path, 0, msg);
        if b.len() < 24 || &b[..8] != MAGIC {
            return Err(bad("not a jello checkpoint (bad magic)".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(bad(format!(
                "checkpoint format {version}, this jello reads formats {OLDEST_VERSION} to \
                 {VERSION}"
            )));
        }
        let (body, sum) = b.split_at(b.len() - 8);
        if fnv1a64(body).to_le_bytes() != sum {
            return Err(bad("checksum mismatch (truncated or corrupted)".into()));
        }
        let hl = u32_at(12) as usize;
        if hl > MAX_HEADER || 16 + hl + 8 > body.len() {
            return Err(bad(format!("header length {hl} does not fit the file")));
        }
        let header: CheckpointHeader =
            serde_json::from_slice(&b[16..16 + hl]).map_err(|e| bad(format!("header: {e}")))?;
        if header.history && version < 2 {
            return Err(bad(format!("header: format {version} has no history")));
        }
        let n = header.dofs;
        let states = if header.history { 4 } else { 2 };
        let expected = n
            .checked_mul(8 * states)
            .and_then(|d| d.checked_add(16 + hl + 8));
        if expected != Some(body.len()) {
            return Err(bad(format!(
                "{} bytes of state for {n} dofs{}",
                body.len() - 16 - hl,
                if header.history { " with history" } else { "" }
            )));
        }
        let f = |o: usize| f64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let base = 16 + hl;
        let t = f(base);
        let block =
            |j: usize| -> Vec<f64> { (0..n).map(|i| f(base + 8 + 8 * (j * n + i))).collect() };
        let x = block(0);
        let v = block(1);
        let history = header.history.then(|| History {
            x: block(2),
            v: block(3),
        });
        let previous = history.iter().flat_map(|p| p.x.iter().chain(&p.v));
        if let Some(k) = std::iter::once(&t)
            .chain(&x)
            .chain(&v)
            .chain(previous)
            .position(|v| !v.is_finite())
        {
            return Err(bad(format!("non-finite value at state index {k}")));
        }
        Ok(Checkpoint {
            header,
            t,
            x,
            v,
            history,
        })
    }

    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let b = std::fs::read(path).map_err(|e| JelloError::io(path, e))?;
        Self::from_bytes(path, &b)
    }

    /// Writes `path` atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        crate::output::atomic_write(path, &self.to_bytes()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            header: CheckpointHeader {
                jello_version: "test".into(),
                step: 7,
                dofs: 6,
                history: false,
                identity: RunIdentity {
                    scene_key: "00ff".into(),
                    solver: "newton".into(),
                    variant: None,
                    stop: "cn".into(),
                    tolerance: "1e-5".into(),
                    max_iterations: Some(3),
                    h: "0.01".into(),
                    backend: "cpu".into(),
                    adapter: None,
                },
            },
            // Values whose decimal forms do not round-trip through a short print.
            t: 0.1 + 0.2,
            x: vec![1.0 / 3.0, -2.0e-300, 5e300, 0.0, -0.0, std::f64::consts::PI],
            v: vec![
                f64::MIN_POSITIVE,
                1e-310,
                -7.25,
                2.0f64.sqrt(),
                1e9 + 0.5,
                -1.0,
            ],
            history: None,
        }
    }

    /// [`sample`] with a BDF2 history.
    fn sample_with_history() -> Checkpoint {
        let mut c = sample();
        c.header.history = true;
        c.history = Some(History {
            x: c.x.iter().map(|v| -v / 7.0).collect(),
            v: c.v.iter().map(|v| v * 0.1 + 1e-300).collect(),
        });
        c
    }

    fn assert_same(back: &Checkpoint, c: &Checkpoint) {
        assert_eq!(back.header, c.header);
        assert_eq!(back.t.to_bits(), c.t.to_bits());
        let all = |c: &Checkpoint| -> Vec<u64> {
            let previous = c.history.iter().flat_map(|p| p.x.iter().chain(&p.v));
            c.x.iter()
                .chain(&c.v)
                .chain(previous)
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(back.history.is_some(), c.history.is_some());
        assert_eq!(all(back), all(c));
    }

    #[test]
    fn round_trips_bit_for_bit() {
        for c in [sample(), sample_with_history()] {
            let b = c.to_bytes().unwrap();
            let back = Checkpoint::from_bytes(Path::new("c.bin"), &b).unwrap();
            assert_same(&back, &c);
        }
    }

    #[test]
    fn every_flipped_byte_or_truncation_is_a_one_line_error() {
        for c in [sample(), sample_with_history()] {
            let b = c.to_bytes().unwrap();
            for i in 0..b.len() {
                let mut bad = b.clone();
                bad[i] ^= 0x40;
                let e = Checkpoint::from_bytes(Path::new("c.bin"), &bad)
                    .expect_err(&format!("byte {i} flipped was accepted"));
                let msg = e.to_string();
                assert!(msg.starts_with("c.bin:") && !msg.contains('\n'), "{msg}");
            }
            for len in [0, 8, 23, b.len() / 2, b.len() - 1] {
                assert!(Checkpoint::from_bytes(Path::new("c.bin"), &b[..len]).is_err());
            }
        }
    }

    /// The bytes a format-1 writer made of `c` (version 1, the state without history; the
    /// header without its `history` key unless `keep_key`).
    fn format_1(c: &Checkpoint, keep_key: bool) -> Vec<u8> {
        let mut header = serde_json::to_value(&c.header).unwrap();
        if !keep_key {
            header.as_object_mut().unwrap().remove("history");
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(&header);
        b.extend_from_slice(&c.t.to_le_bytes());
        for v in c.x.iter().chain(&c.v) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let sum = fnv1a64(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }

    #[test]
    fn format_1_checkpoints_are_read_without_history() {
        let c = sample();
        let back = Checkpoint::from_bytes(Path::new("c.bin"), &format_1(&c, false)).unwrap();
        assert_same(&back, &c);
        // A history flag in a format-1 file is refused, not misread.
        let e = Checkpoint::from_bytes(Path::new("c.bin"), &format_1(&sample_with_history(), true))
            .unwrap_err();
        assert!(e.to_string().contains("history"), "{e}");
    }

    #[test]
    fn a_history_that_does_not_match_the_header_is_not_written() {
        let mut c = sample_with_history();
        c.header.history = false;
        assert!(c.to_bytes().is_err());
        let mut c = sample_with_history();
        c.history.as_mut().unwrap().v.pop();
        assert!(c.to_bytes().is_err());
    }

    #[test]
    fn identity_mismatch_names_the_setting() {
        let a = sample().header.identity;
        assert_eq!(a.mismatch(&a), None);
        let mut b = a.clone();
        b.solver = "jgs2".into();
        let m = a.mismatch(&b).unwrap();
        assert!(
            m.contains("solver") && m.contains("newton") && m.contains("jgs2"),
            "{m}"
        );
        let mut b = a.clone();
        b.scene_key = "0100".into();
        assert!(a.mismatch(&b).unwrap().contains("scene changed"));
        // Backend and adapter are checked by the runner (an `auto` resume adopts them).
        let mut b = a.clone();
        b.backend = "gpu".into();
        b.adapter = Some("x".into());
        assert_eq!(a.mismatch(&b), None);
    }
}
