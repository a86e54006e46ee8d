//! `jello precompute` and `jello run --solver jgs2|vbd` on the CPU backend: the subspace
//! artifact is written once and reused, a corrupted one is rebuilt with a one-line warning,
//! stats.json names the solver variant, and every step converges.

use crate::common;

use common::cli::{jello, run_cpu, stats};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A copy of the twist scene in a fresh directory (so its `.jello-cache` is the test's own).
fn scene_copy(test: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("jello-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist.toml");
    let scene = dir.join("twist.toml");
    std::fs::copy(src, &scene).unwrap();
    (dir, scene)
}

fn run(scene: &Path, out: &Path, extra: &[&str]) -> (Output, serde_json::Value) {
    let flags = [&["--steps", "4"], extra].concat();
    let o = run_cpu(scene, out, &flags);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (o, stats(out))
}

fn artifacts(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join(".jello-cache"))
        .map(|r| r.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn precompute_once_then_reuse_and_rebuild_when_corrupt() {
    let (dir, scene) = scene_copy("jgs2-cache");
    let pre = jello(&["precompute", scene.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&pre.stdout);
    assert!(
        pre.status.success(),
        "{}",
        String::from_utf8_lossy(&pre.stderr)
    );
    assert!(
        text.contains("built") && text.contains("bytes/vertex"),
        "{text}"
    );
    let files = artifacts(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let again = jello(&["precompute", scene.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("up to date"));

    // `run` reuses the artifact: no precompute line on stderr.
    let (o, stats) = run(&scene, &dir.join("a"), &["--solver", "jgs2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("jgs2 precompute"),
        "rebuilt although cached: {err}"
    );
    assert_eq!(stats["solver"], "jgs2-jacobi");
    for s in stats["steps"].as_array().unwrap() {
        assert_eq!(s["converged"], true, "{s}");
    }
    let (_, stats) = run(
        &scene,
        &dir.join("b"),
        &["--solver", "jgs2", "--variant", "gs"],
    );
    assert_eq!(stats["solver"], "jgs2-gs");

    // Corrupt the artifact: rebuilt with one warning naming the file, never trusted.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&files[0], &bytes).unwrap();
    let (o, _) = run(&scene, &dir.join("c"), &["--solver", "jgs2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains(".jello-cache") && warnings[0].contains("rebuilding"),
        "{err}"
    );
    assert!(err.contains("jgs2 precompute"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under BDF2 the subspace is built for ĥ = 2h/3 (the inertia weight of BDF2's steady steps):
/// `precompute` and `run` agree on it (the run reuses the artifact), and it is another artifact
/// than the implicit-Euler scene's.
#[test]
fn a_bdf2_scene_precomputes_the_subspace_its_run_uses() {
    let (dir, scene) = scene_copy("jgs2-bdf2");
    let text = std::fs::read_to_string(&scene).unwrap();
    let pre = jello(&["precompute", scene.to_str().unwrap()]);
    assert!(pre.status.success());
    assert_eq!(artifacts(&dir).len(), 1);
    let bdf2 = text.replacen("[simulation]\n", "[simulation]\nintegrator = \"bdf2\"\n", 1);
    assert_ne!(bdf2, text);
    std::fs::write(&scene, bdf2).unwrap();
    let pre = jello(&["precompute", scene.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&pre.stdout);
    assert!(pre.status.success() && out.contains("built"), "{out}");
    assert_eq!(
        artifacts(&dir).len(),
        2,
        "BDF2's subspace is its own artifact"
    );
    let (o, stats) = run(&scene, &dir.join("a"), &["--solver", "jgs2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("jgs2 precompute"),
        "rebuilt although precomputed: {err}"
    );
    for s in stats["steps"].as_array().unwrap() {
        assert_eq!(s["converged"], true, "{s}");
    }
    assert_eq!(artifacts(&dir).len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn vbd_runs_and_reports_its_iterations() {
    let (dir, scene) = scene_copy("vbd");
    let (_, stats) = run(&scene, &dir.join("out"), &["--solver", "vbd"]);
    assert_eq!(stats["solver"], "vbd");
    let steps = stats["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    for s in steps {
        assert_eq!(s["converged"], true, "{s}");
        assert!(s["iterations"].as_u64().unwrap() >= 1);
    }
    assert!(artifacts(&dir).is_empty(), "VBD needs no subspace");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `[solver] far_tolerance` / `far_order` reach the precompute (they choose node fits over the
/// default H-matrix): each setting is its own cache entry, and keeping every row (tolerance 0)
/// costs more bytes per vertex than the default; both kinds at once are refused.
#[test]
fn scene_far_field_settings_reach_the_precompute() {
    let (dir, scene) = scene_copy("far-settings");
    // The far-field keys are JGS2's: the scene names it (a newton scene refuses them).
    let text = std::fs::read_to_string(&scene)
        .unwrap()
        .replace("name = \"newton\"", "name = \"jgs2\"");
    assert!(text.contains("name = \"jgs2\""), "the scene's solver moved");
    let bytes_per_vertex = |extra: &str| -> f64 {
        let t = text.replace("tolerance = 1e-5\n", &format!("tolerance = 1e-5\n{extra}"));
        assert!(
            extra.is_empty() || t != text,
            "the scene's [solver] section moved"
        );
        std::fs::write(&scene, t).unwrap();
        let o = jello(&["precompute", scene.to_str().unwrap()]);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("built"), "not rebuilt for `{extra}`: {out}");
        let words: Vec<&str> = out.split_whitespace().collect();
        let k = words
            .iter()
            .position(|w| *w == "bytes/vertex")
            .expect("bytes/vertex");
        words[k - 1].parse().unwrap()
    };
    let default = bytes_per_vertex("");
    let means = bytes_per_vertex("far_order = 0\n");
    let exact = bytes_per_vertex("far_tolerance = 0.0\n");
    assert_eq!(artifacts(&dir).len(), 3, "one cache entry per setting");
    // A node-fit key beside the H-matrix's is one error naming the key, not a silent choice.
    let t = text.replace(
        "tolerance = 1e-5\n",
        "tolerance = 1e-5\nfar_order = 0\nfar_hmatrix_eps = 1e-3\n",
    );
    std::fs::write(&scene, t).unwrap();
    let o = jello(&["precompute", scene.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("solver.far_hmatrix_eps"),
        "both far-field kinds: {err}"
    );
    assert!(
        exact > default && exact > means,
        "exact rows {exact} B/vertex vs default {default}, node means {means}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An IPC contact scene (the colliding balls, coarser) runs with `--solver jgs2` and `vbd` on
/// the CPU backend through the impact, and with `--backend gpu` on the device into contact (the
/// balls started closer), every step converged. Four tests, so that the suite's two threads run
/// them side by side (VBD's halves are the longest).
#[test]
fn jgs2_runs_an_ipc_scene_on_the_cpu() {
    ipc_scene_run("jgs2", false);
}

#[test]
fn jgs2_runs_an_ipc_scene_on_the_device() {
    ipc_scene_run("jgs2", true);
}

#[test]
fn vbd_runs_an_ipc_scene_on_the_cpu() {
    ipc_scene_run("vbd", false);
}

#[test]
fn vbd_runs_an_ipc_scene_on_the_device() {
    ipc_scene_run("vbd", true);
}

/// One half of the IPC scene runs: 8 steps on the CPU backend through the impact, or 2 steps on
/// the device with the balls started 0.02 m apart (lavapipe is slow: they meet in the first 5 ms
/// step, and the second is in contact).
fn ipc_scene_run(solver: &str, device: bool) {
    let dir = std::env::temp_dir().join(format!(
        "jello-cli-{solver}-ipc-{device}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/contact_balls.toml");
    let text = std::fs::read_to_string(src).unwrap();
    assert_eq!(
        text.matches("resolution = 6").count(),
        2,
        "contact_balls.toml changed"
    );
    let text = text.replace("resolution = 6", "resolution = 3");
    if !device {
        let scene = dir.join("balls.toml");
        std::fs::write(&scene, &text).unwrap();
        // The balls meet after ~25 ms (5 steps of 5 ms): 8 steps press them together.
        let out = dir.join(solver);
        let o = run_cpu(&scene, &out, &["--solver", solver, "--steps", "8"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let cpu_stats = stats(&out);
        let steps = cpu_stats["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 8);
        for s in steps {
            assert_eq!(s["converged"], true, "{solver}: {s}");
        }
    } else {
        let close = dir.join("close.toml");
        let moved = text
            .replace("center = [-0.15, 0.0, 0.0]", "center = [-0.11, 0.0, 0.0]")
            .replace(
                "center = [0.15, 0.02, 0.013]",
                "center = [0.11, 0.02, 0.013]",
            );
        assert_ne!(moved, text, "contact_balls.toml's centres changed");
        std::fs::write(&close, moved).unwrap();
        let gpu_out = dir.join(format!("{solver}-gpu"));
        let o = jello(&[
            "run",
            close.to_str().unwrap(),
            "--solver",
            solver,
            "--backend",
            "gpu",
            "--steps",
            "2",
            "--out",
            gpu_out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{solver} --backend gpu: {err}");
        let gpu_stats = stats(&gpu_out);
        let steps = gpu_stats["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2);
        assert_eq!(gpu_stats["backend"], "gpu", "{solver}: ran on the device");
        for s in steps {
            assert_eq!(s["converged"], true, "{solver} on the device: {s}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
