//! Dirichlet vertices and the kinematic scripts that move them.

use nalgebra::{Rotation3, Unit, Vector3};
use serde::{Deserialize, Serialize};

/// How a pinned set of vertices moves over time. Positions are given relative to where the
/// vertices were at t = 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Script {
    /// Stay where they were at t = 0.
    Fixed,
    /// Move with a constant velocity (m/s).
    Translate {
        /// Velocity, m/s.
        velocity: [f64; 3],
    },
    /// Rotate rigidly about an axis through `center` with angular velocity `omega` (rad/s,
    /// right-handed about `axis`).
    Rotate {
        /// A point on the axis, m.
        center: [f64; 3],
        /// Axis direction (normalised internally).
        axis: [f64; 3],
        /// Angular velocity, rad/s.
        omega: f64,
    },
}

impl Script {
    /// Where a vertex that started at `p0` is at time `t` (s).
    pub fn position(&self, p0: [f64; 3], t: f64) -> [f64; 3] {
        match self {
            Script::Fixed => p0,
            Script::Translate { velocity } => [
                p0[0] + velocity[0] * t,
                p0[1] + velocity[1] * t,
                p0[2] + velocity[2] * t,
            ],
            Script::Rotate {
                center,
                axis,
                omega,
            } => {
                let c = Vector3::from(*center);
                let Some(axis) = Unit::try_new(Vector3::from(*axis), 1e-300) else {
                    return p0;
                };
                let r = Rotation3::from_axis_angle(&axis, omega * t);
                (c + r * (Vector3::from(p0) - c)).into()
            }
        }
    }
}

/// A set of Dirichlet vertices driven by one script.
#[derive(Clone, Debug, PartialEq)]
pub struct Pin {
    /// Global vertex indices.
    pub vertices: Vec<u32>,
    /// Their positions at t = 0, m.
    pub start: Vec<[f64; 3]>,
    /// The motion.
    pub script: Script,
}

/// An external force on a set of vertices during a time window (e.g. a sudden kick on a foot).
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalForce {
    /// Global vertex indices.
    pub vertices: Vec<u32>,
    /// Total force, N, split over the vertices in proportion to their masses (so it acts as a
    /// uniform acceleration of the region).
    pub force: [f64; 3],
    /// Start time, s (inclusive).
    pub start: f64,
    /// End time, s (exclusive).
    pub end: f64,
}

impl ExternalForce {
    /// Whether the force acts during the step that starts at `t` (s).
    pub fn active(&self, t: f64) -> bool {
        t >= self.start && t < self.end
    }
}
