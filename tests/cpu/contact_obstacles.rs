//! Triangle-mesh obstacles in scenes (`[[obstacles]] type = "mesh"`, issue 12): a soft cube
//! dropped on a static plate read from an OBJ file comes to rest on it; a plate read from an
//! STL file and scripted to move up lifts the cube, and one scripted to slide sideways carries
//! it by friction; a script that would carry the plate through the cube in one step fails the
//! step with a clear error; bad inputs are refused with one line naming the file or key.
//! Every step is checked intersection-free (exact triangle–triangle test) with the obstacle
//! where its script has it.

use crate::common;

use jello::contact::check_intersection_free;
use jello::problem::Model;
use jello::scene::{BuiltScene, Scene};
use jello::sim::Simulation;
use jello::solver::{NewtonParams, NewtonSolver};
use std::path::{Path, PathBuf};

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "jello_contact_obstacles_{}_{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A square plate at height 0 over [−half, half]² in x and z, `n` × `n` cells of two
/// triangles each (normals +y): positions and triangles.
fn plate(half: f64, n: usize) -> (Vec<[f64; 3]>, Vec<[u32; 3]>) {
    let mut pos = Vec::new();
    for i in 0..=n {
        for k in 0..=n {
            let s = |j: usize| -half + 2.0 * half * j as f64 / n as f64;
            pos.push([s(i), 0.0, s(k)]);
        }
    }
    let id = |i: usize, k: usize| (i * (n + 1) + k) as u32;
    let mut tri = Vec::new();
    for i in 0..n {
        for k in 0..n {
            // (b − a) × (c − a) = +y for a = (i, k), b = (i, k + 1), c = (i + 1, k).
            tri.push([id(i, k), id(i, k + 1), id(i + 1, k)]);
            tri.push([id(i + 1, k), id(i, k + 1), id(i + 1, k + 1)]);
        }
    }
    (pos, tri)
}

fn write_obj(path: &Path, pos: &[[f64; 3]], tri: &[[u32; 3]]) {
    let mut s = String::from("# a plate\no plate\n");
    for p in pos {
        s += &format!("v {} {} {}\n", p[0], p[1], p[2]);
    }
    for t in tri {
        s += &format!("f {} {} {}\n", t[0] + 1, t[1] + 1, t[2] + 1);
    }
    std::fs::write(path, s).unwrap();
}

fn write_ascii_stl(path: &Path, pos: &[[f64; 3]], tri: &[[u32; 3]]) {
    let mut s = String::from("solid plate\n");
    for t in tri {
        s += "  facet normal 0 1 0\n    outer loop\n";
        for &v in t {
            let p = pos[v as usize];
            s += &format!("      vertex {} {} {}\n", p[0], p[1], p[2]);
        }
        s += "    endloop\n  endfacet\n";
    }
    s += "endsolid plate\n";
    std::fs::write(path, s).unwrap();
}

