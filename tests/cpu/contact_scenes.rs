//! The bundled IPC contact scenes (assets/scenes/contact_*.toml): each runs on projected Newton
//! with every step converged and intersection-free (an exact triangle–triangle check over all
//! surface pairs after each step), and does what its comment says.

use crate::common;

use jello::contact::check_intersection_free;
use jello::problem::Model;

/// The scene's run: (model, states after each step). Panics when a step fails or a state
/// intersects or touches.
fn run(name: &str, steps: usize) -> (Model, Vec<Vec<f64>>) {
    run_built(name, &common::bundled_scene(name), steps)
}

/// [`run`] on a built scene.
fn run_built(name: &str, built: &jello::scene::BuiltScene, steps: usize) -> (Model, Vec<Vec<f64>>) {
    run_until(name, built, steps, |_, _| false, &mut |_, _, _| {})
}

/// [`run_built`] that stops early, after the first step whose states so far satisfy `done`
/// (a test's final assertion, where what follows that step cannot undo it), and hands
/// `each` every step's index, the simulation after it and the state it started from.
fn run_until(
    name: &str,
    built: &jello::scene::BuiltScene,
    steps: usize,
    done: impl Fn(&Model, &[Vec<f64>]) -> bool,
    each: &mut dyn FnMut(usize, &jello::sim::Simulation, &jello::problem::State),
) -> (Model, Vec<Vec<f64>>) {
    let m = built.model.clone();
    assert!(m.contact.is_some(), "{name}: IPC contact is on");
    let defaults = jello::solver::NewtonParams::default();
    let params = jello::solver::NewtonParams {
        stop: built.config.stop,
        max_iterations: built
            .config
            .max_iterations
            .unwrap_or(defaults.max_iterations),
        ..defaults
    };
    let solver = jello::solver::NewtonSolver::new(&m, params).unwrap();
    let mut sim = common::simulation(built, Box::new(solver));
    let ipc = m.contact.clone().unwrap();
    let mut states = Vec::new();
    let (mut closest, mut iterations) = (f64::INFINITY, 0);
    for step in 0..steps {
        let start = sim.state.clone();
        let r = sim.step(false).unwrap();
        assert!(
            r.converged,
            "{name}: step {step} did not converge: {:?}",
            r.failure
        );
        each(step, &sim, &start);
        iterations += r.iterations;
        let xs = ipc.positions(&sim.state.x);
        check_intersection_free(&ipc.mesh, &xs)
            .unwrap_or_else(|e| panic!("{name}: step {step}: {e}"));
        let pairs = ipc.active_pairs(&xs).unwrap();
        let d = ipc.min_distance_sq(&pairs, &xs).sqrt();
        assert!(d > 0.0, "{name}: step {step}: a pair touches");
        closest = closest.min(d);
        states.push(sim.state.x.clone());
        if done(&m, &states) {
            break;
        }
    }
    let steps = states.len();
    eprintln!(
        "{name}: {steps} steps, {:.1} Newton iterations per step, closest pair {closest:.3e} m \
         (d̂ {:.3e} m)",
        iterations as f64 / steps as f64,
        ipc.dhat
    );
    (m, states)
}

/// Mass-weighted mean x-velocity of body `b` between two states `h` apart.
fn centre(m: &Model, x: &[f64], b: usize, axis: usize) -> f64 {
    let r = m.bodies[b].vertices.clone();
    let mass: f64 = r.clone().map(|v| m.mass[v]).sum();
    r.map(|v| m.mass[v] * x[3 * v + axis]).sum::<f64>() / mass
}

#[test]
fn balls_collide_head_on_and_bounce_apart() {
    let built = common::bundled_scene("contact_balls.toml");
    let steps = built.config.steps;
    let h = built.config.h;
    let (m, states) = run("contact_balls.toml", steps);
    let n = states.len();
    let v = |b: usize| (centre(&m, &states[n - 1], b, 0) - centre(&m, &states[n - 2], b, 0)) / h;
    let (vl, vr) = (v(0), v(1));
    eprintln!("after the collision: left ball {vl:.3} m/s, right ball {vr:.3} m/s (x)");
    assert!(
        vl < -0.5 && vr > 0.5,
        "the balls must bounce apart: {vl}, {vr}"
    );
}

