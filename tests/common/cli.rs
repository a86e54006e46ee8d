//! Helpers for the tests that run the `jello` binary or parse scene text.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A valid scene the error cases perturb: a 1 m bar of 4 box cells, 2 steps of 10 ms (line
/// numbers matter to some tests: `h` is on line 2).
pub const BAR_SCENE: &str = r#"[simulation]
h = 0.01
steps = 2
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "bar"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [1.0, 0.1, 0.1], cells = [4, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e6, poisson_ratio = 0.3, density = 1000.0 }
"#;

/// One Newton iteration per step at ε = 1e-10 leaves every step of this soft cantilever
/// sagging from rest unconverged (one iteration from the inertial prediction leaves a residual
/// around 1e-7..1e-6, so the cap is what ends every step).
pub const CAPPED_SCENE: &str = r#"[simulation]
h = 0.02
steps = 3
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"
tolerance = 1e-10
max_iterations = 1

[[objects]]
name = "beam"
mesh = { generator = "box", min = [0.0, -0.05, -0.05], max = [1.0, 0.05, 0.05], cells = [10, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e4, poisson_ratio = 0.3, density = 1000.0 }

[[pins]]
region = { box = { min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] } }
script = { type = "fixed" }
"#;

/// A fresh temp directory `jello_{prefix}_{pid}_{test}` for one test.
pub fn tmp_dir(prefix: &str, test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_{prefix}_{}_{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the `jello` binary with `args`.
pub fn jello(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jello"))
        .args(args)
        .output()
        .expect("run jello")
}

/// Runs `jello run SCENE --backend cpu --out OUT` with `flags` after those.
pub fn run_cpu(scene: &Path, out: &Path, flags: &[&str]) -> Output {
    let mut args = vec![
        "run",
        scene.to_str().unwrap(),
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    jello(&args)
}

/// Writes `text` as DIR/NAME and runs `jello run` on it into DIR/out on the CPU, with `flags`.
pub fn run_scene_with(dir: &Path, name: &str, text: &str, flags: &[&str]) -> Output {
    let scene = dir.join(name);
    std::fs::write(&scene, text).unwrap();
    run_cpu(&scene, &dir.join("out"), flags)
}

/// A run directory's stats.json.
pub fn stats(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("stats.json")).unwrap()).unwrap()
}
