//! The partition cache: `dot-KEY.bin` beside the JGS2 artifacts (`SCENE_DIR/.jello-cache`).

use crate::error::{JelloError, Result};
use crate::problem::Model;
use jello_precompute::partition::{self, Decomposition};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A 64-bit key of everything a partition depends on: the element list, the vertex count,
/// the subdomain count and the format version (FNV-1a, stable across runs and platforms).
pub fn cache_key(model: &Model, subdomains: usize) -> u64 {
    let mut k = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            k ^= b as u64;
            k = k.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(b"dot-partition");
    eat(&(model.num_vertices() as u64).to_le_bytes());
    for t in &model.mesh.tets {
        for v in t {
            eat(&v.to_le_bytes());
        }
    }
    eat(&(subdomains as u64).to_le_bytes());
    eat(&partition::FORMAT_VERSION.to_le_bytes());
    k
}

/// Where a decomposition came from.
#[derive(Clone, Debug, PartialEq)]
pub enum DecompositionOrigin {
    /// Read from a valid cached artifact.
    Cache(PathBuf),
    /// Built now (and written to the path when there was a cache directory).
    Built(Option<PathBuf>),
}

/// The decomposition of `model` into `subdomains`: read from `cache_dir/dot-KEY.bin` when it
/// exists and checks out (magic, version, key, checksum, and a map that covers this mesh),
/// otherwise built with METIS and written there atomically. A stale, corrupt or unreadable
/// file is rebuilt with a warning (returned), never trusted; a cache that cannot be written
/// gives one warning and `Built(None)`.
pub fn load_or_build_decomposition(
    model: &Model,
    subdomains: usize,
    cache_dir: Option<&Path>,
) -> Result<(Arc<Decomposition>, DecompositionOrigin, Vec<String>)> {
    super::check_subdomains(model, subdomains)?;
    let key = cache_key(model, subdomains);
    let (nv, tets) = (model.num_vertices(), &model.mesh.tets);
    let path = cache_dir.map(|d| d.join(format!("dot-{key:016x}.bin")));
    let mut warnings = Vec::new();
    if let Some(p) = path
        .as_ref()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
    {
        match partition::read(p, key, nv, tets) {
            Ok(d) => return Ok((Arc::new(d), DecompositionOrigin::Cache(p.clone()), warnings)),
            Err(e) => warnings.push(format!("{e}; rebuilding the DOT partition")),
        }
    }
    let d = Decomposition::new(nv, tets, subdomains)
        .map_err(|e| JelloError::Solver(format!("dot: partition: {e}")))?;
    let mut written = None;
    if let Some(p) = &path {
        if let Err(e) = p.parent().map(std::fs::create_dir_all).transpose() {
            warnings.push(format!(
                "{}: could not create the cache directory: {e}; the partition is not cached",
                p.display()
            ));
        } else if let Err(e) = partition::write(p, &d, key) {
            warnings.push(format!(
                "could not write the DOT partition cache ({e}); it is not cached"
            ));
        } else {
            written = Some(p.clone());
        }
    }
    Ok((Arc::new(d), DecompositionOrigin::Built(written), warnings))
}
