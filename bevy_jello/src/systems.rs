//! The plugin's systems: build bodies, step them in `FixedUpdate`, update what Bevy draws.

use crate::body::SoftBody;
use crate::collider::Ground;
use crate::gpu_surface::{GpuSurface, GpuSurfaces};
use crate::scene::{body_scene, build};
use crate::settings::{DeviceChoice, JelloSettings};
use crate::stats::SoftBodyStats;
use crate::surface::Surface;
use bevy::asset::RenderAssetUsages;
use bevy::camera::visibility::NoFrustumCulling;
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use jello::gpu::{Backend, BackendChoice, Device};
use jello::problem::DeviceElastic;
use jello::runner::{make_solver, setup_on, setup_with_device};
use jello::scene::{BuiltScene, SolverKind};
use jello::sim::{SimOptions, Simulation};
use std::sync::Arc;
use std::time::Instant;

/// One body's simulation and the mesh Bevy draws it with.
pub(crate) struct BodySim {
    sim: Simulation,
    surface: Surface,
    mesh: Handle<Mesh>,
    /// jello's device evaluator when the body is drawn from its position buffer
    /// ([`crate::gpu_surface`]); `None`: the mesh is updated on the CPU ([`crate::surface`]).
    elastic: Option<Arc<DeviceElastic>>,
    /// Set by a step, cleared when the mesh has been updated.
    moved: bool,
    /// Set when a step failed: the body stays where it was.
    stopped: bool,
}

/// Every body's simulation, by entity. A non-send resource: jello's solvers (`Box<dyn
/// StepSolver>`) are not `Send`, so the systems touching them run on the main thread.
#[derive(Default)]
pub(crate) struct Bodies {
    map: HashMap<Entity, BodySim>,
}

/// Whether the CPU fallback has been reported (once per app, not per body).
#[derive(Resource, Default)]
pub(crate) struct FallbackReported(bool);

/// Builds the simulation of every new [`SoftBody`]: its jello scene (the body, every
/// [`Ground`], the settings), on Bevy's render device or the CPU; adds its surface `Mesh3d` and
/// its [`SoftBodyStats`]. A body that jello refuses gets stats naming why (and one error line
/// in the log) and is not built again.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_bodies(
    mut commands: Commands,
    new: Query<(Entity, &SoftBody, &Transform, Option<&Name>), Without<SoftBodyStats>>,
    grounds: Query<&Ground>,
    settings: Res<JelloSettings>,
    render_device: Option<Res<RenderDevice>>,
    render_queue: Option<Res<RenderQueue>>,
    mut reported: ResMut<FallbackReported>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut gpu_surfaces: ResMut<GpuSurfaces>,
    mut bodies: NonSendMut<Bodies>,
) {
    let heights: Vec<f32> = grounds.iter().map(|g| g.height).collect();
    let render = render_device.zip(render_queue);
    for (entity, body, transform, name) in &new {
        let name = name.map_or_else(|| format!("{entity}"), |n| n.to_string());
        let made = body_scene(
            &name,
            body,
            transform.translation,
            &heights,
            settings.gravity,
            settings.time_step,
        )
        .and_then(|scene| build(&scene))
        .and_then(|built| {
            let device = match (&render, settings.device) {
                (Some((d, q)), DeviceChoice::RenderDevice) => Some((d, q)),
                _ => None,
            };
            let on_gpu = device.map(|(d, q)| {
                Device::from_wgpu(d.wgpu_device().clone(), (***q).clone())
                    .and_then(|device| on_render_device(&built, device))
            });
            match on_gpu {
                Some(Ok(made)) => Ok(made),
                other => {
                    let why = match other {
                        Some(Err(e)) => format!("Bevy's render device cannot run it: {e}"),
                        _ if settings.device == DeviceChoice::Cpu => {
                            "JelloSettings asks for it".into()
                        }
                        _ => "Bevy has no render device".into(),
                    };
                    if !reported.0 && settings.device != DeviceChoice::Cpu {
                        warn!("jello: soft bodies run on the CPU (f64): {why}");
                        reported.0 = true;
                    }
                    let setup = setup_on(&built, BackendChoice::cpu(Backend::Cpu, why), None)?;
                    Ok(Made {
                        sim: setup.sim,
                        device: "cpu".into(),
                        elastic: None,
                    })
                }
            }
        });
        let Made {
            sim,
            device,
            elastic,
        } = match made {
            Ok(m) => m,
            Err(e) => {
                error!("jello: soft body {name}: {e}");
                commands.entity(entity).insert(SoftBodyStats {
                    error: Some(e.to_string()),
                    ..default()
                });
                continue;
            }
        };
        let surface = Surface::of(&sim.model.mesh);
        // Drawn from jello's buffer, the asset keeps its rest shape and the render world alone
        // needs it; written on the CPU, the main world keeps it to write into.
        let usage = match elastic {
            Some(_) => RenderAssetUsages::RENDER_WORLD,
            None => RenderAssetUsages::MAIN_WORLD | RenderAssetUsages::RENDER_WORLD,
        };
        let mesh = meshes.add(surface.mesh(&sim.state.x, usage));
        if let (Some(e), Some((d, _))) = (&elastic, &render) {
            if let Some(positions) = e.positions_buffer() {
                // The rest shape, so that the first frames draw the body before it steps.
                if let Err(err) = e.sync_positions(&sim.state.x) {
                    warn!("jello: soft body {name}: uploading its rest shape: {err}");
                }
                gpu_surfaces.0.insert(
                    entity,
                    GpuSurface::new(d.wgpu_device(), &surface, mesh.id(), positions, e.origin()),
                );
            }
        }
        let stats = SoftBodyStats {
            solver: sim.solver_name(),
            device,
            vertices: sim.model.mesh.num_vertices(),
            tets: sim.model.mesh.num_tets(),
            min_j: 1.0,
            converged: true,
            ..default()
        };
        info!(
            "jello: soft body {name}: {} vertices, {} tets, {} on {}",
            stats.vertices, stats.tets, stats.solver, stats.device
        );
        // Positions are world space: the entity's transform is folded into the rest shape.
        commands.entity(entity).insert((
            Mesh3d(mesh.clone()),
            Transform::IDENTITY,
            NoFrustumCulling,
            stats,
        ));
        bodies.map.insert(
            entity,
            BodySim {
                sim,
                surface,
                mesh,
                elastic,
                moved: false,
                stopped: false,
            },
        );
    }
}

