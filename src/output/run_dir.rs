//! A run's output directory: what it holds before a run starts, and removing an earlier run's
//! files (only those, never a file jello did not write).

use super::manifest::{Manifest, MANIFEST};
use crate::error::{JelloError, Result};
use std::path::{Component, Path};

/// `stats.json`, relative to the run directory.
pub const STATS: &str = "stats.json";
/// `checkpoint.bin`, relative to the run directory.
pub const CHECKPOINT: &str = "checkpoint.bin";
/// The frames folder, relative to the run directory.
pub const FRAMES: &str = "frames";
/// The ParaView series, relative to the run directory.
pub const PVD: &str = "frames/sim.pvd";

/// What an output directory holds before a run.
#[derive(Debug)]
pub enum DirState {
    /// Missing, empty, or holding no jello output.
    Free,
    /// An earlier run with a readable manifest.
    Run(Box<Manifest>),
    /// jello outputs without a readable manifest (an older jello, or a damaged manifest): the
    /// files named like jello's outputs, relative to the directory, and why there is no
    /// manifest.
    Unowned {
        /// Files named like jello's outputs.
        files: Vec<String>,
        /// "no manifest.json" or the manifest's read error.
        why: String,
    },
}

/// True for names jello writes into `frames/`: `sim.pvd` and `frame_NNNNN.{vtu,obj,png}`
/// (five or more digits).
fn is_frame_name(name: &str) -> bool {
    if name == "sim.pvd" {
        return true;
    }
    let Some(rest) = name.strip_prefix("frame_") else {
        return false;
    };
    let Some((digits, ext)) = rest.split_once('.') else {
        return false;
    };
    digits.len() >= 5
        && digits.bytes().all(|b| b.is_ascii_digit())
        && matches!(ext, "vtu" | "obj" | "png")
}

/// True for a temporary file of `atomic_write` (`.NAME.PID.tmp`) for a NAME jello writes.
fn is_jello_temp(name: &str, top: bool) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let Some((base, pid)) = inner.rsplit_once('.') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && if top {
            matches!(base, STATS | CHECKPOINT | MANIFEST)
        } else {
            is_frame_name(base)
        }
}

