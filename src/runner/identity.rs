//! What a run's trajectory depends on ([`RunIdentity`]) and the scene file's content hash, for
//! the manifest and for refusing a resume that would not continue the same trajectory.

use crate::error::{JelloError, Result};
use crate::gpu::BackendChoice;
use crate::output::RunIdentity;
use crate::problem::Model;
use crate::scene::RunConfig;
use crate::solver::jgs2::Variant;
use crate::solver::StopRule;
use jello_precompute::artifact::fnv1a64;
use std::path::Path;

/// FNV-1a-64 of the scene file's bytes, as 16 hex digits.
pub fn scene_hash(scene_path: &Path) -> Result<String> {
    let bytes = std::fs::read(scene_path).map_err(|e| JelloError::io(scene_path, e))?;
    Ok(format!("{:016x}", fnv1a64(&bytes)))
}

/// The scene's settings key: FNV-1a-64 of the scene parsed as TOML with `[simulation] steps`
/// and `[output]` removed (re-serialised, so comments and layout do not count), followed by the
/// model's rest positions and tets and its triangle-mesh obstacles (so an edited mesh file
/// counts). A file that does not parse
/// (it did moments ago, when the scene was loaded) is hashed as bytes.
pub fn scene_key(scene_path: &Path, model: &Model) -> Result<String> {
    let bytes = std::fs::read(scene_path).map_err(|e| JelloError::io(scene_path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut canon = match toml::from_str::<toml::Table>(text) {
        Ok(mut t) => {
            t.remove("output");
            if let Some(sim) = t.get_mut("simulation").and_then(|s| s.as_table_mut()) {
                sim.remove("steps");
            }
            serde_json::to_vec(&t).unwrap_or_else(|_| bytes.clone())
        }
        Err(_) => bytes.clone(),
    };
    for p in &model.mesh.positions {
        for c in p {
            canon.extend_from_slice(&c.to_le_bytes());
        }
    }
    for t in &model.mesh.tets {
        for v in t {
            canon.extend_from_slice(&v.to_le_bytes());
        }
    }
    // Triangle-mesh obstacles (nothing for scenes without them, so their keys do not change).
    if let Some(ipc) = &model.contact {
        let m = &ipc.mesh;
        for p in &m.obstacle_positions {
            for c in p {
                canon.extend_from_slice(&c.to_le_bytes());
            }
        }
        for f in m
            .faces
            .iter()
            .filter(|f| f[0] as usize >= m.num_model_vertices)
        {
            for v in f {
                canon.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    Ok(format!("{:016x}", fnv1a64(&canon)))
}

/// The identity of a run of `config` on `choice` with scene key `scene_key`.
pub fn identity(config: &RunConfig, scene_key: String, choice: &BackendChoice) -> RunIdentity {
    let (stop, tolerance) = stop_rule(config.stop);
    RunIdentity {
        scene_key,
        solver: config.solver.name().into(),
        variant: config.variant.map(|v| variant_name(v).into()),
        stop: stop.into(),
        tolerance: format!("{tolerance:?}"),
        max_iterations: config.max_iterations,
        h: format!("{:?}", config.h),
        backend: choice.kind().into(),
        adapter: choice.adapter.as_ref().map(|a| a.to_string()),
    }
}

/// A sweep's scene-file name (`jacobi`, `gs`).
pub fn variant_name(v: Variant) -> &'static str {
    match v {
        Variant::Jacobi => "jacobi",
        Variant::GaussSeidel => "gs",
    }
}

/// The stop rule's name (`cn`, `dx`) and tolerance.
pub fn stop_rule(stop: StopRule) -> (&'static str, f64) {
    match stop {
        StopRule::Cn { eps } => ("cn", eps),
        StopRule::Dx { tol } => ("dx", tol),
    }
}
