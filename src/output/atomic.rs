//! Atomic file output: write to a temporary file beside the target, then rename over it, so a
//! reader never sees a half-written file and a crash never leaves one behind.

use crate::error::{JelloError, Result};
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically (temp file in the same directory + rename).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    atomic_write_with(path, |w| w.write_all(bytes))
}

/// Streams output through `fill` into a temporary file, then renames it to `path`.
/// Parent directories are created as needed.
pub fn atomic_write_with(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| JelloError::io(dir, e))?;
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| JelloError::Invalid(format!("{}: not a file path", path.display())))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::new(file);
        fill(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(JelloError::io(path, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        JelloError::io(path, e)
    })
}