/// Regular files in `dir` and `dir/frames` (relative paths), sorted; empty when `dir` is
/// missing. Deeper folders are not jello's and are not looked into.
fn listing(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (sub, prefix) in [(dir.to_path_buf(), ""), (dir.join(FRAMES), "frames/")] {
        let rd = match std::fs::read_dir(&sub) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(JelloError::io(&sub, e)),
        };
        for e in rd {
            let e = e.map_err(|e| JelloError::io(&sub, e))?;
            let name = e.file_name().to_string_lossy().to_string();
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if is_dir {
                if prefix.is_empty() && name == FRAMES {
                    continue;
                }
                out.push(format!("{prefix}{name}/"));
            } else {
                out.push(format!("{prefix}{name}"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// True for a path (relative to a run directory) that jello writes: the manifest, stats,
/// checkpoint, frames, and their temporary files.
fn is_jello_file(rel: &str) -> bool {
    match rel.strip_prefix("frames/") {
        Some(name) => is_frame_name(name) || is_jello_temp(name, false),
        None => matches!(rel, STATS | CHECKPOINT | MANIFEST) || is_jello_temp(rel, true),
    }
}

/// Looks at `dir` before a run. Errors only when it cannot be read (or is a file).
pub fn inspect(dir: &Path) -> Result<DirState> {
    if dir.exists() && !dir.is_dir() {
        return Err(JelloError::Invalid(format!(
            "{}: the output directory is a file",
            dir.display()
        )));
    }
    let why = match Manifest::read(dir) {
        Ok(Some(m)) => return Ok(DirState::Run(Box::new(m))),
        Ok(None) => "no manifest.json".to_string(),
        Err(e) => e.to_string(),
    };
    let files: Vec<String> = listing(dir)?
        .into_iter()
        .filter(|f| is_jello_file(f))
        .collect();
    if files.is_empty() {
        Ok(DirState::Free)
    } else {
        Ok(DirState::Unowned { files, why })
    }
}

/// A relative path made only of plain names (no `..`, no root): a manifest entry that is not
/// one is never acted on.
fn is_plain_relative(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// What [`remove_files`] did.
#[derive(Clone, Debug, Default)]
pub struct Removal {
    /// Files removed.
    pub removed: usize,
    /// Files left in the directory that jello did not list (user files), relative paths.
    pub left: Vec<String>,
    /// Manifest entries ignored because they were not plain relative paths.
    pub refused: Vec<String>,
}

impl Removal {
    /// One line about what was left alone (`None` when nothing was).
    pub fn note(&self, dir: &Path) -> Option<String> {
        let mut parts = Vec::new();
        if !self.left.is_empty() {
            let shown: Vec<&str> = self.left.iter().take(5).map(String::as_str).collect();
            let more = self.left.len().saturating_sub(shown.len());
            parts.push(format!(
                "left {} file{} jello did not write alone ({}{})",
                self.left.len(),
                if self.left.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if !self.refused.is_empty() {
            parts.push(format!(
                "ignored {} manifest entr{} outside the directory",
                self.refused.len(),
                if self.refused.len() == 1 { "y" } else { "ies" }
            ));
        }
        (!parts.is_empty()).then(|| format!("{}: {}", dir.display(), parts.join("; ")))
    }
}

/// Removes `files` (relative to `dir`, as listed by a manifest, or found by [`inspect`]) and
/// the temporary files of interrupted atomic writes of them, then `frames/` if it is left
/// empty. Missing files are fine; nothing else is touched.
pub fn remove_files(dir: &Path, files: &[String]) -> Result<Removal> {
    let mut r = Removal::default();
    for rel in files {
        if !is_plain_relative(rel) {
            r.refused.push(rel.clone());
            continue;
        }
        let path = dir.join(rel);
        match std::fs::remove_file(&path) {
            Ok(()) => r.removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(JelloError::io(&path, e)),
        }
    }
    // Temporary files of the listed names (a run killed mid-write leaves them).
    let listed: std::collections::HashSet<&str> = files.iter().map(String::as_str).collect();
    for rel in listing(dir)? {
        let (prefix, name) = match rel.rsplit_once('/') {
            Some((p, n)) => (format!("{p}/"), n.to_string()),
            None => (String::new(), rel.clone()),
        };
        let target = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| n.rsplit_once('.'))
            .map(|(base, _)| format!("{prefix}{base}"));
        if target.is_some_and(|t| listed.contains(t.as_str())) {
            let path = dir.join(&rel);
            std::fs::remove_file(&path).map_err(|e| JelloError::io(&path, e))?;
            r.removed += 1;
        }
    }
    let frames = dir.join(FRAMES);
    if frames.is_dir() && std::fs::read_dir(&frames).is_ok_and(|mut d| d.next().is_none()) {
        std::fs::remove_dir(&frames).map_err(|e| JelloError::io(&frames, e))?;
    }
    r.left = listing(dir)?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jello_names_and_only_those() {
        for ok in [
            "stats.json",
            "checkpoint.bin",
            "manifest.json",
            "frames/sim.pvd",
            "frames/frame_00000.vtu",
            "frames/frame_123456.png",
            "frames/frame_00010.obj",
            ".stats.json.4242.tmp",
            "frames/.frame_00003.vtu.17.tmp",
        ] {
            assert!(is_jello_file(ok), "{ok}");
        }
        for no in [
            "notes.txt",
            "stats.json.bak",
            "frames/frame_1.vtu",
            "frames/frame_00001.vtk",
            "frames/my_frame_00001.vtu",
            "frames/frame_0000a.vtu",
            "sim.pvd",
            "frame_00000.vtu",
            ".notes.txt.12.tmp",
            "frames/.frame_00003.vtu.x.tmp",
        ] {
            assert!(!is_jello_file(no), "{no}");
        }
        assert!(is_plain_relative("frames/frame_00000.vtu"));
        for bad in ["", "../x", "/etc/passwd", "frames/../../x"] {
            assert!(!is_plain_relative(bad), "{bad}");
        }
    }
}