#[test]
fn a_stack_of_cubes_settles_without_interpenetrating_and_stands_by_friction() {
    // With μ = 0.5 (the bundled scene) the stack must settle and stand: each cube's centre
    // moves less than 1 mm sideways (measured 0.62 mm: the Kuhn tetrahedra make a squashed cube
    // shear along its diagonal). Without friction the same squash has nothing to hold it and
    // the cubes must slide off each other by more than 5 mm (measured 3.3 cm after 0.5 s): the
    // check that the lateral bound can fail.
    let name = "contact_stack.toml";
    let built = common::bundled_scene(name);
    let steps = built.config.steps;
    let text = std::fs::read_to_string(common::bundled_scene_path(name)).unwrap();
    assert!(text.contains("friction = 0.5"));
    let frictionless = jello::scene::Scene::parse(
        &common::bundled_scene_path(name),
        &text.replace("friction = 0.5", "friction = 0.0"),
    )
    .unwrap()
    .build()
    .unwrap();
    // The largest sideways move of a cube's centre from `start` to `x`.
    let slide_of = |m: &Model, start: &[f64], x: &[f64]| {
        (0..3)
            .map(|c| {
                let dx = centre(m, x, c, 0) - centre(m, start, c, 0);
                let dz = centre(m, x, c, 2) - centre(m, start, c, 2);
                dx.hypot(dz)
            })
            .fold(0.0, f64::max)
    };
    let mut lateral = Vec::new();
    for (what, b) in [("μ = 0.5", &built), ("μ = 0", &frictionless)] {
        let (m, states) = run_built(name, b, steps);
        let last = states.last().unwrap();
        let start = &b.model.initial_state(&b.velocity).x;
        // Resting: each cube's centre above the one below it by about a cube's height (0.1 m,
        // squashed a little under the weight above) and the whole stack still.
        let y: Vec<f64> = (0..3).map(|c| centre(&m, last, c, 1)).collect();
        let before = &states[states.len() - 2];
        let speed = (0..3)
            .map(|c| (centre(&m, last, c, 1) - centre(&m, before, c, 1)).abs() / b.config.h)
            .fold(0.0, f64::max);
        let slide = slide_of(&m, start, last);
        eprintln!(
            "{what}: centres {y:?} m, largest vertical speed {speed:.3e} m/s, largest sideways \
             move {slide:.3e} m"
        );
        lateral.push(slide);
        if what == "μ = 0" {
            continue;
        }
        for c in 0..2 {
            let gap = y[c + 1] - y[c];
            assert!(
                gap > 0.09 && gap < 0.102,
                "cubes {c} and {}: centres {gap} m apart",
                c + 1
            );
        }
        assert!(
            y[0] > 0.045 && y[0] < 0.052,
            "the bottom cube rests on the ground: {}",
            y[0]
        );
        assert!(speed < 0.05, "the stack has not settled: {speed} m/s");
    }
    assert!(
        lateral[0] < 1e-3,
        "with friction the stack must stand: a cube moved {} m sideways",
        lateral[0]
    );
    assert!(
        lateral[1] > 5e-3,
        "without friction the squashed cubes must slide: at most {} m sideways",
        lateral[1]
    );
}

/// Builds the scene text `toml` (as if read from `ipc.toml`); the error line when it fails.
fn build_err(toml: &str) -> String {
    let scene = jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), toml).unwrap();
    let e = scene.build().map(|_| ()).unwrap_err().to_string();
    eprintln!("{e}");
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

