//! Embedding jello in a host wgpu application.
//!
//! The host creates its own `wgpu::Device`/`Queue`, hands clones to jello (which never owns or
//! destroys them), steps a scene, and draws the soft body straight from jello's GPU position
//! buffer (bound as a vertex buffer — no CPU copy of positions) into an offscreen texture that is
//! saved as a PNG.
//!
//! Run: `cargo run --release --example embed -- [SCENE] [OUT.png] [STEPS]`
//! (defaults: assets/scenes/drop.toml, embed.png, 40).

use anyhow::{Context, Result};
use jello::problem::DeviceElastic;
use jello::render::{Camera, GroundPlane, SurfaceDraw, SurfaceRenderer, UpAxis};
use jello::runner::make_solver;
use jello::scene::Scene;
use jello::sim::{SimOptions, Simulation};
use std::sync::Arc;
use wgpu::util::DeviceExt;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let scene_path = args
        .next()
        .unwrap_or_else(|| "assets/scenes/drop.toml".into());
    let out = args.next().unwrap_or_else(|| "embed.png".into());
    let steps: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(40);

    // --- The host's own device (what a real application already has). ---
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .context("no GPU adapter")?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("host device"),
        ..Default::default()
    }))?;
    println!("host adapter: {}", adapter.get_info().name);

    // --- jello adopts the host's device for its kernels. ---
    let built = Scene::load(scene_path.as_ref())?.build()?;
    let jdev = jello::gpu::Device::from_wgpu(device.clone(), queue.clone())?;
    let elastic = Arc::new(DeviceElastic::on_device(&built.model, jdev)?);
    let solver = make_solver(&built.config, &built.model, None)?;
    let state = built.model.initial_state(&built.velocity);
    let options = SimOptions {
        elastic: Some(Box::new(elastic.clone())),
        ..SimOptions::default()
    };
    let mut sim =
        Simulation::with_options(built.model.clone(), state, built.config.h, solver, options)?;
    for step in 1..=steps {
        let r = sim.step(false)?;
        if step % 10 == 0 {
            println!(
                "step {step}: {} iterations, residual {:.2e}",
                r.iterations, r.residual
            );
        }
    }
    elastic.sync_positions(&sim.state.x)?;

    // --- The host draws from jello's position buffer. ---
    let positions = elastic
        .positions_buffer()
        .context("the evaluator is not on a GPU")?;
    let surface = jello::mesh::surface(&sim.model.mesh);
    let indices = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("surface indices"),
        contents: bytemuck::cast_slice(&surface.triangles),
        usage: wgpu::BufferUsages::INDEX,
    });
    // Device positions are relative to `origin`: frame the camera in that frame.
    let o = elastic.origin();
    let (lo, hi) = sim.model.mesh.bounding_box().context("empty mesh")?;
    let lo = [
        (lo[0] - o[0]) as f32 - 0.1,
        (-o[1]) as f32,
        (lo[2] - o[2]) as f32 - 0.1,
    ];
    let hi = [
        (hi[0] - o[0]) as f32 + 0.1,
        (hi[1] - o[1]) as f32,
        (hi[2] - o[2]) as f32 + 0.1,
    ];
    let mut renderer = SurfaceRenderer::new(&device, (800, 600))?;
    renderer.set_ground(Some(GroundPlane::under_box(lo, hi, UpAxis::Y)))?;
    let camera = Camera::framing(lo, hi, renderer.aspect())?;
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("host frame"),
    });
    renderer.record(
        &device,
        &mut encoder,
        &[SurfaceDraw {
            positions: &positions,
            indices: &indices,
            index_count: 3 * surface.triangles.len() as u32,
            colour: [0.25, 0.55, 0.95],
        }],
        &camera,
    )?;
    queue.submit([encoder.finish()]);
    let image = renderer.read_rgba(&device, &queue)?;
    jello::render::write_png(out.as_ref(), &image)?;
    println!("wrote {out} ({}×{})", image.width, image.height);
    Ok(())
}
