//! Checkpoint and resume: N steps in one run equal N/2 steps plus a resume to N — and a run
//! cancelled mid-interval (between frames) plus a resume — bit for bit on the CPU for every
//! solver, and within the GPU tolerance on the GPU; stats.json, sim.pvd and the manifest then
//! read as one run. A resume that would not continue the same trajectory (another solver, stop
//! rule or backend, an edited scene or mesh, a corrupt checkpoint) is a one-line error that
//! leaves the directory alone; a complete run says so and exits 0.

use crate::common;

use jello::gpu::Backend;
use jello::output::{Checkpoint, RunStats, RunStatus};
use jello::runner::{run, RunOptions};
use jello::scene::Scene;
use jello::sim::Simulation;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_jello");

/// A bar pinned at one end to a moving script, thrown down onto the ground with a force that
/// switches on mid-run: the trajectory depends on time, velocity, contact and pins, so a resume
/// that restored less than all of them would drift. 28 vertices (JGS2's precompute is instant).
const SCENE: &str = r#"[simulation]
h = 0.02
steps = 8
gravity = [0.0, -9.81, 0.0]

[output]
every = 3

[[objects]]
name = "bar"
mesh = { generator = "box", min = [0.0, 0.02, -0.05], max = [0.6, 0.12, 0.05], cells = [6, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 2e4, poisson_ratio = 0.3, density = 1000.0 }
velocity = [0.0, -0.5, 0.2]

[[pins]]
region = { box = { min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] } }
script = { type = "translate", velocity = [0.0, 0.0, 0.3] }

[[forces]]
region = { box = { min = [0.55, -1.0, -1.0], max = [0.7, 1.0, 1.0] } }
force = [0.0, 0.0, -2.0]
start = 0.05

[[obstacles]]
type = "ground"
height = 0.0
"#;

/// A fresh directory holding `scene.toml` (its own `.jello-cache`).
fn scene_in(test: &str) -> (PathBuf, PathBuf) {
    scene_text_in(test, SCENE)
}

/// A fresh directory holding `text` as `scene.toml`.
fn scene_text_in(test: &str, text: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("jello_resume_{}_{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scene = dir.join("scene.toml");
    std::fs::write(&scene, text).unwrap();
    (dir, scene)
}

/// [`SCENE`] integrated with BDF2: a resume must also restore the previous step's state.
fn bdf2_scene() -> String {
    SCENE.replace("steps = 8\n", "steps = 8\nintegrator = \"bdf2\"\n")
}

/// Runs `scene` with `solver` to `steps` into `out` through the library; cancels (as SIGINT
/// does) after step `cancel_after`.
fn go(
    scene: &Path,
    out: &Path,
    solver: &str,
    steps: usize,
    backend: Backend,
    resume: bool,
    cancel_after: Option<usize>,
) -> jello::Result<(Simulation, RunStats)> {
    let mut built = Scene::load(scene)?.build()?;
    built.config.solver = solver.parse().unwrap();
    built.config.steps = steps;
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = RunOptions {
        out_dir: Some(out.to_path_buf()),
        backend,
        resume,
        cancel: Some(cancel.clone()),
        ..Default::default()
    };
    run(scene, built, &opts, |step, _| {
        if Some(step) == cancel_after {
            cancel.store(true, Ordering::SeqCst);
        }
    })
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap()
}

fn assert_bits_eq(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "{what}[{i}]: {x:e} vs {y:e}");
    }
}

/// The `file=` entries of a `.pvd`.
fn pvd_files(pvd: &Path) -> Vec<String> {
    std::fs::read_to_string(pvd)
        .unwrap()
        .lines()
        .filter_map(|l| l.split("file=\"").nth(1))
        .map(|r| r.split('"').next().unwrap().to_string())
        .collect()
}