const TWO_CUBES: &str = r#"
[simulation]
h = 0.01
steps = 1
gravity = [0.0, 0.0, 0.0]
[[objects]]
name = "left"
mesh = { generator = "box", min = [-0.2, 0.0, 0.0], max = [LEFT_MAX, 0.1, 0.1], cells = [1, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }
[[objects]]
name = "right"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [0.2, 0.1, 0.1], cells = [1, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }
"#;

#[test]
fn contact_scene_errors_name_the_key_and_the_objects() {
    let scene = |left_max: &str, contact: &str| {
        format!(
            "{}\n[contact]\n{contact}\n",
            TWO_CUBES.replace("LEFT_MAX", left_max)
        )
    };
    // Overlapping objects: refused, naming both.
    let e = build_err(&scene("0.05", "ipc = true"));
    assert!(e.contains("ipc.toml") && e.contains("contact.ipc"), "{e}");
    assert!(
        e.contains("`left`") && e.contains("`right`") && e.contains("intersect"),
        "{e}"
    );
    // Without IPC the same scene is accepted (objects pass through each other by design).
    let text = scene("0.05", "ipc = false");
    let s = jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), &text).unwrap();
    assert!(s.build().unwrap().model.contact.is_none());
    // Impossible values.
    for (contact, key) in [
        ("ipc = true\ndhat = 0.0", "contact.dhat"),
        ("ipc = true\ndhat = -1e-3", "contact.dhat"),
        ("ipc = true\ndhat_relative = -1.0", "contact.dhat_relative"),
        (
            "ipc = true\ndhat = 1e-3\ndhat_relative = 1e-3",
            "contact.dhat_relative",
        ),
        ("ipc = true\nipc_kappa = -5.0", "contact.ipc_kappa"),
        ("ipc_kappa = 1e9", "contact.ipc_kappa"),
        ("friction = 0.3", "contact.friction"),
        ("ipc = true\nfriction = -0.3", "contact.friction"),
    ] {
        let e = build_err_or_parse(&scene("-0.01", contact));
        assert!(e.contains(key), "`{contact}` must name {key}: {e}");
    }
    // A solver without IPC contact refuses the model (the L-BFGS family takes it:
    // tests/cpu/lbfgs_ipc.rs).
    let text = scene("-0.01", "ipc = true");
    let built = jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), &text)
        .unwrap()
        .build()
        .unwrap();
    let mut config = built.config.clone();
    config.solver = "admm".parse().unwrap();
    let e = jello::runner::make_solver(&config, &built.model, None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert!(
        e.contains("contact.ipc") && e.contains("newton") && e.contains("admm"),
        "{e}"
    );
}

/// The error line of a scene text that fails to parse or to build.
fn build_err_or_parse(toml: &str) -> String {
    match jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), toml) {
        Err(e) => {
            let e = e.to_string();
            eprintln!("{e}");
            assert!(!e.contains('\n'), "one line: {e}");
            e
        }
        Ok(_) => build_err(toml),
    }
}

#[test]
fn a_twisted_bar_coils_into_itself_without_passing_through() {
    let built = common::bundled_scene("contact_twist.toml");
    let steps = built.config.steps;
    let (m, states) = run("contact_twist.toml", steps);
    // Self-contact happened: at some step a pair of the bar's own surface is closer than d̂
    // (counted over pairs that are not neighbours on the rest surface, which the broad phase
    // excludes anyway).
    let ipc = m.contact.clone().unwrap();
    let touching = states
        .iter()
        .filter(|x| !ipc.active_pairs(&ipc.positions(x)).unwrap().is_empty())
        .count();
    eprintln!("{touching} of {steps} steps have self-contact pairs within d̂");
    assert!(
        touching > 5,
        "the bar never touched itself ({touching} steps)"
    );
}

