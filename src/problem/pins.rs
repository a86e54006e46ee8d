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
    /// A sequence of rigid motions, each spread evenly over its own time window and composed
    /// in order: see [`Phase`].
    Keyframes {
        /// The phases, applied in this order.
        phases: Vec<Phase>,
    },
}

/// One phase of [`Script::Keyframes`]: over `[start, end]` a rotation by `angle` about the axis
/// through `center`, then a translation by `translation`, both at a constant rate. At time `t`
/// the phase has done the fraction s = clamp((t − start)/(end − start), 0, 1) of its motion:
/// nothing before its window, all of it after. The centre is a fixed world point (an earlier
/// phase's translation does not carry it along), so each phase reads as written in the scene.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Start of the window, s.
    pub start: f64,
    /// End of the window, s (> `start`).
    pub end: f64,
    /// A point on the rotation axis, m.
    pub center: [f64; 3],
    /// Rotation axis (normalised internally; ignored when `angle` is 0).
    pub axis: [f64; 3],
    /// Total rotation over the window, rad (right-handed about `axis`).
    pub angle: f64,
    /// Total displacement over the window, m.
    pub translation: [f64; 3],
}

impl Phase {
    /// The fraction of the phase done at time `t` (s), in [0, 1]: exactly 0 up to `start` and
    /// exactly 1 from `end` on (also for a window of zero length).
    pub fn progress(&self, t: f64) -> f64 {
        if t >= self.end {
            1.0
        } else if t <= self.start {
            0.0
        } else {
            ((t - self.start) / (self.end - self.start)).clamp(0.0, 1.0)
        }
    }

    /// Applies the part of the phase done at time `t` to the point `p`, m.
    pub fn apply(&self, p: Vector3<f64>, t: f64) -> Vector3<f64> {
        let s = self.progress(t);
        let mut p = p;
        if self.angle != 0.0 && s > 0.0 {
            if let Some(axis) = Unit::try_new(Vector3::from(self.axis), 1e-300) {
                let c = Vector3::from(self.center);
                p = c + Rotation3::from_axis_angle(&axis, s * self.angle) * (p - c);
            }
        }
        p + s * Vector3::from(self.translation)
    }
}

impl Script {
    /// Where a vertex that started at `p0` is at time `t` (s). Continuous in `t` for every
    /// script (a keyframed phase ends exactly where the next one takes over).
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
            Script::Keyframes { phases } => phases
                .iter()
                .fold(Vector3::from(p0), |p, phase| phase.apply(p, t))
                .into(),
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
