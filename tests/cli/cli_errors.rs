//! The `jello` binary on bad input: every error exits non-zero with ONE stderr line that names
//! the file and the key (or line) at fault, and never panics. Plus the happy paths: a run writes
//! a sane `stats.json` (optionally with a per-iteration trace) and `.vtu`/`.pvd` frames, and the
//! mesh tools print counts and round-trip.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_jello");

const BASE: &str = common::cli::BAR_SCENE;

fn tmp(test: &str) -> PathBuf {
    common::cli::tmp_dir("cli", test)
}

use common::cli::jello;

/// Writes `text` as DIR/NAME and runs `jello run` on it (output into DIR/out).
fn run_scene(dir: &Path, name: &str, text: &str) -> Output {
    run_scene_with(dir, name, text, &[])
}

/// `jello run` on `text` written to `dir/name`, with extra command-line `flags`.
fn run_scene_with(dir: &Path, name: &str, text: &str, flags: &[&str]) -> Output {
    let scene = dir.join(name);
    std::fs::write(&scene, text).unwrap();
    let out = dir.join("out");
    let mut args = vec![
        "run",
        scene.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    jello(&args)
}

/// Non-zero exit; stderr is exactly one line, mentions every needle, and is not a panic.
fn assert_one_line_error(out: &Output, needles: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "expected failure, got {:?}; stderr: {stderr}",
        out.status
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "panic: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got: {stderr}");
    assert!(stderr.ends_with('\n'));
    for n in needles {
        assert!(lines[0].contains(n), "expected `{n}` in `{}`", lines[0]);
    }
    lines[0].to_string()
}

/// Runs `BASE` with `from` replaced by `to` and checks the one-line error names the scene file
/// and every needle.
fn bad_scene(test: &str, from: &str, to: &str, needles: &[&str]) -> String {
    assert!(BASE.contains(from), "{from} not in BASE");
    let dir = tmp(test);
    let name = format!("{test}.toml");
    let out = run_scene(&dir, &name, &BASE.replace(from, to));
    let mut all = vec![name.as_str()];
    all.extend_from_slice(needles);
    let line = assert_one_line_error(&out, &all);
    assert!(
        !dir.join("out/stats.json").exists(),
        "a failed run wrote stats"
    );
    let _ = std::fs::remove_dir_all(&dir);
    line
}