/// The resumed directory reads as one run of `n` steps equal to `straight`'s: stats steps
/// 1..n with the same per-step solver results, a manifest listing only existing files, a
/// series of existing frames at `frames` steps.
fn assert_one_run(dir: &Path, straight: &Path, n: usize, frames: &[usize], resumed_at: usize) {
    let s = json(&dir.join("stats.json"));
    let a = json(&straight.join("stats.json"));
    assert_eq!(s["status"], "complete");
    assert_eq!(s["completed_steps"].as_u64(), Some(n as u64));
    assert_eq!(s["resumed_at"], serde_json::json!([resumed_at]));
    let (steps, want) = (
        s["steps"].as_array().unwrap(),
        a["steps"].as_array().unwrap(),
    );
    assert_eq!(steps.len(), n);
    for (k, (x, y)) in steps.iter().zip(want).enumerate() {
        assert_eq!(x["step"].as_u64(), Some(k as u64 + 1));
        // Same JSON text for every solver output means the same f64 bits.
        for f in ["time", "iterations", "converged", "residual", "energy"] {
            assert_eq!(x[f], y[f], "{}: step {} {f}", dir.display(), k + 1);
        }
    }
    for f in [
        "converged_steps",
        "total_iterations",
        "first_unconverged_step",
    ] {
        assert_eq!(s[f], a[f], "{f}");
    }
    let m = json(&dir.join("manifest.json"));
    assert_eq!(m["status"], "complete");
    assert_eq!(m["last_complete_step"].as_u64(), Some(n as u64));
    assert_eq!(m["resumed_at"], serde_json::json!([resumed_at]));
    for f in m["files"].as_array().unwrap() {
        assert!(
            dir.join(f.as_str().unwrap()).exists(),
            "listed but missing: {f}"
        );
    }
    let names: Vec<String> = frames.iter().map(|k| format!("frame_{k:05}.vtu")).collect();
    assert_eq!(pvd_files(&dir.join("frames/sim.pvd")), names);
    let on_disk = std::fs::read_dir(dir.join("frames"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".vtu")
        })
        .count();
    assert_eq!(on_disk, frames.len());
}

#[test]
fn n_steps_equal_a_resumed_run_bit_for_bit_on_the_cpu_for_every_solver() {
    let (dir, scene) = scene_in("cpu");
    resumes_bit_for_bit(&dir, &scene, false);
}

/// The same under BDF2: the checkpoint carries xⁿ⁻¹ and vⁿ⁻¹ (a resume that dropped them would
/// take an implicit-Euler step and drift), and a resumed run equals the straight one bit for
/// bit.
#[test]
fn a_bdf2_run_resumes_bit_for_bit_on_the_cpu_for_every_solver() {
    let (dir, scene) = scene_text_in("cpu_bdf2", &bdf2_scene());
    resumes_bit_for_bit(&dir, &scene, true);
}