#[test]
fn a_soft_ball_wedges_in_a_rigid_hoop_held_by_friction_and_slips_through_without() {
    // The ball (r = 0.1 m) falls into a hoop whose hole is 0.08 m in radius: with friction
    // (μ = 0.5) it must end wedged in the hole (centre within the hoop's top half-height band,
    // barely moving); without friction the same drop must squeeze through and fall away.
    let name = "contact_hoop.toml";
    let built = common::bundled_scene(name);
    let h = built.config.h;
    let steps = 45;
    let text = std::fs::read_to_string(common::bundled_scene_path(name)).unwrap();
    assert!(text.contains("friction = 0.5"));
    // The frictionless ball's squeeze through the hole takes Newton 280 iterations in one step
    // (measured): a larger cap for that run.
    let frictionless = jello::scene::Scene::parse(
        &common::bundled_scene_path(name),
        &text
            .replace("friction = 0.5", "friction = 0.0")
            .replace("tolerance = 1e-7", "tolerance = 1e-7\nmax_iterations = 400"),
    )
    .unwrap()
    .build()
    .unwrap();
    // The frictionless run stops at the first step where the slip-through assertion below
    // already holds with the whole ball clear of the hoop (below its lowest vertex by more
    // than d̂) and falling: from there only gravity and the ball's own elasticity act on it,
    // which leave its centre of mass in free fall (internal forces sum to zero), so the
    // centre only falls faster and the assertion holds at every later step too. A ball that
    // stays wedged or stuck in the hole never meets the stop and is checked after 45 steps.
    let dhat = built.model.contact.as_ref().unwrap().dhat;
    let fell_through = |m: &Model, states: &[Vec<f64>]| {
        let n = states.len();
        if n < 2 {
            return false;
        }
        let (x, y) = (&states[n - 1], centre(m, &states[n - 1], 0, 1));
        let falling = centre(m, &states[n - 2], 0, 1) - y;
        let ball_top = m.bodies[0]
            .vertices
            .clone()
            .map(|v| x[3 * v + 1])
            .fold(f64::NEG_INFINITY, f64::max);
        let hoop_bottom = m.bodies[1]
            .vertices
            .clone()
            .map(|v| x[3 * v + 1])
            .fold(f64::INFINITY, f64::min);
        y < -0.1 && falling / h > 1.0 && ball_top < hoop_bottom - dhat
    };
    // The μ = 0.5 run also checks the frames' residual problem at every contact step
    // ([`frames_residual_is_the_step_newton_solved`]).
    let mut checked = 0;
    let mut rest = Vec::new();
    for (what, b, early) in [("μ = 0.5", &built, false), ("μ = 0", &frictionless, true)] {
        let mut each =
            |step: usize, sim: &jello::sim::Simulation, start: &jello::problem::State| {
                if !early && frames_residual_is_the_step_newton_solved(step, sim, start) {
                    checked += 1;
                }
            };
        let (m, states) = run_until(
            name,
            b,
            steps,
            |m, x| early && fell_through(m, x),
            &mut each,
        );
        let n = states.len();
        let y = centre(&m, &states[n - 1], 0, 1);
        let speed = (y - centre(&m, &states[n - 2], 0, 1)).abs() / h;
        eprintln!("{what}: ball centre at y = {y:.4} m after {n} steps, moving {speed:.2e} m/s");
        rest.push((y, speed));
    }
    // Wedged: the centre between the hoop's mid-plane and a ball radius above its top (0.02 m).
    let (y, speed) = rest[0];
    assert!(
        y > 0.0 && y < 0.12,
        "with friction the ball must wedge: y = {y}"
    );
    assert!(
        speed < 0.1,
        "with friction the ball must come to rest: {speed} m/s"
    );
    let (y, speed) = rest[1];
    assert!(
        y < -0.1 && speed > 1.0,
        "without friction the ball must slip through: y = {y}, {speed} m/s"
    );
    assert!(checked > 0, "no contact step was checked");
}

#[test]
fn ipc_scenes_default_to_the_tight_stop() {
    // Without a `tolerance`, a scene with IPC contact stops at CN 1e-7 (1e-5 freezes sliding
    // friction and stops millimetres from contact minimisers); without contact, 1e-5.
    let stop = |contact: &str| {
        let text = format!(
            "{}\n[contact]\n{contact}\n",
            TWO_CUBES.replace("LEFT_MAX", "-0.01")
        );
        jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), &text)
            .unwrap()
            .build()
            .unwrap()
            .config
            .stop
    };
    use jello::solver::StopRule;
    assert_eq!(stop("ipc = true"), StopRule::Cn { eps: 1e-7 });
    assert_eq!(stop("ipc = false"), StopRule::Cn { eps: 1e-5 });
    let text = format!(
        "{}\n[solver]\ntolerance = 1e-6\n[contact]\nipc = true\n",
        TWO_CUBES.replace("LEFT_MAX", "-0.01")
    );
    let built = jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), &text)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(built.config.stop, StopRule::Cn { eps: 1e-6 });
}

