//! Every size cap jello checks input against, in one place.
//!
//! A count read from a scene or a file is checked against these (with overflow-safe
//! arithmetic) and against what the file can hold *before* anything is allocated for it, so a
//! huge or corrupt value is a one-line error naming the file and the key or line, never an
//! allocation abort, an overflow panic or a hang. The caps sit far above what a run of jello
//! can use (a 100M-vertex mesh does not fit any GPU it targets); raise one here if a real input
//! needs more.

/// Most time steps one run may request (`simulation.steps`, `--steps`): 10 million. Each step
/// keeps a record in `stats.json` (~150 B), so the cap bounds that file to ~1.5 GB.
pub const MAX_STEPS: usize = 10_000_000;

/// Most cells a mesh generator may make: `box` counts `cells[0]·cells[1]·cells[2]`, `ball`
/// `n³` with `n` its resolution rounded up to even (6 tets per cell: 12M tets).
pub const MAX_GENERATOR_CELLS: usize = 2_000_000;

/// Largest mesh file a reader opens: 4 GiB. Readers hold the whole file in memory, and every
/// line or record number they report fits in a `u32` below this size.
pub const MAX_MESH_FILE_BYTES: u64 = 4 << 30;

/// Largest scene file: 16 MiB (a scene is a few hundred bytes; anything this large is not one).
pub const MAX_SCENE_FILE_BYTES: u64 = 16 << 20;

/// Most vertices a mesh file may declare: 100 million (2.4 GB of f64 positions; vertex ids are
/// `u32`).
pub const MAX_MESH_VERTICES: usize = 100_000_000;

/// Most elements (of every kind, boundary ones included) a mesh file may declare: 200 million.
pub const MAX_MESH_ELEMENTS: usize = 200_000_000;

/// Largest JGS2 artifact read back from the cache: 64 GiB (the 114k-vertex armadillo's is
/// ~0.5 GB). Defined beside the format; re-exported here so every cap is listed in one place.
pub use jello_precompute::artifact::MAX_ARTIFACT_BYTES;

/// Largest coordinate magnitude (m) a scene may place a vertex at, after its transform: 1e12 m.
/// Squared distances (1e24) and the bounding-box diagonal then stay finite in f64, and squared
/// distances stay below f32's 3.4e38 on the GPU.
pub const MAX_COORDINATE: f64 = 1e12;

/// Largest magnitude any float in a scene may have (coordinates have the tighter
/// [`MAX_COORDINATE`]): 1e30, far beyond every physical value a scene holds (steel's Young's
/// modulus is 2e11 Pa), so products of a few stay finite in f64.
pub const MAX_SCENE_VALUE: f64 = 1e30;

/// Shortest and longest time step `h` (s) a scene may ask for: 1e-12 .. 1e12 s. Outside them
/// `1/h²` (the inertia weight) or `h²` times a load leave the range where f32 holds the
/// incremental potential's terms side by side.
pub const TIME_STEP_RANGE: (f64, f64) = (1e-12, 1e12);

/// Refuses anything at `path` that is not a regular file no larger than `cap` bytes, from its
/// metadata, before it is opened: opening a FIFO blocks until a writer comes, and reading a
/// device (`/dev/zero`) or a directory never ends or fails late. Returns the file's size.
pub fn check_regular_file(path: &std::path::Path, cap: u64) -> crate::Result<u64> {
    use crate::error::JelloError;
    let meta = std::fs::metadata(path).map_err(|e| JelloError::io(path, e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else {
            special_kind(&kind)
        };
        return Err(JelloError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("is {what}, not a regular file (refused before opening it)"),
            ),
        ));
    }
    if meta.len() > cap {
        return Err(JelloError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!(
                    "file is {} bytes, larger than the {cap}-byte cap for this kind of file \
                     (jello::limits)",
                    meta.len()
                ),
            ),
        ));
    }
    Ok(meta.len())
}

#[cfg(unix)]
fn special_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::FileType) -> &'static str {
    "a special file"
}

/// Reads a whole file after [`check_regular_file`], never more than `cap` bytes even if the file
/// grows between the check and the read.
pub fn read_capped(path: &std::path::Path, cap: u64) -> crate::Result<Vec<u8>> {
    use std::io::Read;
    let len = check_regular_file(path, cap)?;
    let f = std::fs::File::open(path).map_err(|e| crate::JelloError::io(path, e))?;
    let mut out = Vec::with_capacity(len as usize);
    f.take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| crate::JelloError::io(path, e))?;
    if out.len() as u64 > cap {
        return Err(crate::JelloError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!("file grew past the {cap}-byte cap while being read"),
            ),
        ));
    }
    Ok(out)
}
