//! Objects of a scene without IPC contact that pass through each other are reported: a
//! [`jello::problem::StateCheck::crossings`] record and a warning naming both objects, the step
//! and the time, once per pair, at the first step their surfaces cross (an exact check); none
//! with contact on, and no watch at all for one object. tests/cli/cli_crossings.rs checks the
//! line `jello run` prints and its exit status.

use crate::common;

use jello::contact::{intersecting_pairs, CollisionMesh, CrossingWatch};
use jello::scene::{BuiltScene, Scene};

/// contact_balls.toml (two balls thrown at each other) with `[contact] ipc` set to `ipc`.
fn balls(ipc: bool) -> BuiltScene {
    let path = common::bundled_scene_path("contact_balls.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("ipc = true"));
    Scene::parse(&path, &text.replace("ipc = true", &format!("ipc = {ipc}")))
        .unwrap()
        .build()
        .unwrap()
}

fn newton(built: &BuiltScene) -> jello::sim::Simulation {
    let params = jello::solver::NewtonParams {
        stop: built.config.stop,
        ..jello::solver::NewtonParams::default()
    };
    let solver = jello::solver::NewtonSolver::new(&built.model, params).unwrap();
    common::simulation(built, Box::new(solver))
}

/// Whether the two balls' surfaces cross at model positions `x` (exact check over all pairs
/// of faces of different balls, independent of the watch's bounding-box shortcut).
fn cross(m: &jello::problem::Model, x: &[f64]) -> bool {
    let mut mesh = CollisionMesh::from_model(m).unwrap();
    for b in &mut mesh.bodies {
        b.self_contact = false;
    }
    !intersecting_pairs(&mesh, bytemuck::cast_slice(x))
        .unwrap()
        .is_empty()
}

#[test]
fn balls_without_contact_pass_through_each_other_with_one_warning_naming_both() {
    let built = balls(false);
    assert!(built.model.contact.is_none());
    let mut sim = newton(&built);
    let mut reports = Vec::new();
    let mut crossed_at = None;
    // They meet after ~25 ms (5 steps of 5 ms) and are through each other by step 20.
    for step in 1..=20 {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step}: crossing is not a failure");
        if crossed_at.is_none() && cross(&sim.model, &sim.state.x) {
            crossed_at = Some((step, sim.state.t));
        }
        reports.push(r);
    }
    let (step, t) = crossed_at.expect("the balls must meet");
    // The record: at exactly that step, once.
    let records: Vec<(usize, &jello::contact::Crossing)> = reports
        .iter()
        .enumerate()
        .flat_map(|(k, r)| r.check.crossings.iter().map(move |c| (k + 1, c)))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let (at, c) = records[0];
    assert_eq!(at, step);
    assert_eq!(c.objects, [0, 1]);
    assert_eq!(c.names, ["left".to_string(), "right".to_string()]);
    assert!(c.triangle_pairs > 0);
    // The warning: one line naming both objects, the step and the time, at that step only.
    let lines: Vec<(usize, &String)> = reports
        .iter()
        .enumerate()
        .flat_map(|(k, r)| r.warnings.iter().map(move |w| (k + 1, w)))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let (at, w) = lines[0];
    assert_eq!(at, step);
    for want in [
        "`left` (0)".to_string(),
        "`right` (1)".to_string(),
        format!("step {step} "),
        format!("t = {t:.6} s"),
        "ipc = true".to_string(),
    ] {
        assert!(w.contains(&want), "`{want}` not in: {w}");
    }
    eprintln!("step {step}: {w}");
    // In stats.json (and Python's step dict, built from the same entry).
    let stats = jello::output::StepStats::new(step, t, reports[step - 1].clone());
    let json = serde_json::to_value(&stats).unwrap();
    assert_eq!(json["crossings"][0]["objects"], serde_json::json!([0, 1]));
    assert_eq!(
        json["crossings"][0]["names"],
        serde_json::json!(["left", "right"])
    );
}