#[test]
fn a_ball_thrown_into_a_mesh_cup_stays_inside_and_settles_on_its_bottom() {
    // The cup is a triangle-mesh obstacle read from assets/meshes/cup.obj (radius 0.14 m,
    // height 0.2 m, bottom at y = 0). Every vertex of the ball stays inside the cup's wall and
    // above its bottom at every step (the run also certifies each step intersection-free
    // against the cup's triangles), and the ball ends resting on the bottom.
    let name = "contact_cup.toml";
    let built = common::bundled_scene(name);
    let steps = built.config.steps;
    let h = built.config.h;
    let (m, states) = run(name, steps);
    let ball = m.bodies[0].vertices.clone();
    let (mut widest, mut lowest) = (0.0f64, f64::INFINITY);
    // The ball reaches past the wall's radius only above the rim (it is thrown in over it).
    for x in &states {
        for v in ball.clone() {
            let (px, py, pz) = (x[3 * v], x[3 * v + 1], x[3 * v + 2]);
            // Below the rim (y = 0.2 m) the wall bounds the ball; above it, nothing does.
            if py < 0.2 {
                widest = widest.max((px * px + pz * pz).sqrt());
            }
            lowest = lowest.min(py);
        }
    }
    let n = states.len();
    let y = centre(&m, &states[n - 1], 0, 1);
    // Vertical speed: the ball may still roll on the bottom (friction stops sliding, not
    // rolling).
    let speed = (y - centre(&m, &states[n - 2], 0, 1)).abs() / h;
    eprintln!(
        "widest radius {widest:.4} m (wall 0.14), lowest point {lowest:.2e} m (bottom 0), \
         final centre height {y:.4} m, vertical speed {speed:.2e} m/s"
    );
    assert!(widest < 0.14, "the ball crossed the cup's wall: {widest} m");
    assert!(
        lowest > 0.0,
        "the ball crossed the cup's bottom: {lowest} m"
    );
    // Resting on the bottom: the centre about a radius (0.08 m) up, a little squashed.
    assert!(
        y > 0.07 && y < 0.081,
        "the ball is not on the bottom: {y} m"
    );
    assert!(speed < 0.02, "the ball has not settled: {speed} m/s");
}

