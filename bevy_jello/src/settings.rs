//! The plugin's settings resource.

use bevy::prelude::*;

/// Where jello runs its kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// Bevy's render device when it can run jello's kernels (any adapter, software ones
    /// included: it is the device Bevy draws with), else jello's f64 CPU path, said once in the
    /// log.
    #[default]
    RenderDevice,
    /// jello's f64 CPU path (rayon), whatever the adapter.
    Cpu,
}

/// Simulation settings shared by every soft body (a resource; [`crate::JelloPlugin`] inserts
/// it). Read when a body is built: changing it later affects bodies built afterwards.
#[derive(Resource, Clone, Debug)]
pub struct JelloSettings {
    /// Time step h, s. The plugin sets `Time<Fixed>`'s period to it, so one `FixedUpdate` run
    /// advances every body by one implicit step of h however fast frames come.
    pub time_step: f64,
    /// Gravitational acceleration, m/s².
    pub gravity: Vec3,
    /// Where the kernels run.
    pub device: DeviceChoice,
}

impl Default for JelloSettings {
    /// h = 0.01 s (100 steps per second), gravity 9.81 m/s² down −y, Bevy's render device.
    fn default() -> Self {
        JelloSettings {
            time_step: 0.01,
            gravity: Vec3::new(0.0, -9.81, 0.0),
            device: DeviceChoice::RenderDevice,
        }
    }
}
