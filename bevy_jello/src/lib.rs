//! # bevy_jello — jello soft bodies in Bevy
//!
//! [`JelloPlugin`] simulates every entity with a [`SoftBody`] with jello (tetrahedral FEM,
//! hyperelastic materials, implicit time stepping, barrier contact with [`Ground`]s) on Bevy's
//! own GPU device, and draws it with Bevy's PBR pipeline.
//!
//! ```no_run
//! use bevy::prelude::*;
//! use bevy_jello::prelude::*;
//!
//! fn setup(mut commands: Commands, mut materials: ResMut<Assets<StandardMaterial>>) {
//!     commands.spawn(Ground { height: 0.0 });
//!     commands.spawn((
//!         SoftBody::ball(0.1, 8),
//!         Transform::from_xyz(0.0, 0.3, 0.0),
//!         MeshMaterial3d(materials.add(Color::srgb(0.3, 0.6, 1.0))),
//!     ));
//! }
//! ```
//!
//! ## Design
//!
//! - **One device.** Bevy 0.20 renders with wgpu 30, jello's version, so jello adopts Bevy's
//!   `RenderDevice`/`RenderQueue` (`jello::gpu::Device::from_wgpu`: jello never owns or
//!   destroys them) and its kernels run beside Bevy's passes. When that device cannot run
//!   jello's kernels (too few storage buffers per stage, say), or there is no renderer, the
//!   bodies run on jello's f64 CPU path, said once in the log ([`DeviceChoice`]).
//! - **Fixed steps.** Stepping runs in `FixedUpdate`, whose period the plugin sets to
//!   [`JelloSettings::time_step`]: the physics advances by h per fixed tick whatever the frame
//!   rate, as Bevy's fixed-timestep convention wants.
//! - **A body is a scene.** Each body is handed to jello as a one-object scene (the body, the
//!   grounds, gravity, h; [`scene`]), so jello validates it and applies `jello run`'s defaults:
//!   a body here and the same scene under `jello run` are the same model.
//! - **Non-send state.** jello's solvers are not `Send`; the simulations live in a non-send
//!   resource and their systems run on the main thread.
//! - **Drawing from jello's buffer.** A Newton body on Bevy's device is drawn without a CPU
//!   copy of positions: a compute pass writes its surface positions and normals from jello's
//!   device position buffer into the vertex buffer Bevy draws its `Mesh` from
//!   (see Drawing below). Other solvers and the CPU fallback still write
//!   the `Mesh` asset on the CPU after each step ([`surface`]): 24 bytes per surface vertex
//!   (position and normal, f32), and Bevy re-uploads the asset's vertex and index buffers.
//!
//! ## Drawing
//!
//! See the `gpu_surface` module (private) for the render-world pass: Bevy's mesh allocator is
//! asked for STORAGE usage on vertex slabs, and after `PrepareAssets` each frame a compute
//! shader rewrites each such body's slice of the slab. Per step the CPU still uploads the
//! solver's result into jello's buffer (16 bytes per tet-mesh vertex): Newton keeps its state in
//! f64 on the host.

pub mod body;
pub mod collider;
pub mod error;
mod gpu_surface;
pub mod scene;
pub mod settings;
pub mod stats;
pub mod surface;
mod systems;

pub use body::{BodyShape, SoftBody, SoftMaterial};
pub use collider::Ground;
pub use error::BevyJelloError;
pub use settings::{DeviceChoice, JelloSettings};
pub use stats::SoftBodyStats;
pub use systems::with_simulation;

use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshAllocatorSettings;
use bevy::render::render_resource::BufferUsages;
use bevy::render::{ExtractSchedule, Render, RenderApp, RenderSystems};

/// What a Bevy app needs in scope to add soft bodies.
pub mod prelude {
    pub use crate::{
        BodyShape, DeviceChoice, Ground, JelloPlugin, JelloSettings, SoftBody, SoftBodyStats,
        SoftMaterial,
    };
    pub use jello::material::MaterialModel;
    pub use jello::scene::SolverKind;
}

/// System sets of the plugin, for ordering a game's systems around it.
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JelloSystems {
    /// Builds new bodies (`PreUpdate`).
    Build,
    /// Steps every body by h (`FixedUpdate`).
    Step,
    /// Updates the drawn surfaces (`PostUpdate`).
    Draw,
}

/// Adds soft bodies to an app. Needs Bevy's asset, render and PBR plugins (`DefaultPlugins`).
#[derive(Default)]
pub struct JelloPlugin {
    /// Settings inserted as the [`JelloSettings`] resource.
    pub settings: JelloSettings,
}

impl Plugin for JelloPlugin {
    fn build(&self, app: &mut App) {
        app.insert_resource(self.settings.clone())
            .insert_resource(Time::<Fixed>::from_seconds(self.settings.time_step))
            .init_resource::<systems::FallbackReported>()
            .init_resource::<gpu_surface::GpuSurfaces>()
            .init_non_send::<systems::Bodies>()
            .add_systems(PreUpdate, systems::build_bodies.in_set(JelloSystems::Build))
            .add_systems(FixedUpdate, systems::step_bodies.in_set(JelloSystems::Step))
            .add_systems(
                PostUpdate,
                (systems::forget_bodies, systems::update_meshes)
                    .chain()
                    .in_set(JelloSystems::Draw),
            );
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            // The drawn surface is written into Bevy's vertex slabs by a compute shader.
            if let Some(mut mesh_settings) = render_app
                .world_mut()
                .get_resource_mut::<MeshAllocatorSettings>()
            {
                mesh_settings.extra_buffer_usages |= BufferUsages::STORAGE;
            }
            render_app
                .add_systems(ExtractSchedule, gpu_surface::extract_surfaces)
                .add_systems(
                    Render,
                    gpu_surface::write_surfaces.in_set(RenderSystems::PrepareResources),
                );
        }
    }
}