/// A 0.1 m soft cube whose bottom is at `bottom` (m), centred over the origin in x and z, and
/// the given obstacle tables, `[contact]` lines and gravity; Newton, cn at 1e-7, d̂ = 1 mm.
fn scene_text(h: f64, bottom: f64, gravity: f64, obstacles: &str, contact: &str) -> String {
    format!(
        r#"[simulation]
h = {h}
steps = 1
gravity = [0.0, {gravity}, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = 1e-7

[[objects]]
name = "cube"
mesh = {{ generator = "box", min = [-0.05, {bottom}, -0.05], max = [0.05, {top}, 0.05], cells = [2, 2, 2] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}

{obstacles}

[contact]
dhat = 1e-3
{contact}
"#,
        top = bottom + 0.1
    )
}

fn build(dir: &Path, text: &str) -> jello::error::Result<BuiltScene> {
    Scene::parse(&dir.join("scene.toml"), text)?.build()
}

fn simulation(built: &BuiltScene) -> Simulation {
    let params = NewtonParams {
        stop: built.config.stop,
        ..NewtonParams::default()
    };
    let solver = NewtonSolver::new(&built.model, params).unwrap();
    common::simulation(built, Box::new(solver))
}

/// Mass-weighted mean of coordinate `axis` of body 0 (position or velocity), m or m/s.
fn centre(m: &Model, x: &[f64], axis: usize) -> f64 {
    let r = m.bodies[0].vertices.clone();
    let mass: f64 = r.clone().map(|v| m.mass[v]).sum();
    r.map(|v| m.mass[v] * x[3 * v + axis]).sum::<f64>() / mass
}

/// The lowest y of body 0, m.
fn bottom(m: &Model, x: &[f64]) -> f64 {
    m.bodies[0]
        .vertices
        .clone()
        .map(|v| x[3 * v + 1])
        .fold(f64::INFINITY, f64::min)
}

/// Runs `steps` steps, each converged and intersection-free with the obstacles at their
/// scripted positions at the step's end; `each(step, sim)` checks more. Returns the Newton
/// iterations in all.
fn run(built: &BuiltScene, steps: usize, mut each: impl FnMut(usize, &Simulation)) -> usize {
    let mut sim = simulation(built);
    let ipc = built.model.contact.clone().expect("IPC contact is on");
    let mut iterations = 0;
    for step in 0..steps {
        let r = sim
            .step(false)
            .unwrap_or_else(|e| panic!("step {step}: {e}"));
        assert!(r.converged, "step {step} did not converge: {:?}", r.failure);
        iterations += r.iterations;
        let xs = ipc.positions_at(&sim.state.x, sim.state.t);
        check_intersection_free(&ipc.mesh, &xs).unwrap_or_else(|e| panic!("step {step}: {e}"));
        let pairs = ipc.active_pairs(&xs).unwrap();
        assert!(
            ipc.min_distance_sq(&pairs, &xs) > 0.0,
            "step {step}: a pair touches"
        );
        each(step, &sim);
    }
    iterations
}

#[test]
fn a_cube_dropped_on_a_static_obj_plate_comes_to_rest_on_it() {
    let dir = scratch("drop");
    let (pos, tri) = plate(0.25, 4);
    write_obj(&dir.join("plate.obj"), &pos, &tri);
    // The plate's file is at height 0; placed 0.1 m lower, scaled ×2 (a 1 m plate).
    let obstacles = r#"[[obstacles]]
type = "mesh"
name = "plate"
path = "plate.obj"
transform = { scale = 2.0, translate = [0.0, -0.1, 0.0] }"#;
    let built = build(
        &dir,
        &scene_text(0.01, -0.095, -9.81, obstacles, "ipc = true"),
    )
    .unwrap();
    let ipc = built.model.contact.clone().unwrap();
    assert_eq!(ipc.mesh.bodies.len(), 2);
    assert_eq!(ipc.mesh.bodies[1].name, "plate");
    assert_eq!(ipc.mesh.obstacle_positions.len(), pos.len());
    assert!(ipc.mesh.obstacle_positions.iter().all(|p| p[1] == -0.1));
    let (plate_y, dhat) = (-0.1, ipc.dhat);
    let mut lowest = f64::INFINITY;
    let mut last = (0.0, 0.0);
    let iterations = run(&built, 40, |step, sim| {
        let b = bottom(&built.model, &sim.state.x);
        assert!(
            b > plate_y,
            "step {step}: the cube's bottom {b} is below the plate"
        );
        lowest = lowest.min(b - plate_y);
        last = (b - plate_y, centre(&built.model, &sim.state.v, 1));
    });
    eprintln!(
        "drop: {iterations} Newton iterations over 40 steps; closest approach {lowest:.3e} m, \
         resting gap {:.3e} m (d̂ {dhat:.0e} m), final vertical velocity {:.2e} m/s",
        last.0, last.1
    );
    // The cube fell 5 mm onto the plate and rests on it: within d̂, above it, still.
    assert!(
        last.0 > 0.0 && last.0 < dhat,
        "resting gap {} m, d̂ {dhat} m",
        last.0
    );
    assert!(last.1.abs() < 0.02, "still moving: {} m/s", last.1);
}

#[test]
fn a_scripted_stl_plate_lifts_the_cube() {
    let dir = scratch("lift");
    let (pos, tri) = plate(0.5, 4);
    write_ascii_stl(&dir.join("plate.stl"), &pos, &tri);
    // The cube rests ½ d̂ over the plate, which rises at 0.05 m/s from t = 0 (gravity keeps
    // the cube on it after the jolt: without it the cube would bounce off, faster than the
    // plate).
    let v = 0.05;
    let h = 0.005;
    let obstacles = format!(
        r#"[[obstacles]]
type = "mesh"
name = "lift"
path = "plate.stl"
script = {{ type = "translate", velocity = [0.0, {v}, 0.0] }}"#
    );
    let built = build(&dir, &scene_text(h, 5e-4, -9.81, &obstacles, "ipc = true")).unwrap();
    let m = &built.model;
    let c0 = centre(m, &m.mesh.positions.concat(), 1);
    let steps = 60;
    let mut last = (0.0, 0.0);
    let mut vy = Vec::new();
    run(&built, steps, |step, sim| {
        vy.push(centre(m, &sim.state.v, 1));
        let plate_y = v * sim.state.t;
        let b = bottom(m, &sim.state.x);
        assert!(
            b > plate_y,
            "step {step}: the cube's bottom {b} is below the plate at {plate_y}"
        );
        last = (centre(m, &sim.state.x, 1) - c0, centre(m, &sim.state.v, 1));
    });
    let lift = v * steps as f64 * h;
    eprintln!("lift: cube y-velocity per step {vy:.4?}");
    eprintln!(
        "lift: plate rose {lift:.4} m, the cube's centre {:.4} m; cube velocity {:.4} m/s \
         (plate {v} m/s)",
        last.0, last.1
    );
    // The cube moves with the plate: its centre rose by the plate's rise, give or take the
    // ½ d̂ it started above it and the gap it keeps (< d̂), and it moves at the plate's speed.
    assert!(
        (last.0 - lift).abs() < 1.5e-3,
        "the cube rose {} m, the plate {lift} m",
        last.0
    );
    assert!((last.1 - v).abs() < 0.1 * v, "cube velocity {} m/s", last.1);
}

#[test]
fn a_sliding_plate_carries_the_cube_by_friction() {
    let dir = scratch("carry");
    let (pos, tri) = plate(0.5, 4);
    write_obj(&dir.join("plate.obj"), &pos, &tri);
    // The cube rests ½ d̂ over a plate that slides along +x at 0.1 m/s; μ = 0.5 between them
    // (named by the obstacle's name): static friction must bring the cube to the plate's speed.
    let v = 0.1;
    let obstacles = format!(
        r#"[[obstacles]]
type = "mesh"
name = "belt"
path = "plate.obj"
script = {{ type = "translate", velocity = [{v}, 0.0, 0.0] }}"#
    );
    let contact = r#"ipc = true
friction_pairs = [{ objects = ["cube", "belt"], mu = 0.5 }]"#;
    let text = scene_text(0.01, 5e-4, -9.81, &obstacles, contact);
    // Under BDF2 too: the plate's friction displacement is ĥ (= 2h/3) times its velocity, so a
    // sticking cube moves at the plate's speed, not 3/2 of it.
    let bdf2 = text.replace("[simulation]\n", "[simulation]\nintegrator = \"bdf2\"\n");
    for (integrator, text) in [("implicit Euler", text.clone()), ("BDF2", bdf2)] {
        let built = build(&dir, &text).unwrap();
        let m = &built.model;
        let mut vx = Vec::new();
        run(&built, 30, |_, sim| vx.push(centre(m, &sim.state.v, 0)));
        eprintln!("carry, {integrator}: cube x-velocity per step {vx:.4?} (plate {v} m/s)");
        // μg = 4.9 m/s² reaches 0.1 m/s within ~2 steps; then the cube sticks to the plate,
        // its centre swinging about the plate's speed in the soft cube's shear mode (period
        // ≈ 0.1 s; implicit Euler damps it within the window, BDF2 hardly): the mean over two
        // periods is the plate's speed.
        let tail = &vx[10..];
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        eprintln!("carry, {integrator}: mean over steps 11–30 {mean:.4} m/s");
        assert!(
            (mean - v).abs() < 0.03 * v,
            "{integrator}: the cube does not move with the plate: {tail:?}"
        );
        if integrator == "implicit Euler" {
            assert!(
                tail.iter().all(|u| (u - v).abs() < 0.05 * v),
                "the cube does not stick to the plate: {tail:?}"
            );
        }
    }
}

#[test]
fn a_script_through_the_cube_in_one_step_fails_the_step() {
    let dir = scratch("through");
    let (pos, tri) = plate(0.5, 2);
    write_obj(&dir.join("plate.obj"), &pos, &tri);
    // 10 m/s × 0.02 s = 0.2 m: the plate 1 cm under the cube would jump right through it.
    let obstacles = r#"[[obstacles]]
type = "mesh"
name = "ram"
path = "plate.obj"
script = { type = "translate", velocity = [0.0, 10.0, 0.0] }"#;
    let built = build(&dir, &scene_text(0.02, 0.01, 0.0, obstacles, "ipc = true")).unwrap();
    let mut sim = simulation(&built);
    let x0 = sim.state.x.clone();
    let e = sim.step(false).unwrap_err().to_string();
    eprintln!("{e}");
    assert!(
        e.contains("step 1") && e.contains("`ram`") && e.contains("`cube`"),
        "{e}"
    );
    assert!(e.contains("smaller time step"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
    assert_eq!(sim.state.x, x0, "a failed step must not move the state");
    // The same script at a time step whose jump (5 mm) keeps clear of the cube is accepted.
    let text = scene_text(0.0005, 0.01, 0.0, obstacles, "ipc = true");
    let built = build(&dir, &text).unwrap();
    run(&built, 1, |_, _| {});
}

fn expect_error(dir: &Path, text: &str, wants: &[&str]) {
    let e = match build(dir, text) {
        Ok(_) => panic!("accepted; expected an error with {wants:?}"),
        Err(e) => e.to_string(),
    };
    eprintln!("{e}");
    assert!(!e.contains('\n'), "one line: {e}");
    for w in wants {
        assert!(e.contains(w), "`{w}` not in: {e}");
    }
}

#[test]
fn bad_mesh_obstacles_are_refused_naming_the_file_or_key() {
    let dir = scratch("bad");
    let (pos, tri) = plate(0.5, 2);
    write_obj(&dir.join("plate.obj"), &pos, &tri);
    let mesh = |extra: &str| {
        format!("[[obstacles]]\ntype = \"mesh\"\nname = \"plate\"\npath = \"plate.obj\"\n{extra}")
    };
    let scene = |obstacles: &str, contact: &str| scene_text(0.01, 0.01, -9.81, obstacles, contact);
    // The valid scene builds.
    build(&dir, &scene(&mesh(""), "ipc = true")).unwrap();
    // A missing file: the key and the path.
    let missing = "[[obstacles]]\ntype = \"mesh\"\npath = \"nowhere.obj\"";
    expect_error(
        &dir,
        &scene(missing, "ipc = true"),
        &["obstacles[0].path", "nowhere.obj", "does not exist"],
    );
    // A malformed OBJ line: the file and the line.
    std::fs::write(
        dir.join("broken.obj"),
        "v 0 0 0\nv 1 0 0\nv 0 0 zz\nf 1 2 3\n",
    )
    .unwrap();
    let broken = "[[obstacles]]\ntype = \"mesh\"\npath = \"broken.obj\"";
    expect_error(
        &dir,
        &scene(broken, "ipc = true"),
        &["obstacles[0].path", "broken.obj:3"],
    );
    // A file without triangles.
    std::fs::write(dir.join("points.obj"), "v 0 0 0\nv 1 0 0\nv 0 0 1\n").unwrap();
    let points = "[[obstacles]]\ntype = \"mesh\"\npath = \"points.obj\"";
    expect_error(
        &dir,
        &scene(points, "ipc = true"),
        &["points.obj", "no triangles"],
    );
    // An unknown extension.
    std::fs::write(dir.join("plate.txt"), "v 0 0 0\n").unwrap();
    let txt = "[[obstacles]]\ntype = \"mesh\"\npath = \"plate.txt\"";
    expect_error(&dir, &scene(txt, "ipc = true"), &["plate.txt", "extension"]);
    // Without IPC contact.
    expect_error(
        &dir,
        &scene(&mesh(""), ""),
        &["obstacles[0].type", "contact.ipc = true"],
    );
    // Non-finite or degenerate placement.
    expect_error(
        &dir,
        &scene(
            &mesh("transform = { translate = [nan, 0.0, 0.0] }"),
            "ipc = true",
        ),
        &["obstacles[0].transform.translate", "finite"],
    );
    expect_error(
        &dir,
        &scene(&mesh("transform = { scale = inf }"), "ipc = true"),
        &["obstacles[0].transform.scale"],
    );
    expect_error(
        &dir,
        &scene(&mesh("transform = { scale = 1e-300 }"), "ipc = true"),
        &["obstacles[0].path", "zero area"],
    );
    // A non-finite script.
    expect_error(
        &dir,
        &scene(
            &mesh("script = { type = \"translate\", velocity = [0.0, nan, 0.0] }"),
            "ipc = true",
        ),
        &["obstacles[0].script.velocity"],
    );
    // An obstacle through the cube at t = 0: named with the cube.
    expect_error(
        &dir,
        &scene(
            &mesh("transform = { translate = [0.0, 0.05, 0.0] }"),
            "ipc = true",
        ),
        &["`plate`", "`cube`", "intersect"],
    );
    // A name taken by the object.
    let dup = "[[obstacles]]\ntype = \"mesh\"\nname = \"cube\"\npath = \"plate.obj\"";
    expect_error(
        &dir,
        &scene(dup, "ipc = true"),
        &["obstacles[0].name", "`cube`"],
    );
    // Unknown keys are refused by the parser.
    expect_error(
        &dir,
        &scene(&mesh("offset = 1.0"), "ipc = true"),
        &["offset"],
    );
}