#[test]
fn balls_with_contact_collide_and_nothing_is_reported() {
    let built = balls(true);
    assert!(CrossingWatch::new(&built.model).unwrap().is_none());
    let mut sim = newton(&built);
    // Through the impact (the balls meet after ~5 steps).
    for step in 1..=10 {
        let r = sim.step(false).unwrap();
        assert!(
            r.check.crossings.is_empty() && r.warnings.is_empty(),
            "step {step}"
        );
        assert!(!cross(&sim.model, &sim.state.x), "step {step}");
    }
}

#[test]
fn one_object_has_no_watch_and_separate_objects_report_nothing() {
    // One object: nothing to watch, so no check runs at all.
    let drop = common::bundled_scene("drop.toml");
    assert_eq!(drop.model.bodies.len(), 1);
    assert!(CrossingWatch::new(&drop.model).unwrap().is_none());
    // Three cubes falling together 5 mm apart without contact: watched, never reported.
    let path = common::bundled_scene_path("contact_stack.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let apart = Scene::parse(
        &path,
        &text
            .replace("ipc = true", "ipc = false")
            .replace("friction = 0.5", "")
            .replace("type = \"ground\"", "type = \"ground\"\nheight = -1.0")
            .replace("height = 0.0", ""),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut watch = CrossingWatch::new(&apart.model).unwrap().unwrap();
    let state = apart.model.initial_state(&apart.velocity);
    let apart_us = time_us(|| assert!(watch.check(&state.x).unwrap().is_empty()));
    let mut sim = newton(&apart);
    let mut step_ms = 0.0;
    for step in 1..=5 {
        let r = sim.step(false).unwrap();
        assert!(
            r.check.crossings.is_empty() && r.warnings.is_empty(),
            "step {step}"
        );
        step_ms += r.wall_ms / 5.0;
    }
    // The costly case: boxes that overlap, surfaces apart — a ball (r = 5 cm) inside a hoop's
    // hole (inner radius 8 cm): the grid and the exact tests run on every check.
    let path = common::bundled_scene_path("ball_in_hoop.toml");
    let inside = Scene::parse(
        &path,
        r#"[simulation]
h = 0.01
steps = 1
gravity = [0.0, 0.0, 0.0]

[[objects]]
name = "hoop"
mesh = { generator = "ring", center = [0.0, 0.0, 0.0], radius = 0.13, inner_radius = 0.08, height = 0.04, cells = [24, 2, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }

[[objects]]
name = "ball"
mesh = { generator = "ball", center = [0.0, 0.0, 0.0], radius = 0.05, resolution = 6 }
material = { model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }
"#,
    )
    .unwrap()
    .build()
    .unwrap();
    let mut watch = CrossingWatch::new(&inside.model).unwrap().unwrap();
    let x = inside.model.initial_state(&inside.velocity).x;
    let inside_us = time_us(|| assert!(watch.check(&x).unwrap().is_empty()));
    // Faces in the overlap: ring_net.toml's ball lowered into the links' reach (its bottom
    // 1 cm below their tops, clear of them), without contact.
    let path = common::bundled_scene_path("ring_net.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let old = "center = [0.0, 0.42, 0.0]";
    assert!(text.contains(old));
    let text = text
        .replace("ipc = true", "ipc = false")
        .replace(old, "center = [0.0, 0.38, 0.0]");
    let net = Scene::parse(&path, &text).unwrap().build().unwrap();
    let mut watch = CrossingWatch::new(&net.model).unwrap().unwrap();
    let x = net.model.initial_state(&net.velocity).x;
    let net_us = time_us(|| assert!(watch.check(&x).unwrap().is_empty()));
    eprintln!(
        "crossing check per step: {apart_us:.1} µs for three cubes apart ({} surface \
         triangles; a Newton step {step_ms:.1} ms), {inside_us:.1} µs for a ball inside a hoop \
         ({} triangles), {net_us:.1} µs for a ball dipping into a ring net ({} triangles)",
        apart.model.surface.triangles.len(),
        inside.model.surface.triangles.len(),
        net.model.surface.triangles.len()
    );
}

/// Mean wall time of `f` over enough calls to take ~0.2 s, µs.
fn time_us(mut f: impl FnMut()) -> f64 {
    let t = std::time::Instant::now();
    let mut n = 0;
    while t.elapsed().as_secs_f64() < 0.2 {
        f();
        n += 1;
    }
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}
