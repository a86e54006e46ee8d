//! The SMS precompute for a model, cached as `sms-KEY.bin` (the `JELLOSMS` artifact of
//! `jello_precompute::sms::cache`) beside the other solvers' artifacts
//! (`SCENE_DIR/.jello-cache`).

use super::params::{default_handles, MultilevelParams};
use crate::error::{JelloError, Result};
use crate::problem::Model;
use jello_precompute::sms::{
    build_sms, cache as sms_cache, mesh_components, sms_cache_key, SmsBasis, SmsOptions,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a basis came from.
#[derive(Clone, Debug, PartialEq)]
pub enum SmsOrigin {
    /// Read from a valid cached artifact.
    Cache(PathBuf),
    /// Built now (and written to the path when there was a cache directory).
    Built(Option<PathBuf>),
}

/// Young's modulus of each element (Pa) from its Lamé parameters, `E = μ(3λ + 2μ)/(λ + μ)`
/// (`2μ` where that is not a positive finite number, e.g. ARAP's λ = 0 gives 2μ anyway). The
/// SMS metric and biharmonic weights use only ratios of it.
pub fn element_youngs(model: &Model) -> Vec<f64> {
    model
        .materials
        .iter()
        .map(|m| {
            let e = m.mu * (3.0 * m.lambda + 2.0 * m.mu) / (m.lambda + m.mu);
            if e.is_finite() && e > 0.0 {
                e
            } else {
                (2.0 * m.mu).max(f64::MIN_POSITIVE)
            }
        })
        .collect()
}

/// The precompute options of `params` for `model` (handle count clamped to at least the
/// number of connected components of the mesh: each needs a partition of its own — an object
/// may hold several, as the bundled ring net's 21 rings).
pub fn sms_options(model: &Model, params: &MultilevelParams) -> SmsOptions {
    let n = model.num_vertices();
    let k = params.handles.unwrap_or_else(|| default_handles(n));
    let components = mesh_components(n, &model.mesh.tets);
    let mut opts = SmsOptions::new(k.max(components).min(n));
    opts.partition.jump_factor = params.jump_factor;
    opts.n_cg = params.n_cg;
    opts.cubature.targets = params.cubature;
    opts
}

/// The SMS basis of `model` under `params`: read from `cache_dir/sms-KEY.bin` when it exists
/// and checks out, otherwise built and written there atomically. A stale or corrupt file is
/// rebuilt with a warning (returned), never trusted; a cache that cannot be written gives one
/// warning and `Built(None)`.
pub fn load_or_build_sms(
    model: &Model,
    params: &MultilevelParams,
    cache_dir: Option<&Path>,
) -> Result<(Arc<SmsBasis>, SmsOrigin, Vec<String>)> {
    let positions = &model.mesh.positions;
    let tets = &model.mesh.tets;
    let youngs = element_youngs(model);
    let opts = sms_options(model, params);
    let key = sms_cache_key(positions, tets, &youngs, &model.pinned, &opts);
    let path = cache_dir.map(|d| d.join(format!("sms-{key:016x}.bin")));
    let mut warnings = Vec::new();
    if let Some(p) = path
        .as_ref()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
    {
        match sms_cache::read(p, key, positions, tets) {
            Ok(b) => return Ok((Arc::new(b), SmsOrigin::Cache(p.clone()), warnings)),
            Err(e) => warnings.push(format!("{e}; rebuilding the SMS basis")),
        }
    }
    let basis = build_sms(positions, tets, &youngs, &model.pinned, &opts)
        .map_err(|e| JelloError::Solver(format!("multilevel: SMS precompute: {e}")))?;
    let mut written = None;
    if let Some(p) = &path {
        if let Err(e) = p.parent().map(std::fs::create_dir_all).transpose() {
            warnings.push(format!(
                "{}: could not create the cache directory: {e}; the SMS basis is not cached",
                p.display()
            ));
        } else if let Err(e) = sms_cache::write(p, &basis, tets, key) {
            warnings.push(format!(
                "could not write the SMS basis cache ({e}); it is not cached"
            ));
        } else {
            written = Some(p.clone());
        }
    }
    Ok((Arc::new(basis), SmsOrigin::Built(written), warnings))
}