#[test]
fn base_scene_is_valid() {
    // Guards every error test below: the unperturbed scene runs.
    let dir = tmp("base");
    let out = run_scene(&dir, "base.toml", BASE);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn time_step_zero_or_negative() {
    bad_scene("h_zero", "h = 0.01", "h = 0.0", &["`simulation.h`", "> 0"]);
    bad_scene("h_neg", "h = 0.01", "h = -0.01", &["`simulation.h`"]);
}

#[test]
fn integrator_unknown_or_on_a_static_solve() {
    bad_scene(
        "integrator_unknown",
        "h = 0.01",
        "h = 0.01\nintegrator = \"bdf3\"",
        &["`simulation.integrator`", "bdf3", "implicit_euler or bdf2"],
    );
    bad_scene(
        "integrator_static",
        "h = 0.01",
        "h = 0.01\nintegrator = \"bdf2\"\nstatic = true",
        &["`simulation.integrator`", "static"],
    );
}

#[test]
fn poisson_ratio_at_or_above_half() {
    let k = "`objects[0].material.poisson_ratio`";
    bad_scene(
        "nu_half",
        "poisson_ratio = 0.3",
        "poisson_ratio = 0.5",
        &[k, "0.5"],
    );
    bad_scene("nu_big", "poisson_ratio = 0.3", "poisson_ratio = 0.7", &[k]);
}

#[test]
fn youngs_modulus_not_positive() {
    let k = "`objects[0].material.youngs_modulus`";
    bad_scene(
        "e_zero",
        "youngs_modulus = 1e6",
        "youngs_modulus = 0.0",
        &[k],
    );
    bad_scene(
        "e_neg",
        "youngs_modulus = 1e6",
        "youngs_modulus = -1e6",
        &[k],
    );
}

#[test]
fn density_not_positive() {
    let k = "`objects[0].material.density`";
    bad_scene("rho_zero", "density = 1000.0", "density = 0.0", &[k]);
    bad_scene("rho_neg", "density = 1000.0", "density = -5.0", &[k]);
}

#[test]
fn unknown_solver() {
    let dir = tmp("solver");
    let text = format!("{BASE}\n[solver]\nname = \"fast\"\n");
    let out = run_scene(&dir, "solver.toml", &text);
    assert_one_line_error(&out, &["solver.toml", "`solver.name`", "fast", "newton"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn impossible_jgs2_subspace_settings() {
    for (key, value, needle) in [
        ("far_tolerance", "-0.1", "≥ 0"),
        ("far_tolerance", "nan", "finite"),
        ("far_order", "2", "0 (node means) or 1"),
        ("far_hmatrix_eps", "0.0", "> 0"),
        ("far_hmatrix_eps", "nan", "finite"),
        ("safeguard", "\"sometimes\"", "cut, always or off"),
    ] {
        let dir = tmp(&format!("{key}_{value}"));
        let text = format!("{BASE}\n[solver]\nname = \"jgs2\"\n{key} = {value}\n");
        let out = run_scene(&dir, "subspace.toml", &text);
        assert_one_line_error(&out, &["subspace.toml", &format!("`solver.{key}`"), needle]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Bad quasi-Newton options stop `jello run` with one line naming the file and the key.
#[test]
fn impossible_quasi_newton_settings() {
    for (key, value, needle) in [
        ("history", "-2", "-2"),
        ("history", "1.5", "1.5"),
        ("mode", "\"sometimes\"", "rule or fixed"),
    ] {
        let dir = tmp(&format!("qn_{key}"));
        let text = format!("{BASE}\n[solver]\nname = \"qn\"\n{key} = {value}\n");
        let out = run_scene(&dir, "qn.toml", &text);
        assert_one_line_error(&out, &["qn.toml", &format!("`solver.{key}`"), needle]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn unknown_solver_on_the_command_line() {
    let dir = tmp("solver_flag");
    let out = run_scene_with(&dir, "ok.toml", BASE, &["--solver", "fast"]);
    assert_one_line_error(&out, &["--solver", "fast"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_variant_on_the_command_line() {
    let dir = tmp("variant_flag");
    let out = run_scene_with(
        &dir,
        "ok.toml",
        BASE,
        &["--solver", "jgs2", "--variant", "red-black"],
    );
    assert_one_line_error(&out, &["--variant", "red-black"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_material_model() {
    bad_scene(
        "model",
        "model = \"stable_neo_hookean\"",
        "model = \"mooney_rivlin\"",
        &["`objects[0].material.model`", "mooney_rivlin"],
    );
}

#[test]
fn unknown_key() {
    // `foo` lands on line 3 of the file, inside [simulation].
    let line = bad_scene("foo", "h = 0.01\n", "h = 0.01\nfoo = 1\n", &["foo", ":3:"]);
    assert!(line.contains("simulation.foo"), "{line}");
}

#[test]
fn missing_mesh_file() {
    bad_scene(
        "mesh_file",
        "generator = \"box\", min = [0.0, 0.0, 0.0], max = [1.0, 0.1, 0.1], cells = [4, 1, 1]",
        "file = \"no_such_mesh.node\"",
        &["`objects[0].mesh.file`", "no_such_mesh.node"],
    );
}

#[test]
fn pin_region_selects_no_vertex() {
    let pin = "[[pins]]\nregion = { box = { min = [5.0, 5.0, 5.0], max = [6.0, 6.0, 6.0] } }\n";
    let dir = tmp("pin");
    let out = run_scene(&dir, "pin.toml", &format!("{BASE}\n{pin}"));
    assert_one_line_error(&out, &["pin.toml", "`pins[0].region`", "no vertex"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wrong_value_type() {
    bad_scene(
        "type",
        "h = 0.01",
        "h = \"fast\"",
        &["`simulation.h`", ":2:", "fast"],
    );
    bad_scene(
        "type_cells",
        "cells = [4, 1, 1]",
        "cells = [4, 1, \"x\"]",
        &["`objects[0].mesh.cells[2]`", ":8:"],
    );
}

#[test]
fn missing_required_key() {
    bad_scene("no_steps", "steps = 2\n", "", &["`simulation`", "steps"]);
}

#[test]
fn malformed_toml() {
    bad_scene("malformed", "h = 0.01", "h = = 0.01", &[":2:"]);
    bad_scene("unclosed", "[simulation]", "[simulation", &[":1:"]);
}

#[test]
fn missing_scene_file() {
    let dir = tmp("missing_scene");
    let scene = dir.join("nowhere.toml");
    let out = jello(&[
        "run",
        scene.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    let line = assert_one_line_error(&out, &["nowhere.toml"]);
    // The OS reason appears once, not once per cause.
    let reason = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
    assert!(line.matches(&*reason).count() <= 1, "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn obstacle_containing_the_body_at_start() {
    let dir = tmp("obstacle");
    // A box around the whole bar.
    let boxed = "[[obstacles]]\ntype = \"box\"\nmin = [-1.0, -1.0, -1.0]\nmax = [2.0, 1.0, 1.0]\n";
    let out = run_scene(&dir, "boxed.toml", &format!("{BASE}\n{boxed}"));
    assert_one_line_error(&out, &["boxed.toml", "`obstacles[0]`", "inside"]);
    // A ground plane through the bar (its bottom is at y = 0, the ground at 0.05).
    let ground = "[[obstacles]]\ntype = \"ground\"\nheight = 0.05\n";
    let out = run_scene(&dir, "ground.toml", &format!("{BASE}\n{ground}"));
    assert_one_line_error(&out, &["ground.toml", "`obstacles[0]`"]);
    // A sphere swallowing one end (second obstacle: the index must follow).
    let sphere = "[[obstacles]]\ntype = \"ground\"\nheight = -1.0\n\n\
                  [[obstacles]]\ntype = \"sphere\"\ncenter = [1.0, 0.05, 0.05]\nradius = 0.2\n";
    let out = run_scene(&dir, "sphere.toml", &format!("{BASE}\n{sphere}"));
    assert_one_line_error(&out, &["sphere.toml", "`obstacles[1]`"]);
    let _ = std::fs::remove_dir_all(&dir);
}

const NODE: &str = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 1 1 1\n";

#[test]
fn mesh_info_missing_file() {
    let dir = tmp("info_missing");
    let f = dir.join("absent.node");
    let out = jello(&["mesh", "info", f.to_str().unwrap()]);
    assert_one_line_error(&out, &["absent.node"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mesh_info_nan_coordinate() {
    let dir = tmp("info_nan");
    std::fs::write(
        dir.join("nan.node"),
        "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 NaN 0\n3 0 0 1\n4 1 1 1\n",
    )
    .unwrap();
    std::fs::write(dir.join("nan.ele"), "1 4 0\n0 0 1 2 3\n").unwrap();
    let out = jello(&["mesh", "info", dir.join("nan.node").to_str().unwrap()]);
    assert_one_line_error(&out, &["nan.node:4:", "not finite"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mesh_info_index_out_of_range() {
    let dir = tmp("info_oor");
    std::fs::write(dir.join("oor.node"), NODE).unwrap();
    std::fs::write(dir.join("oor.ele"), "2 4 0\n0 0 1 2 3\n1 1 2 3 5\n").unwrap();
    let out = jello(&["mesh", "info", dir.join("oor.node").to_str().unwrap()]);
    assert_one_line_error(&out, &["oor.ele:3:", "out of range"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scene_with_a_bad_mesh_file_names_the_mesh_file() {
    let dir = tmp("scene_bad_mesh");
    std::fs::write(dir.join("oor.node"), NODE).unwrap();
    std::fs::write(dir.join("oor.ele"), "1 4 0\n0 0 1 2 7\n").unwrap();
    let scene = BASE.replace(
        "generator = \"box\", min = [0.0, 0.0, 0.0], max = [1.0, 0.1, 0.1], cells = [4, 1, 1]",
        "file = \"oor.node\"",
    );
    let out = run_scene(&dir, "uses_bad_mesh.toml", &scene);
    assert_one_line_error(&out, &["oor.ele:2:", "out of range"]);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- success paths

/// Counts from the cantilever scene's box generator, read with a plain TOML parse (not jello's
/// scene code): a Kuhn grid has (cx+1)(cy+1)(cz+1) vertices and 6 cx cy cz tets.
fn cantilever_counts_and_h(path: &Path) -> (usize, usize, f64) {
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cells: Vec<usize> = v["objects"][0]["mesh"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_integer().unwrap() as usize)
        .collect();
    assert_eq!(v["objects"][0]["mesh"]["generator"].as_str(), Some("box"));
    let h = v["simulation"]["h"].as_float().unwrap();
    (
        (cells[0] + 1) * (cells[1] + 1) * (cells[2] + 1),
        6 * cells[0] * cells[1] * cells[2],
        h,
    )
}

fn run_cantilever(test: &str, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let dir = tmp(test);
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/cantilever.toml");
    let out_dir = dir.join("out");
    let out = common::cli::run_cpu(&scene, &out_dir, &[&["--steps", "3"], extra].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "jello run failed: {stderr}");
    assert!(!stderr.contains("panicked"));
    let stats = common::cli::stats(&out_dir);
    let (verts, tets, h) = cantilever_counts_and_h(&scene);
    assert_eq!(stats["solver"], "newton");
    assert_eq!(stats["backend"], "cpu");
    assert!(stats["adapter"].is_null(), "adapter: {}", stats["adapter"]);
    assert_eq!(stats["vertices"].as_u64(), Some(verts as u64));
    assert_eq!(stats["tets"].as_u64(), Some(tets as u64));
    assert_eq!(stats["h"].as_f64(), Some(h));
    let steps = stats["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for (i, s) in steps.iter().enumerate() {
        let it = s["iterations"].as_u64().expect("iterations");
        let converged = s["converged"].as_bool().expect("converged");
        let residual = s["residual"].as_f64().expect("residual");
        let energy = s["energy"].as_f64().expect("energy");
        let wall = s["wall_ms"].as_f64().expect("wall_ms");
        assert!(it <= 100, "step {i}: {it} iterations");
        assert!(converged, "step {i} did not converge");
        assert!(
            (0.0..1e-5).contains(&residual),
            "step {i}: residual {residual}"
        );
        assert!(energy.is_finite(), "step {i}: energy {energy}");
        assert!(wall.is_finite() && wall >= 0.0, "step {i}: wall_ms {wall}");
    }
    let frames = out_dir.join("frames");
    let pvd = std::fs::read_to_string(frames.join("sim.pvd")).expect("frames/sim.pvd");
    let vtus: Vec<String> = std::fs::read_dir(&frames)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".vtu"))
        .collect();
    // Frame 0 (initial state) and the last step (output.every = 5 > 3 steps).
    assert!(vtus.len() >= 2, "vtu frames: {vtus:?}");
    for v in &vtus {
        assert!(pvd.contains(v.as_str()), "sim.pvd does not list {v}");
        let text = std::fs::read_to_string(frames.join(v)).unwrap();
        assert!(text.contains("<VTKFile") && text.contains("UnstructuredGrid"));
        assert!(text.contains(&format!("NumberOfPoints=\"{verts}\"")), "{v}");
    }
    (dir, stats)
}

#[test]
fn run_writes_stats_and_frames() {
    let (dir, stats) = run_cantilever("run_ok", &[]);
    for s in stats["steps"].as_array().unwrap() {
        assert!(s.get("trace").is_none(), "trace without --trace");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_records_each_iteration() {
    let (dir, stats) = run_cantilever("run_trace", &["--trace"]);
    for (i, s) in stats["steps"].as_array().unwrap().iter().enumerate() {
        let trace = s["trace"].as_array().expect("trace with --trace");
        let it = s["iterations"].as_u64().unwrap() as usize;
        // Entry 0 is the initial guess, then one per iteration.
        assert_eq!(trace.len(), it + 1, "step {i}");
        for r in trace {
            assert!(r["residual"].as_f64().unwrap().is_finite());
            assert!(r["energy"].as_f64().unwrap().is_finite());
        }
        let last = trace.last().unwrap();
        assert_eq!(
            last["residual"].as_f64(),
            s["residual"].as_f64(),
            "step {i}"
        );
        // Trace energies are the step's energy change E(x_k) − E(x_start): 0 at the start, the
        // step's reported change at the end.
        assert_eq!(trace[0]["energy"].as_f64(), Some(0.0), "step {i}");
        assert_eq!(
            last["energy"].as_f64(),
            s["energy_change"].as_f64(),
            "step {i}"
        );
        // Newton with a line search never increases the energy.
        for w in trace.windows(2) {
            let (e0, e1) = (
                w[0]["energy"].as_f64().unwrap(),
                w[1]["energy"].as_f64().unwrap(),
            );
            assert!(
                e1 <= e0 + 1e-12 * e0.abs().max(1e-9),
                "step {i}: energy rose {e0} → {e1}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mesh_info_prints_the_counts() {
    // Counts and volume from tests/data/mesh/README.md (gmsh wrote the file, numpy summed it).
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mesh/gmsh_box_v41_ascii.msh");
    let out = jello(&["mesh", "info", f.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` line in:\n{text}"))[name.len()..]
            .trim()
            .to_string()
    };
    assert_eq!(field("vertices:"), "52");
    assert_eq!(field("tetrahedra:"), "114");
    let vol: f64 = field("volume:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((vol - 0.48).abs() < 1e-6, "volume {vol}");
}

#[test]
fn mesh_convert_round_trips() {
    let dir = tmp("convert");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mesh/gmsh_box_v41_ascii.msh");
    let node = dir.join("box.node");
    let msh = dir.join("box.msh");
    for (a, b) in [
        (src.as_path(), node.as_path()),
        (node.as_path(), msh.as_path()),
    ] {
        let out = jello(&["mesh", "convert", a.to_str().unwrap(), b.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("52 vertices, 114 tets"));
    }
    assert!(dir.join("box.ele").exists());
    let orig = jello::mesh::read_mesh(&src).unwrap().mesh;
    let back = jello::mesh::read_mesh(&msh).unwrap().mesh;
    assert_eq!(orig.tets, back.tets);
    assert_eq!(orig.positions.len(), back.positions.len());
    for (p, q) in orig.positions.iter().zip(&back.positions) {
        for k in 0..3 {
            assert!(
                (p[k] - q[k]).abs() <= 1e-12 * (1.0 + p[k].abs()),
                "{p:?} vs {q:?}"
            );
        }
    }
    // An unsupported output extension is a one-line error naming the file.
    let bad = dir.join("box.xyz");
    let out = jello(&[
        "mesh",
        "convert",
        src.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert_one_line_error(&out, &["box.xyz"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A step that hits the iteration cap is reported as not converged (stats.json, the per-step
/// log line and the summary), never silently accepted: a soft cantilever sagging from rest,
/// capped at one Newton iteration per step, with ε = 1e-10 (one iteration from the inertial
/// prediction leaves a residual around 1e-7..1e-6 here, so the cap is what ends every step).
#[test]
fn capped_iterations_report_non_converged_steps() {
    let dir = tmp("capped");
    let out = common::cli::run_scene_with(&dir, "capped.toml", common::cli::CAPPED_SCENE, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "jello run failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let stats = common::cli::stats(&dir.join("out"));
    let steps = stats["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let mut not_converged = 0;
    for (i, s) in steps.iter().enumerate() {
        let it = s["iterations"].as_u64().unwrap();
        let converged = s["converged"].as_bool().unwrap();
        let residual = s["residual"].as_f64().unwrap();
        assert!(it <= 1, "step {i}: {it} iterations past the cap of 1");
        // The flag is the stop rule itself: converged exactly when the residual is below ε.
        assert_eq!(converged, residual < 1e-10, "step {i}: residual {residual}");
        not_converged += !converged as usize;
    }
    assert!(
        not_converged > 0,
        "one iteration sufficed on every step; the test scene no longer exercises the cap"
    );
    assert_eq!(
        stats["converged_steps"].as_u64(),
        Some((steps.len() - not_converged) as u64)
    );
    // Non-terminal stderr: one plain line per step; each capped step says so.
    assert_eq!(
        stderr.matches("(NOT converged)").count(),
        not_converged,
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "{}/{} converged",
            steps.len() - not_converged,
            steps.len()
        )),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no adapter visible (WGPU_BACKEND names an API this platform lacks), `--backend auto`
/// runs on the CPU and says so in stats.json and the summary, while `--backend gpu` is an error
/// (exit 1, no panic), as is a WGPU_ADAPTER_NAME that matches nothing.
#[test]
fn auto_backend_falls_back_to_the_cpu_without_an_adapter() {
    let absent_api = if cfg!(target_os = "macos") {
        "dx12"
    } else {
        "metal"
    };
    let dir = tmp("no_adapter");
    let scene = dir.join("base.toml");
    std::fs::write(&scene, BASE).unwrap();
    let xdg = dir.join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let run = |backend: &str, env: (&str, &str)| {
        let out = dir.join(format!("out_{backend}"));
        Command::new(BIN)
            .args([
                "run",
                scene.to_str().unwrap(),
                "--backend",
                backend,
                "--out",
                out.to_str().unwrap(),
            ])
            .env("XDG_RUNTIME_DIR", &xdg)
            .env(env.0, env.1)
            .output()
            .unwrap()
    };

    let auto = run("auto", ("WGPU_BACKEND", absent_api));
    let stderr = String::from_utf8_lossy(&auto.stderr);
    assert!(auto.status.success(), "{stderr}");
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out_auto/stats.json")).unwrap()).unwrap();
    assert_eq!(stats["backend"], "cpu");
    assert!(stats["adapter"].is_null(), "adapter: {}", stats["adapter"]);
    assert!(
        String::from_utf8_lossy(&auto.stdout).contains("backend cpu:"),
        "{}",
        String::from_utf8_lossy(&auto.stdout)
    );

    for (env, needle) in [
        (("WGPU_BACKEND", absent_api), "no GPU adapter"),
        (
            ("WGPU_ADAPTER_NAME", "no-such-adapter-xyz"),
            "WGPU_ADAPTER_NAME",
        ),
    ] {
        let gpu = run("gpu", env);
        let stderr = String::from_utf8_lossy(&gpu.stderr);
        assert_eq!(gpu.status.code(), Some(1), "{env:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let last = stderr.lines().last().unwrap_or("");
        assert!(last.contains(needle), "{env:?}: `{last}`");
        assert!(!dir.join("out_gpu/stats.json").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------- sizes and special files (issue 9)

#[test]
fn huge_sizes_are_one_line_errors() {
    let steps = format!("steps = {}", jello::limits::MAX_STEPS + 1);
    bad_scene(
        "steps_cap",
        "steps = 2",
        &steps,
        &["`simulation.steps`", "MAX_STEPS"],
    );
    // The product of these wraps to 0 in 64-bit arithmetic.
    bad_scene(
        "cells_wrap",
        "cells = [4, 1, 1]",
        "cells = [4294967296, 4294967296, 4]",
        &["`objects[0].mesh.cells`", "MAX_GENERATOR_CELLS"],
    );
    bad_scene(
        "scale_tiny",
        "density = 1000.0 }",
        "density = 1000.0 }\ntransform = { scale = 1e-300 }",
        &["`objects[0].transform.scale`", "degenerate"],
    );
}

/// `jello run` on a FIFO as the scene, and on a scene whose mesh is /dev/zero: refused from
/// the metadata with one line, within seconds (opening the FIFO would block forever).
#[cfg(unix)]
#[test]
fn special_files_are_refused_without_hanging() {
    let dir = tmp("special_files");
    let fifo = dir.join("scene_pipe.toml");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let zero_mesh = dir.join("zero.msh");
    std::os::unix::fs::symlink("/dev/zero", &zero_mesh).unwrap();
    let scene = dir.join("zero_mesh.toml");
    std::fs::write(
        &scene,
        BASE.replace(
            "generator = \"box\", min = [0.0, 0.0, 0.0], max = [1.0, 0.1, 0.1], cells = [4, 1, 1]",
            "file = \"zero.msh\"",
        ),
    )
    .unwrap();
    let mut cases = vec![(scene, "zero.msh", "character device")];
    if made.map(|s| s.success()).unwrap_or(false) {
        cases.push((fifo, "scene_pipe.toml", "FIFO"));
    }
    for (path, name, needle) in cases {
        let mut child = Command::new(BIN)
            .args([
                "run",
                path.to_str().unwrap(),
                "--out",
                dir.join("out").to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("jello run {} hung", path.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert_one_line_error(&out, &[name, needle]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
