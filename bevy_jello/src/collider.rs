//! Static colliders the soft bodies touch.

use bevy::prelude::*;

/// A horizontal ground: the half-space below `height` along +y (Bevy's up axis, and jello's
/// default gravity's). Spawn it on any entity; every soft body built afterwards collides with
/// every ground present then (jello's `ground` obstacle, a barrier of IPC's kind whose
/// activation distance d̂ is 1e-3 of the scene's bounding-box diagonal).
#[derive(Component, Clone, Copy, Debug, Default)]
pub struct Ground {
    /// Height of the plane, m.
    pub height: f32,
}