/// One implicit step of h for every body (runs in `FixedUpdate`, whose period the plugin set
/// to h). A failed step stops the body, with one error line and the reason in its stats.
pub(crate) fn step_bodies(
    mut bodies: NonSendMut<Bodies>,
    mut stats: Query<(&mut SoftBodyStats, Option<&Name>)>,
) {
    for (entity, body) in bodies.map.iter_mut() {
        if body.stopped {
            continue;
        }
        let Ok((mut s, name)) = stats.get_mut(*entity) else {
            continue;
        };
        let start = Instant::now();
        match body.sim.step(false) {
            Ok(r) => {
                s.steps += 1;
                s.time = body.sim.state.t;
                s.iterations = r.iterations;
                s.total_iterations += r.iterations;
                s.residual = r.residual;
                s.converged = r.converged;
                s.min_j = r.check.min_j;
                s.inverted = r.check.total_inverted();
                s.step_ms = start.elapsed().as_secs_f64() * 1e3;
                body.moved = true;
            }
            Err(e) => {
                stop(&mut s, body, *entity, name, e.to_string());
                continue;
            }
        }
        // The step's result into jello's device buffer, which the drawn surface reads.
        let synced = match &body.elastic {
            Some(elastic) => elastic.sync_positions(&body.sim.state.x),
            None => Ok(()),
        };
        if let Err(e) = synced {
            stop(&mut s, body, *entity, name, e.to_string());
        }
    }
}

/// Stops a body whose step failed: one error line, the reason in its stats.
fn stop(s: &mut SoftBodyStats, body: &mut BodySim, entity: Entity, name: Option<&Name>, e: String) {
    let name = name.map_or_else(|| format!("{entity}"), |n| n.to_string());
    error!(
        "jello: soft body {name} stopped at t = {:.3} s: {e}",
        s.time
    );
    s.error = Some(e);
    body.stopped = true;
}

/// Writes the moved bodies' surfaces into their meshes (see [`crate::surface`] for what this
/// copies).
pub(crate) fn update_meshes(
    mut bodies: NonSendMut<Bodies>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut stats: Query<&mut SoftBodyStats>,
) {
    for (entity, body) in bodies.map.iter_mut() {
        if !std::mem::take(&mut body.moved) || body.elastic.is_some() {
            continue;
        }
        let start = Instant::now();
        if let Some(mut mesh) = meshes.get_mut(&body.mesh) {
            body.surface.update(&mut mesh, &body.sim.state.x);
        }
        if let Ok(mut s) = stats.get_mut(*entity) {
            s.mesh_update_ms = start.elapsed().as_secs_f64() * 1e3;
        }
    }
}

/// A body's simulation, built.
struct Made {
    sim: Simulation,
    /// Where its kernels run (the adapter, or "cpu").
    device: String,
    /// jello's device evaluator, kept to draw from its position buffer.
    elastic: Option<Arc<DeviceElastic>>,
}

/// The simulation of `built` on `device` (adopted from Bevy). Newton is built here as
/// `examples/embed.rs` does, keeping its [`DeviceElastic`] to draw from its position buffer;
/// every other solver through `jello::runner::setup_with_device` (drawn through the CPU).
fn on_render_device(built: &BuiltScene, device: Device) -> jello::Result<Made> {
    let name = device.info().to_string();
    if built.config.solver == SolverKind::Newton && !built.config.auto_solver {
        let elastic = Arc::new(DeviceElastic::on_device(&built.model, device)?);
        let solver = make_solver(&built.config, &built.model, None)?;
        let state = built.model.initial_state(&built.velocity);
        let options = SimOptions {
            elastic: Some(Box::new(elastic.clone())),
            ..SimOptions::default()
        };
        let sim =
            Simulation::with_options(built.model.clone(), state, built.config.h, solver, options)?;
        return Ok(Made {
            sim,
            device: name,
            elastic: Some(elastic),
        });
    }
    let setup = setup_with_device(built, device, None)?;
    Ok(Made {
        sim: setup.sim,
        device: name,
        elastic: None,
    })
}

/// Drops the simulation of a body whose [`SoftBody`] was removed or despawned.
pub(crate) fn forget_bodies(
    mut removed: RemovedComponents<SoftBody>,
    mut bodies: NonSendMut<Bodies>,
    mut gpu_surfaces: ResMut<GpuSurfaces>,
) {
    for entity in removed.read() {
        bodies.map.remove(&entity);
        gpu_surfaces.0.remove(&entity);
    }
}

/// Read access to a body's jello simulation, for tests and tools (e.g. comparing with `jello
/// run`). Reading positions this way costs a copy only when the caller makes one.
pub fn with_simulation<R>(
    world: &World,
    entity: Entity,
    f: impl FnOnce(&Simulation) -> R,
) -> Option<R> {
    let bodies = world.get_non_send::<Bodies>()?;
    bodies.map.get(&entity).map(|b| f(&b.sim))
}
