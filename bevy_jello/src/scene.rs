//! A soft body and the colliders around it, as a jello scene.
//!
//! The body is described to jello as a scene (`jello::scene::SceneSpec`, the TOML format's
//! types) rather than assembled from the model's parts: jello's scene builder then validates it
//! (each bad value one error naming the key) and applies the same defaults `jello run` does, so
//! a body here and the same scene run by `jello run` are one model — which the headless test
//! checks.

use crate::body::{BodyShape, SoftBody};
use crate::error::BevyJelloError;
use bevy::prelude::*;
use jello::scene::{BuiltScene, Scene, SceneSpec};
use serde_json::json;

/// The jello scene of one `body` placed at `translation` (m), with grounds at `grounds`
/// (heights, m), gravity `gravity` (m/s²) and time step `h` (s). `name` labels jello's
/// messages about it.
pub fn body_scene(
    name: &str,
    body: &SoftBody,
    translation: Vec3,
    grounds: &[f32],
    gravity: Vec3,
    h: f64,
) -> Result<Scene, BevyJelloError> {
    let t = translation.as_dvec3();
    let mesh = match &body.shape {
        BodyShape::Ball { radius, resolution } => json!({
            "generator": "ball",
            "center": [t.x, t.y, t.z],
            "radius": *radius as f64,
            "resolution": resolution,
        }),
        BodyShape::Cuboid { size, cells } => {
            let half = size.as_dvec3() / 2.0;
            let (lo, hi) = (t - half, t + half);
            json!({
                "generator": "box",
                "min": [lo.x, lo.y, lo.z],
                "max": [hi.x, hi.y, hi.z],
                "cells": cells,
            })
        }
        BodyShape::File(path) => json!({ "file": path }),
    };
    let transform = match &body.shape {
        // A file's coordinates are its own: move them to the entity.
        BodyShape::File(_) => json!({ "translate": [t.x, t.y, t.z] }),
        _ => json!({}),
    };
    let m = &body.material;
    let v = body.velocity.as_dvec3();
    let g = gravity.as_dvec3();
    let obstacles: Vec<_> = grounds
        .iter()
        .map(|height| json!({ "type": "ground", "height": *height as f64 }))
        .collect();
    let spec = json!({
        // `steps` is the length of a `jello run`; a body here steps for as long as it lives.
        "simulation": { "h": h, "steps": 1, "gravity": [g.x, g.y, g.z] },
        "solver": { "name": body.solver.name() },
        "objects": [{
            "name": name,
            "mesh": mesh,
            "transform": transform,
            "material": {
                "model": m.model.name(),
                "youngs_modulus": m.youngs_modulus,
                "poisson_ratio": m.poisson_ratio,
                "density": m.density,
            },
            "velocity": [v.x, v.y, v.z],
        }],
        "obstacles": obstacles,
    });
    let spec: SceneSpec =
        serde_json::from_value(spec).map_err(|e| BevyJelloError::Body(format!("{name}: {e}")))?;
    Ok(Scene {
        // Relative mesh paths resolve against the working directory.
        path: format!("./{name}").into(),
        spec,
    })
}

/// Builds `scene` into jello's model (validating every value).
pub fn build(scene: &Scene) -> Result<BuiltScene, BevyJelloError> {
    Ok(scene.build()?)
}
