//! A headless Bevy app (no window) drops jello's `drop` scene — a soft ball onto the ground —
//! as a [`SoftBody`] on Bevy's own render device, and checks that it comes to rest on the
//! ground, never inverts an element, and agrees with jello's own run of the same scene file.
//!
//! GPU test: it FAILS when Bevy finds no adapter (or the body falls back to the CPU) unless
//! `JELLO_SKIP_GPU_TESTS=1`. In CI it runs on lavapipe (`WGPU_BACKEND=vulkan`).

use bevy::app::PluginsState;
use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshAllocator;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::RenderApp;
use bevy::time::TimeUpdateStrategy;
use bevy::window::ExitCondition;
use bevy_jello::prelude::*;
use jello::gpu::Backend;
use jello::scene::{MeshSpec, ObstacleSpec, Scene};
use std::path::Path;
use std::time::{Duration, Instant};

/// Steps of h = 0.01 s: 1.5 s, the fall (≈ 0.13 s), the impact and the settling.
const STEPS: usize = 150;

fn skip_gpu() -> bool {
    std::env::var("JELLO_SKIP_GPU_TESTS").is_ok_and(|v| v == "1")
}

/// The scene's ball as a Bevy body, from the scene file's own values.
fn body_of(scene: &Scene) -> (SoftBody, Vec3, f32) {
    let object = &scene.spec.objects[0];
    let MeshSpec {
        generator,
        center: Some(c),
        radius: Some(r),
        resolution,
        ..
    } = &object.mesh
    else {
        panic!("drop.toml's object is not a generated ball");
    };
    assert_eq!(generator.as_deref(), Some("ball"));
    let m = &object.material;
    let material = SoftMaterial {
        model: MaterialModel::from_name(&m.model).expect("a material model jello knows"),
        youngs_modulus: m.youngs_modulus.expect("E"),
        poisson_ratio: m.poisson_ratio.expect("ν"),
        density: m.density,
    };
    let v = object.velocity;
    let body = SoftBody::ball(*r as f32, resolution.unwrap_or(8))
        .with_material(material)
        .with_velocity(Vec3::new(v[0] as f32, v[1] as f32, v[2] as f32));
    let ground = match scene.spec.obstacles.as_slice() {
        [ObstacleSpec::Ground { height }] => *height as f32,
        _ => panic!("drop.toml has one ground"),
    };
    (
        body,
        Vec3::new(c[0] as f32, c[1] as f32, c[2] as f32),
        ground,
    )
}

/// A headless app: Bevy's default plugins without a window, the jello plugin, and a clock that
/// advances by exactly h per update so that every update runs one fixed step.
fn headless_app(settings: JelloSettings) -> App {
    let h = Duration::from_secs_f64(settings.time_step);
    let mut app = App::new();
    app.add_plugins((
        DefaultPlugins.set(WindowPlugin {
            primary_window: None,
            exit_condition: ExitCondition::DontExit,
            close_when_requested: false,
            ..default()
        }),
        JelloPlugin { settings },
    ))
    .insert_resource(TimeUpdateStrategy::ManualDuration(h));
    // What `App::run` does before its first update: wait for the renderer, then finish.
    while app.plugins_state() == PluginsState::Adding {
        bevy::tasks::tick_global_task_pools_on_main_thread();
    }
    app.finish();
    app.cleanup();
    app
}