/// A BDF2 checkpoint after step 0 without its history (hand-made: this build always writes
/// it) cannot continue the trajectory: the resume is refused with one line, not continued
/// with an implicit-Euler step.
#[test]
fn a_bdf2_checkpoint_without_history_is_refused() {
    let (dir, scene) = scene_text_in("bdf2_no_history", &bdf2_scene());
    let out = dir.join("run");
    go(&scene, &out, "newton", 4, Backend::Cpu, false, None).unwrap();
    let path = out.join("checkpoint.bin");
    let mut c = Checkpoint::read(&path).unwrap();
    assert!(c.header.history && c.history.is_some());
    c.header.history = false;
    c.history = None;
    c.write(&path).unwrap();
    let e = match go(&scene, &out, "newton", 8, Backend::Cpu, true, None) {
        Ok(_) => panic!("a BDF2 resume without history was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("--resume") && e.contains("bdf2") && !e.contains('\n'),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Straight, half + resume and cancelled + resume runs of `scene` for every CPU solver, equal
/// bit for bit (`history`: the integrator keeps the previous step, and so must the
/// checkpoints).
fn resumes_bit_for_bit(dir: &Path, scene: &Path, history: bool) {
    let n = 8;
    for solver in ["newton", "jgs2", "vbd", "qn", "admm"] {
        let d = |s: &str| dir.join(format!("{solver}_{s}"));
        let (a, sa) = go(scene, &d("straight"), solver, n, Backend::Cpu, false, None).unwrap();
        assert_eq!(sa.status, RunStatus::Complete);
        // Half, complete; then extended to n.
        let (_, s1) = go(scene, &d("half"), solver, n / 2, Backend::Cpu, false, None).unwrap();
        assert_eq!(s1.completed_steps, n / 2);
        let (b, sb) = go(scene, &d("half"), solver, n, Backend::Cpu, true, None).unwrap();
        assert_eq!(sb.status, RunStatus::Complete);
        assert_eq!(sb.steps.len(), n / 2, "this call's steps");
        assert_eq!(sb.listed_steps(), n);
        // Cancelled after step 5 (between the frames at 3 and 6), then resumed.
        let (_, s1) = go(scene, &d("cut"), solver, n, Backend::Cpu, false, Some(5)).unwrap();
        assert_eq!(s1.status, RunStatus::Interrupted);
        assert_eq!(s1.completed_steps, 5);
        assert_eq!(
            Checkpoint::read(&d("cut").join("checkpoint.bin"))
                .unwrap()
                .header
                .step,
            5
        );
        let (c, _) = go(scene, &d("cut"), solver, n, Backend::Cpu, true, None).unwrap();

        for (sim, what) in [(&b, "half + resume"), (&c, "cancelled + resume")] {
            eprintln!(
                "{solver}: {what}: comparing {} positions",
                sim.state.x.len()
            );
            assert_bits_eq(&sim.state.x, &a.state.x, &format!("{solver} {what} x"));
            assert_bits_eq(&sim.state.v, &a.state.v, &format!("{solver} {what} v"));
            assert_eq!(sim.state.history.is_some(), history, "{solver} {what}");
            assert_eq!(a.state.history.is_some(), history, "{solver} straight");
            if let (Some(p), Some(q)) = (&sim.state.history, &a.state.history) {
                assert_bits_eq(&p.x, &q.x, &format!("{solver} {what} previous x"));
                assert_bits_eq(&p.v, &q.v, &format!("{solver} {what} previous v"));
            }
            assert_eq!(
                sim.state.t.to_bits(),
                a.state.t.to_bits(),
                "{solver} {what} t"
            );
        }
        let ck = Checkpoint::read(&d("straight").join("checkpoint.bin")).unwrap();
        for s in ["half", "cut"] {
            let c = Checkpoint::read(&d(s).join("checkpoint.bin")).unwrap();
            assert_eq!(c.header.step, n);
            assert_bits_eq(&c.x, &ck.x, "checkpoint x");
            assert_bits_eq(&c.v, &ck.v, "checkpoint v");
            assert_eq!(c.header.history, history);
            assert_eq!(c.history.is_some(), history);
            if let (Some(p), Some(q)) = (&c.history, &ck.history) {
                assert_bits_eq(&p.x, &q.x, "checkpoint previous x");
                assert_bits_eq(&p.v, &q.v, "checkpoint previous v");
            }
        }
        assert_one_run(&d("half"), &d("straight"), n, &[0, 3, 4, 6, 8], n / 2);
        assert_one_run(&d("cut"), &d("straight"), n, &[0, 3, 5, 6, 8], 5);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The device solvers (Newton's element work on the GPU; JGS2/VBD entirely on it, f32):
/// straight vs half + resume, where `--backend auto` on the resume continues on the
/// checkpoint's GPU. Bound: the per-step deviation bound of tests/gpu/gpu_compare.rs (1e-5 of the
/// bounding-box diagonal). A GPU test: it FAILS without an adapter unless
/// JELLO_SKIP_GPU_TESTS=1.
#[test]
fn a_resumed_gpu_run_stays_within_the_gpu_tolerance() {
    if common::gpu_device().is_none() {
        return;
    }
    let (dir, scene) = scene_in("gpu");
    let n = 6;
    let model = Scene::load(&scene).unwrap().build().unwrap().model;
    let (lo, hi) = model.mesh.bounding_box().unwrap();
    let diagonal = (0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>().sqrt();
    for solver in ["newton", "jgs2", "vbd"] {
        let d = |s: &str| dir.join(format!("{solver}_{s}"));
        let (a, sa) = go(&scene, &d("straight"), solver, n, Backend::Gpu, false, None).unwrap();
        assert_eq!(sa.backend, "gpu");
        go(&scene, &d("half"), solver, n / 2, Backend::Gpu, false, None).unwrap();
        let (b, sb) = go(&scene, &d("half"), solver, n, Backend::Auto, true, None).unwrap();
        assert_eq!(
            sb.backend, "gpu",
            "auto must continue on the checkpoint's backend"
        );
        assert!(
            sb.backend_reason.contains("checkpoint"),
            "{}",
            sb.backend_reason
        );
        let worst = a
            .state
            .x
            .chunks_exact(3)
            .zip(b.state.x.chunks_exact(3))
            .map(|(p, q)| (0..3).map(|k| (p[k] - q[k]).powi(2)).sum::<f64>().sqrt())
            .fold(0.0, f64::max)
            / diagonal;
        eprintln!(
            "{solver} on the GPU: straight vs resumed, max deviation {worst:.3e} of the diagonal"
        );
        assert!(worst < 1e-5, "{solver}: {worst:e}");
        assert_eq!(a.state.t.to_bits(), b.state.t.to_bits());
        // Asked for explicitly, the CPU is refused on a GPU checkpoint.
        let e = match go(&scene, &d("half"), solver, n + 1, Backend::Cpu, true, None) {
            Ok(_) => panic!("{solver}: a CPU resume of a GPU checkpoint was accepted"),
            Err(e) => e,
        };
        assert!(e.to_string().contains("gpu backend"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------ the binary

fn jello_run(scene: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args([
            "run",
            scene.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Exit 1 with one stderr line holding every needle.
fn assert_one_line_error(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "expected one line: {err}");
    for n in needles {
        assert!(err.contains(n), "expected `{n}` in `{err}`");
    }
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let b = std::fs::read(&p).unwrap();
                out.push((p, b));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_resume_that_would_not_continue_the_same_trajectory_is_refused() {
    let (dir, scene) = scene_in("refuse");
    let out = dir.join("out");
    let o = jello_run(&scene, &out, &["--backend", "cpu", "--steps", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = snapshot(&out);
    let edited = |from: &str, to: &str| {
        let s = dir.join("edited.toml");
        std::fs::write(&s, SCENE.replace(from, to)).unwrap();
        s
    };
    let cases: Vec<(PathBuf, Vec<&str>, Vec<&str>)> = vec![
        (
            scene.clone(),
            vec!["--solver", "vbd"],
            vec!["solver", "`newton`", "`vbd`"],
        ),
        (
            scene.clone(),
            vec!["--stop", "dx"],
            vec!["stop rule", "`cn`", "`dx`"],
        ),
        (
            scene.clone(),
            vec!["--steps", "3"],
            vec!["step 4", "past the 3 steps"],
        ),
        (
            scene.clone(),
            vec!["--backend", "gpu"],
            vec!["cpu backend", "--backend cpu"],
        ),
        (
            edited("youngs_modulus = 2e4", "youngs_modulus = 3e4"),
            vec![],
            vec!["scene changed"],
        ),
        (
            edited("h = 0.02", "h = 0.01"),
            vec![],
            vec!["scene changed"],
        ),
    ];
    for (s, flags, needles) in cases {
        let mut args = vec!["--resume"];
        args.extend(flags.iter());
        let o = jello_run(&s, &out, &args);
        let mut all = needles.clone();
        all.push("--resume");
        assert_one_line_error(&o, &all);
        assert_eq!(snapshot(&out), before, "{flags:?} touched the run");
    }
    // Steps, outputs and comments may change: that continues the same trajectory.
    let extended = edited("steps = 8\n", "steps = 6 # two more\n").to_path_buf();
    let text = std::fs::read_to_string(&extended)
        .unwrap()
        .replace("every = 3", "every = 1");
    std::fs::write(&extended, format!("# a comment\n{text}")).unwrap();
    let o = jello_run(&extended, &out, &["--resume"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&out.join("stats.json"))["completed_steps"], 6);

    // A corrupt checkpoint is named, never trusted.
    let ck = out.join("checkpoint.bin");
    let mut bytes = std::fs::read(&ck).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&ck, &bytes).unwrap();
    let o = jello_run(&extended, &out, &["--resume", "--steps", "7"]);
    assert_one_line_error(&o, &["checkpoint.bin", "checksum"]);
    std::fs::remove_file(&ck).unwrap();
    let o = jello_run(&extended, &out, &["--resume", "--steps", "7"]);
    assert_one_line_error(&o, &["no checkpoint", "checkpoint.bin"]);
    // Nothing to resume at all.
    let o = jello_run(&scene, &dir.join("empty"), &["--resume"]);
    assert_one_line_error(&o, &["empty", "no run to resume"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An edited mesh file changes the trajectory even though the scene text is the same.
#[test]
fn a_resume_after_the_mesh_file_changed_is_refused() {
    let (dir, _) = scene_in("mesh");
    let node = "5 3 0 0\n0 0 0.1 0\n1 1 0.1 0\n2 0 1.1 0\n3 0 0.1 1\n4 1 1.1 1\n";
    std::fs::write(dir.join("m.node"), node).unwrap();
    std::fs::write(dir.join("m.ele"), "2 4 0\n0 0 1 2 3\n1 1 2 3 4\n").unwrap();
    let text = SCENE
        .replace(
            "generator = \"box\", min = [0.0, 0.02, -0.05], max = [0.6, 0.12, 0.05], cells = [6, 1, 1]",
            "file = \"m.node\"",
        )
        .replace("max = [0.001, 1.0, 1.0]", "max = [0.001, 0.15, 0.001]")
        .replace("min = [0.55, -1.0, -1.0], max = [0.7, 1.0, 1.0]", "min = [0.9, -1.0, -1.0], max = [1.1, 2.0, 2.0]");
    let scene = dir.join("mesh.toml");
    std::fs::write(&scene, &text).unwrap();
    let out = dir.join("out");
    let o = jello_run(&scene, &out, &["--backend", "cpu", "--steps", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(dir.join("m.node"), node.replace("4 1 1.1 1", "4 1 1.2 1")).unwrap();
    let o = jello_run(&scene, &out, &["--resume", "--steps", "3"]);
    assert_one_line_error(&o, &["scene changed", "mesh"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resuming_a_complete_run_says_so_and_changes_nothing() {
    let (dir, scene) = scene_in("complete");
    let out = dir.join("out");
    let o = jello_run(&scene, &out, &["--backend", "cpu", "--steps", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = snapshot(&out);
    let o = jello_run(&scene, &out, &["--resume", "--steps", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("already complete (3 steps)"), "{stdout}");
    assert_eq!(snapshot(&out), before);
}