#[test]
fn pictures_draw_triangle_mesh_obstacles() {
    // A frame of the cup scene: the cup (grey-blue, b > r) covers a good part of the picture
    // around the ball (orange, r > b); without drawing it, only the ball and background show.
    let built = common::bundled_scene("contact_cup.toml");
    let m = &built.model;
    let painter = jello::output::FramePainter::new(m, (160, 120), false).unwrap();
    let dir = std::env::temp_dir().join(format!("jello_cup_png_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x: Vec<f64> = m.mesh.positions.iter().flatten().copied().collect();
    let image = painter.paint(&x, 0.0, &dir.join("cup.png")).unwrap();
    let px = |i: usize| &image.pixels[4 * i..4 * i + 4];
    let background = px(0).to_vec();
    let n = (image.width * image.height) as usize;
    let (mut cool, mut warm) = (0, 0);
    for i in 0..n {
        let p = px(i);
        if p[..3] == background[..3] {
            continue;
        }
        if p[2] as i32 > p[0] as i32 + 20 {
            cool += 1;
        } else if p[0] as i32 > p[2] as i32 + 20 {
            warm += 1;
        }
    }
    eprintln!("{cool} obstacle-coloured and {warm} body-coloured pixels of {n}");
    assert!(cool > n / 50, "the cup is not drawn: {cool} pixels");
    assert!(warm > n / 200, "the ball is not drawn: {warm} pixels");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ring_generator_errors_name_the_key() {
    let scene = |mesh: &str| {
        format!(
            "[simulation]\nh = 0.01\nsteps = 1\n[[objects]]\nname = \"hoop\"\nmesh = {mesh}\n\
             material = {{ model = \"stable_neo_hookean\", youngs_modulus = 1e5, \
             poisson_ratio = 0.4, density = 1000.0 }}\n"
        )
    };
    let ok = r#"{ generator = "ring", center = [0.0, 0.0, 0.0], radius = 0.13, inner_radius = 0.08, height = 0.04, cells = [24, 2, 1] }"#;
    let built = jello::scene::Scene::parse(std::path::Path::new("ipc.toml"), &scene(ok))
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(built.model.mesh.num_tets(), 24 * 2 * 6);
    for (bad, key) in [
        (
            ok.replace("inner_radius = 0.08", "inner_radius = 0.13"),
            "objects[0].mesh.inner_radius",
        ),
        (
            ok.replace("height = 0.04", "height = -0.04"),
            "objects[0].mesh.height",
        ),
        (
            ok.replace("[24, 2, 1]", "[2, 2, 1]"),
            "objects[0].mesh.cells",
        ),
        (
            ok.replace("[24, 2, 1]", "[1099511627776, 1099511627776, 8]"),
            "objects[0].mesh.cells",
        ),
        (ok.replace("height = 0.04, ", ""), "objects[0].mesh"),
        (
            ok.replace("cells = [24, 2, 1]", "cells = [24, 2, 1], resolution = 4"),
            "objects[0].mesh.resolution",
        ),
    ] {
        let e = build_err_or_parse(&scene(&bad));
        assert!(e.contains(key), "{bad}: {e}");
    }
}

/// `runner::step_problem` (the VTU residual field and residual pictures) must rebuild the step
/// Newton solved, κ and lagged friction included: at Newton's converged end of a contact step
/// (`sim` after step `step`, which started from `start`) its characteristic residual meets the
/// scene's stop (CN 1e-7). Without κ's balance the contact gradient used the initial κ bound
/// and the residual stayed large at the contact vertices. Checked on contact_hoop.toml's
/// Newton run in [`a_soft_ball_wedges_in_a_rigid_hoop_held_by_friction_and_slips_through_without`];
/// false (nothing checked) for a step without contact pairs.
fn frames_residual_is_the_step_newton_solved(
    step: usize,
    sim: &jello::sim::Simulation,
    start: &jello::problem::State,
) -> bool {
    let ipc = sim.model.contact.clone().unwrap();
    let xs = ipc.positions(&sim.state.x);
    if ipc.active_pairs(&xs).unwrap().is_empty() {
        return false;
    }
    let problem = jello::runner::step_problem(&sim.model, start, sim.h, sim.static_increments);
    let mut g = vec![0.0; sim.state.x.len()];
    problem.gradient(&sim.model, &sim.state.x, &mut g);
    let residual = sim.model.char_norm.residual(&g);
    eprintln!("step {step}: rebuilt problem's residual {residual:.2e}");
    assert!(
        residual < 1e-6,
        "step {step}: the rebuilt problem's residual {residual:.2e} at Newton's solution"
    );
    true
}

/// contact_hetero.toml (issue 13's heterogeneous scene): the shell region gives the stiff
/// material to exactly the ball's elements whose centroid is ≥ 8 cm from its centre, the pin
/// holds exactly the hoop's outer cylinder, and on Newton the shelled ball lands on the rim,
/// cannot squeeze through the hole (it would with a soft shell, as contact_hoop's ball does),
/// comes to rest there (backward Euler's damping and the soft core take the impact), and
/// deflects the clamped hoop by less than d̂.
#[test]
fn a_shelled_ball_lands_on_a_clamped_stiff_hoop_and_rests_on_its_rim() {
    use jello::material::{Material, MaterialModel};
    let name = "contact_hetero.toml";
    let built = common::bundled_scene(name);
    let m = &built.model;
    let (ball, hoop) = (&m.bodies[0], &m.bodies[1]);
    let centre0 = [0.004, 0.15, 0.0];
    let core = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.4).unwrap();
    let shell = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e8, 0.3).unwrap();
    let (mut n_core, mut n_shell) = (0, 0);
    for t in ball.tets.clone() {
        let c = m.mesh.tets[t].iter().fold([0.0; 3], |a, &v| {
            let p = m.mesh.positions[v as usize];
            [a[0] + p[0] / 4.0, a[1] + p[1] / 4.0, a[2] + p[2] / 4.0]
        });
        let r = (0..3)
            .map(|k| (c[k] - centre0[k]).powi(2))
            .sum::<f64>()
            .sqrt();
        let want = if r >= 0.08 { &shell } else { &core };
        assert_eq!(&m.materials[t], want, "tet {t} at r = {r}");
        if r >= 0.08 {
            n_shell += 1
        } else {
            n_core += 1
        }
    }
    assert!(
        n_core > 0 && n_shell > 0,
        "{n_core} core, {n_shell} shell tets"
    );
    let mut n_pinned = 0;
    for v in hoop.vertices.clone() {
        let p = m.mesh.positions[v];
        let outer = (p[0] * p[0] + p[2] * p[2]).sqrt() > 0.13 - 1e-9;
        assert_eq!(m.pinned[v], outer, "hoop vertex {v} at {p:?}");
        n_pinned += outer as usize;
    }
    assert!(m.pinned[ball.vertices.clone()].iter().all(|p| !p));
    eprintln!("{n_core} core tets, {n_shell} shell tets, {n_pinned} pinned hoop vertices");

    let h = built.config.h;
    let (m, states) = run(name, built.config.steps);
    let ys: Vec<f64> = states.iter().map(|x| centre(&m, x, 0, 1)).collect();
    let lowest = ys.iter().cloned().fold(f64::INFINITY, f64::min);
    let vy: Vec<f64> = ys.windows(2).map(|w| (w[1] - w[0]) / h).collect();
    let last_speed = vy.last().unwrap().abs();
    let deflection = hoop
        .vertices
        .clone()
        .map(|v| {
            states
                .iter()
                .map(|x| {
                    (0..3)
                        .map(|k| (x[3 * v + k] - m.mesh.positions[v][k]).powi(2))
                        .sum::<f64>()
                        .sqrt()
                })
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);
    eprintln!(
        "ball centre: lowest y = {lowest:.4} m, last y = {:.4} m moving {last_speed:.3} m/s; \
         hoop deflection {deflection:.2e} m",
        ys.last().unwrap()
    );
    // Touching the rim puts the centre at y ≈ 0.08 m; through the hole it would pass y = 0.
    assert!(lowest > 0.04, "the ball went into the hole: y = {lowest}");
    assert!(
        *ys.last().unwrap() < centre0[1] - 0.05 && last_speed < 0.1,
        "the ball must land and rest: y = {ys:?}"
    );
    assert!(
        deflection > 0.0 && deflection < m.barrier.dhat,
        "hoop deflection {deflection:e} m"
    );
}

/// The generated IPC scenes — a house of cards with friction, a pile of soft balls under a
/// scripted mesh plate, a ball over a chain-mail net — start intersection-free and take their
/// first steps on projected Newton converged, intersection-free and with every pair apart
/// ([`run`] checks each step), far enough for contact to be active: the plates' feet reach
/// the floor, the top ball the three below it, the net's links its flat rings (some pair
/// within d̂).
/// Their size keys scale them: the net's `count` adds rings.
#[test]
fn the_house_of_cards_the_pressed_pile_and_the_ring_net_step_without_intersecting() {
    for (name, steps) in [
        ("house_of_cards.toml", 3),
        ("pile_press.toml", 10),
        ("ring_net.toml", 12),
    ] {
        let built = common::bundled_scene(name);
        assert_eq!(built.config.solver.name(), "newton", "{name}");
        let (m, states) = run(name, steps);
        assert_eq!(states.len(), steps);
        assert!(m.bodies.len() >= 2, "{name}: {} objects", m.bodies.len());
        let ipc = m.contact.clone().unwrap();
        let xs = ipc.positions(states.last().unwrap());
        let pairs = ipc.active_pairs(&xs).unwrap();
        let d = ipc.min_distance_sq(&pairs, &xs).sqrt();
        assert!(
            d > 0.0 && d < ipc.dhat,
            "{name}: closest pair {d:e} m after {steps} steps (d̂ {:e} m)",
            ipc.dhat
        );
    }
    // The net: 3 × 3 flat rings and 12 links of 12 × 1 × 1 cells (12 · 2 · 2 vertices each).
    let net = common::bundled_scene("ring_net.toml");
    assert_eq!(net.model.bodies[0].vertices.len(), 21 * 48);
    let path = common::bundled_scene_path("ring_net.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("count = [3, 3]"));
    let bigger =
        jello::scene::Scene::parse(&path, &text.replace("count = [3, 3]", "count = [4, 3]"))
            .unwrap()
            .build()
            .unwrap();
    // 4 × 3 flat rings, 3 × 3 links along x, 4 × 2 along z.
    assert_eq!(bigger.model.bodies[0].vertices.len(), (12 + 9 + 8) * 48);
}