#[test]
fn a_dropped_ball_comes_to_rest_on_the_ground_as_jello_run_has_it() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes/drop.toml");
    let scene = Scene::load(&path).unwrap();
    let (body, at, ground) = body_of(&scene);
    let s = &scene.spec.simulation;
    let g = s.gravity;
    let settings = JelloSettings {
        time_step: s.h,
        gravity: Vec3::new(g[0] as f32, g[1] as f32, g[2] as f32),
        device: DeviceChoice::RenderDevice,
    };

    let mut app = headless_app(settings);
    if app.world().get_resource::<RenderDevice>().is_none() {
        assert!(
            skip_gpu(),
            "Bevy found no GPU adapter (JELLO_SKIP_GPU_TESTS=1 skips)"
        );
        return;
    }
    app.world_mut().spawn(Ground { height: ground });
    let ball = app
        .world_mut()
        .spawn((Name::new("ball"), body, Transform::from_translation(at)))
        .id();

    let start = Instant::now();
    let mut worst_j = f64::INFINITY;
    let mut updates = 0;
    loop {
        app.update();
        updates += 1;
        let stats = app.world().get::<SoftBodyStats>(ball).cloned();
        if let Some(st) = &stats {
            assert!(st.error.is_none(), "the body stopped: {:?}", st.error);
            if st.steps > 0 {
                worst_j = worst_j.min(st.min_j);
                assert_eq!(st.inverted, 0, "inverted elements at step {}", st.steps);
            }
        }
        if stats.is_some_and(|st| st.steps >= STEPS) {
            break;
        }
        assert!(
            updates < 2 * STEPS,
            "{updates} updates ran fewer than {STEPS} fixed steps"
        );
    }
    let wall = start.elapsed().as_secs_f64();
    let stats = app.world().get::<SoftBodyStats>(ball).unwrap().clone();
    assert_eq!(stats.steps, STEPS, "one fixed step per update of h");
    assert_ne!(
        stats.device, "cpu",
        "the body must run on Bevy's render device"
    );
    eprintln!(
        "bevy: {STEPS} steps on {} in {wall:.1} s ({:.1} ms/step, {} iterations; last mesh \
         update {:.3} ms), min J {worst_j:.3}",
        stats.device,
        1e3 * wall / STEPS as f64,
        stats.total_iterations,
        stats.mesh_update_ms
    );
    assert!(worst_j > 0.0);

    // What Bevy draws: the vertex buffer the mesh lives in holds this step's surface, written
    // there on the GPU from jello's buffer (the Mesh asset itself stayed at rest).
    let (x_now, surface) = bevy_jello::with_simulation(app.world(), ball, |sim| {
        (
            sim.state.x.clone(),
            bevy_jello::surface::Surface::of(&sim.model.mesh),
        )
    })
    .unwrap();
    let drawn = drawn_vertices(&app, ball);
    let (positions, normals) = surface.positions_and_normals(&x_now);
    assert_eq!(
        drawn.len(),
        positions.len(),
        "one drawn vertex per surface vertex"
    );
    let (mut dp, mut dn) = (0.0f32, 0.0f32);
    for (d, (p, n)) in drawn.iter().zip(positions.iter().zip(&normals)) {
        dp = dp.max((Vec3::from_slice(&d[..3]) - Vec3::from_array(*p)).length());
        dn = dn.max((Vec3::from_slice(&d[3..]) - Vec3::from_array(*n)).length());
    }
    eprintln!("drawn vs jello's state: positions {dp:.2e} m, normals {dn:.2e}");
    // Positions: f32 rounding of coordinates below 1 m (jello's buffer holds them relative to
    // the rest centroid, the draw adds it back): a few 1e-7 m. Normals: f32 cross products of
    // edges ~2 cm long against the f32 CPU ones, ~1e-6 relative; 1e-4 leaves room and still
    // catches a wrong vertex or winding (an error of order 1).
    assert!(dp < 1e-5, "drawn positions off by {dp} m");
    assert!(dn < 1e-4, "drawn normals off by {dn}");

    let (x, v) = bevy_jello::with_simulation(app.world(), ball, |sim| {
        (sim.state.x.clone(), sim.state.v.clone())
    })
    .unwrap();

    // jello's own run of the same scene file: `jello run`'s choice on a software adapter, the
    // f64 CPU path (Backend::Auto never picks lavapipe), Newton.
    let built = scene.build().unwrap();
    let mut reference = jello::runner::setup(&built, Backend::Cpu, None)
        .unwrap()
        .sim;
    for _ in 0..STEPS {
        let r = reference.step(false).unwrap();
        assert!(r.check.is_clean());
    }
    let xr = &reference.state.x;
    assert_eq!(x.len(), xr.len(), "the same mesh");
    let (lo, hi) = reference.model.mesh.bounding_box().unwrap();
    let diagonal = (0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>().sqrt();
    let deviation = x
        .chunks(3)
        .zip(xr.chunks(3))
        .map(|(a, b)| (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f64>().sqrt())
        .fold(0.0, f64::max)
        / diagonal;

    // At rest: the impact speed is √(v₀² + 2 g Δy) ≈ 2.2 m/s; every vertex now moves at under
    // 1% of it.
    let vmax = v
        .chunks(3)
        .map(|c| (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt())
        .fold(0.0, f64::max);
    // On the ground: every vertex above it, and the lowest within 1% of the radius of it (a
    // ball still in flight or bouncing would be far higher).
    let lowest = x.chunks(3).map(|c| c[1]).fold(f64::INFINITY, f64::min);
    let radius = match &scene.spec.objects[0].mesh.radius {
        Some(r) => *r,
        None => unreachable!(),
    };
    eprintln!(
        "rest: max speed {vmax:.2e} m/s, lowest vertex {lowest:.3e} m above the ground; \
         deviation from jello's CPU run {deviation:.2e} of the diagonal"
    );
    assert!(vmax < 0.022, "still moving: {vmax} m/s");
    assert!(lowest > ground as f64, "below the ground: {lowest}");
    assert!(
        lowest < ground as f64 + 0.01 * radius,
        "not on the ground: {lowest}"
    );
    // The same solver on both sides, its element work in f32 on the device here and in f64
    // there: in lockstep the two stay within 1e-5 of the diagonal per step (tests/gpu/
    // gpu_compare.rs, drop included). Run apart, the per-step differences can at most add up
    // (implicit Euler damps rather than amplifies them), so STEPS × 1e-5 bounds the end.
    let bound = STEPS as f64 * 1e-5;
    assert!(
        deviation < bound,
        "deviation {deviation:.3e} ≥ {bound:.1e} of the diagonal"
    );
}

/// The vertices (position, normal) of `body`'s mesh as Bevy's vertex buffer holds them, read back
/// from the render world.
fn drawn_vertices(app: &App, body: Entity) -> Vec<[f32; 6]> {
    let mesh = app
        .world()
        .get::<Mesh3d>(body)
        .expect("the body's mesh")
        .id();
    let render = app.sub_app(RenderApp).world();
    let slice = render
        .resource::<MeshAllocator>()
        .mesh_vertex_slice(&mesh)
        .expect("the mesh is placed in a vertex slab");
    let device = render.resource::<RenderDevice>().wgpu_device().clone();
    let queue = render.resource::<RenderQueue>();
    let stride = 24u64;
    let bytes = stride * u64::from(slice.range.end - slice.range.start);
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("drawn vertices"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(
        slice.buffer,
        stride * u64::from(slice.range.start),
        &staging,
        0,
        bytes,
    );
    let submission = queue.submit([encoder.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |r| r.expect("map the readback"));
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout: Some(Duration::from_secs(60)),
        })
        .expect("readback");
    let view = staging.get_mapped_range(..).expect("mapped");
    let floats: &[f32] = bytemuck::cast_slice(&view);
    floats
        .chunks_exact(6)
        .map(|c| c.try_into().unwrap())
        .collect()
}
