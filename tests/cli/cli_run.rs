//! `jello run` and its run directory: the manifest says what the directory holds and how far
//! the run got, a second run never mixes its files with another's (refused, or `--overwrite`
//! removing exactly the old run's files), a failed run keeps its last good frame and says why,
//! SIGINT/SIGTERM stop cleanly with status `interrupted`, stats.json separates output time from
//! step time, `--require-converged` fails a run with an unconverged step, `--backend auto`
//! never lands on a software adapter, and `--solver qn` runs an IPC scene on the CPU.

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_jello");

const BASE: &str = common::cli::BAR_SCENE;

fn tmp(test: &str) -> PathBuf {
    common::cli::tmp_dir("run", test)
}

use common::cli::{jello, run_scene_with};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn assert_ok(o: &Output) {
    assert!(o.status.success(), "jello failed: {}", stderr(o));
    assert!(!stderr(o).contains("panicked"), "{}", stderr(o));
}

/// Non-zero exit `code`; the LAST stderr line mentions every needle, is not a panic, and is
/// the only line that is not per-step progress or the banner. Returns it.
fn assert_last_line_error(out: &Output, code: i32, needles: &[&str]) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(!err.contains("RUST_BACKTRACE"), "panic: {err}");
    let lines: Vec<&str> = err.lines().collect();
    let last = *lines.last().expect("a message");
    for l in &lines[..lines.len() - 1] {
        assert!(
            l.starts_with("step ")
                || l.starts_with("jello: ")
                || l.starts_with("backend ")
                || l.starts_with("note: "),
            "unexpected extra stderr line `{l}` in: {err}"
        );
    }
    for n in needles {
        assert!(last.contains(n), "expected `{n}` in `{last}`");
    }
    last.to_string()
}

/// Exactly one stderr line (exit 1), mentioning every needle.
fn assert_one_line_error(out: &Output, needles: &[&str]) -> String {
    let err = stderr(out);
    assert_eq!(
        err.lines().count(),
        1,
        "expected one stderr line, got: {err}"
    );
    assert_last_line_error(out, 1, needles)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap()
}

/// Every regular file under `dir`, relative, with `/` separators.
fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy();
                out.insert(rel.replace('\\', "/"));
            }
        }
    }
    let mut out = BTreeSet::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    files_under(dir)
        .into_iter()
        .map(|f| {
            let b = std::fs::read(dir.join(&f)).unwrap();
            (f, b)
        })
        .collect()
}

/// FNV-1a-64, written out here so the manifest's hash is checked independently.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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

#[test]
fn manifest_and_stats_say_what_the_directory_holds() {
    let dir = tmp("manifest");
    let text = BASE.replace("steps = 2", "steps = 5") + "\n[output]\nevery = 2\n";
    let o = run_scene_with(&dir, "bar.toml", &text, &["--obj"]);
    assert_ok(&o);
    let out = dir.join("out");
    let m = json(&out.join("manifest.json"));
    assert_eq!(m["status"], "complete");
    assert_eq!(m["requested_steps"], 5);
    assert_eq!(m["completed_steps"], 5);
    assert_eq!(m["last_complete_step"], 5);
    assert_eq!(m["solver"], "newton");
    assert_eq!(m["backend"], "cpu");
    assert_eq!(m["backend_reason"], "requested");
    assert!(m["scene"].as_str().unwrap().ends_with("bar.toml"));
    let hash = format!("{:016x}", fnv1a64(text.as_bytes()));
    assert_eq!(m["scene_hash"].as_str(), Some(hash.as_str()));
    // Frames 0, 2, 4 and the last step.
    let steps: Vec<u64> = m["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [0, 2, 4, 5]);
    // The listed files are exactly the files on disk.
    let listed: BTreeSet<String> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, files_under(&out));
    for s in steps {
        for ext in ["vtu", "obj"] {
            assert!(
                listed.contains(&format!("frames/frame_{s:05}.{ext}")),
                "{s} {ext}"
            );
        }
    }
    assert_eq!(
        pvd_files(&out.join("frames/sim.pvd")),
        [
            "frame_00000.vtu",
            "frame_00002.vtu",
            "frame_00004.vtu",
            "frame_00005.vtu"
        ]
    );

    let s = json(&out.join("stats.json"));
    assert_eq!(s["status"], "complete");
    assert_eq!(s["requested_steps"], 5);
    assert_eq!(s["completed_steps"], 5);
    assert!(s.get("message").is_none());
    let per_step = s["steps"].as_array().unwrap();
    assert_eq!(per_step.len(), 5);
    let (mut wall, mut output) = (0.0, 0.0);
    for st in per_step {
        let k = st["step"].as_u64().unwrap();
        let out_ms = st["output_ms"].as_f64().expect("output_ms");
        // Output time lands on the steps that wrote a frame, and only there.
        if k % 2 == 0 || k == 5 {
            assert!(out_ms > 0.0, "step {k}: output_ms {out_ms}");
        } else {
            assert_eq!(out_ms, 0.0, "step {k} wrote nothing");
        }
        wall += st["wall_ms"].as_f64().unwrap();
        output += out_ms;
    }
    let total_wall = s["total_wall_ms"].as_f64().unwrap();
    let total_out = s["total_output_ms"].as_f64().unwrap();
    assert!(
        (total_wall - wall).abs() <= 1e-9 * wall.max(1.0),
        "{total_wall} vs {wall}"
    );
    // The total also holds frame 0's writes, before any step.
    assert!(total_out > output, "{total_out} vs Σ {output}");
    assert!(s["setup_ms"].as_f64().unwrap() >= 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_run_into_the_same_directory_is_refused_and_changes_nothing() {
    let dir = tmp("refuse");
    assert_ok(&run_scene_with(&dir, "bar.toml", BASE, &[]));
    let before = snapshot(&dir.join("out"));
    for flags in [&[][..], &["--steps", "1"][..], &["--solver", "vbd"][..]] {
        let o = run_scene_with(&dir, "bar.toml", BASE, flags);
        assert_one_line_error(&o, &["out", "another run", "--overwrite", "--resume"]);
        assert_eq!(
            snapshot(&dir.join("out")),
            before,
            "{flags:?} touched the directory"
        );
    }
    // jello's outputs without a manifest (an older jello) are refused too.
    let legacy = dir.join("legacy");
    std::fs::create_dir_all(legacy.join("frames")).unwrap();
    std::fs::write(legacy.join("stats.json"), "{}").unwrap();
    std::fs::write(legacy.join("frames/frame_00000.vtu"), "old").unwrap();
    std::fs::write(legacy.join("frames/keep.txt"), "mine").unwrap();
    let scene = dir.join("bar.toml");
    let o = common::cli::run_cpu(&scene, &legacy, &[]);
    assert_one_line_error(&o, &["legacy", "without a run manifest", "--overwrite"]);
    assert_eq!(std::fs::read(legacy.join("stats.json")).unwrap(), b"{}");
    let o = common::cli::run_cpu(&scene, &legacy, &["--overwrite"]);
    assert_ok(&o);
    assert!(stderr(&o).contains("left 1 file jello did not write alone (frames/keep.txt)"));
    assert_eq!(
        std::fs::read(legacy.join("frames/keep.txt")).unwrap(),
        b"mine"
    );
    assert_ne!(
        std::fs::read(legacy.join("frames/frame_00000.vtu")).unwrap(),
        b"old"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn overwrite_removes_the_old_runs_files_and_nothing_else() {
    let dir = tmp("overwrite");
    let long = BASE.replace("steps = 2", "steps = 6");
    assert_ok(&run_scene_with(&dir, "bar.toml", &long, &["--obj"]));
    let out = dir.join("out");
    // The user's own files, beside and among jello's.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    std::fs::write(out.join("frames/my_frame.vtu"), "mine").unwrap();
    std::fs::create_dir_all(out.join("analysis")).unwrap();
    std::fs::write(out.join("analysis/plot.py"), "mine").unwrap();
    // A file outside the directory that a tampered manifest names.
    let outside = dir.join("outside.txt");
    std::fs::write(&outside, "precious").unwrap();
    let mpath = out.join("manifest.json");
    let mut m = json(&mpath);
    let old_files = m["files"].as_array().unwrap().len();
    assert_eq!(old_files, files_under(&out).len() - 3);
    m["files"]
        .as_array_mut()
        .unwrap()
        .push("../outside.txt".into());
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();

    // A shorter rerun without .obj: no stale frame of the first run may survive.
    let o = run_scene_with(&dir, "bar.toml", BASE, &["--overwrite"]);
    assert_ok(&o);
    let err = stderr(&o);
    let removed = format!("removed {old_files} files of the earlier run");
    assert!(err.contains(&removed), "{err}");
    assert!(
        err.contains("left 3 files jello did not write alone"),
        "{err}"
    );
    assert!(err.contains("notes.txt"), "{err}");
    assert!(
        err.contains("ignored 1 manifest entry outside the directory"),
        "{err}"
    );
    assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
    for f in ["notes.txt", "frames/my_frame.vtu", "analysis/plot.py"] {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), b"mine", "{f}");
    }
    let expected: BTreeSet<String> = [
        "manifest.json",
        "stats.json",
        "checkpoint.bin",
        "frames/sim.pvd",
        "frames/frame_00000.vtu",
        "frames/frame_00001.vtu",
        "frames/frame_00002.vtu",
        "notes.txt",
        "frames/my_frame.vtu",
        "analysis/plot.py",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(files_under(&out), expected);
    assert_eq!(
        pvd_files(&out.join("frames/sim.pvd")),
        ["frame_00000.vtu", "frame_00001.vtu", "frame_00002.vtu"]
    );
    assert_eq!(
        json(&out.join("stats.json"))["steps"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_another_jello_is_writing_is_refused_even_with_overwrite() {
    let dir = tmp("alive");
    assert_ok(&run_scene_with(&dir, "bar.toml", BASE, &[]));
    let mpath = dir.join("out/manifest.json");
    let mut m = json(&mpath);
    // A live process stands in for a jello still writing the directory.
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    m["status"] = "running".into();
    m["pid"] = sleeper.id().into();
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    for flag in ["--overwrite", "--resume"] {
        let o = run_scene_with(&dir, "bar.toml", BASE, &[flag]);
        let pid = sleeper.id().to_string();
        assert_one_line_error(&o, &["still writing", &pid]);
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Once that process is gone, the run is an earlier (killed) run: refused without a flag,
    // replaced with --overwrite.
    let o = run_scene_with(&dir, "bar.toml", BASE, &[]);
    assert_one_line_error(&o, &["another run", "running"]);
    assert_ok(&run_scene_with(&dir, "bar.toml", BASE, &["--overwrite"]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A solver failure in step 4 (injected: scene values are capped so a valid scene cannot
/// overflow; `JELLO_FAULT_AT_STEP`): the run stops with a one-line error, the manifest and
/// stats.json say `failed` with that message, and the frames, stats and checkpoint of steps
/// 0..3 stay.
#[test]
fn a_failed_run_says_why_and_keeps_its_last_good_frame() {
    let dir = tmp("failed");
    let text = BASE.replace("steps = 2", "steps = 6");
    let scene = dir.join("force.toml");
    std::fs::write(&scene, text).unwrap();
    let out_dir = dir.join("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_jello"))
        .args([
            "run",
            scene.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .env("JELLO_FAULT_AT_STEP", "4")
        .output()
        .unwrap();
    let line = assert_last_line_error(&o, 1, &["error: running", "force.toml"]);
    let out = dir.join("out");
    let m = json(&out.join("manifest.json"));
    let s = json(&out.join("stats.json"));
    assert_eq!(m["status"], "failed");
    assert_eq!(s["status"], "failed");
    let msg = m["message"].as_str().expect("a failure message");
    assert!(!msg.is_empty() && !msg.contains('\n'));
    assert!(line.ends_with(msg), "`{line}` does not end with `{msg}`");
    assert_eq!(s["message"].as_str(), Some(msg));
    assert_eq!(s["completed_steps"], 3);
    assert_eq!(m["completed_steps"], 3);
    assert_eq!(m["last_complete_step"], 3);
    assert_eq!(s["steps"].as_array().unwrap().len(), 3);
    for k in 0..=3 {
        assert!(
            out.join(format!("frames/frame_{k:05}.vtu")).exists(),
            "frame {k}"
        );
    }
    assert!(!out.join("frames/frame_00004.vtu").exists());
    let c = jello::output::Checkpoint::read(&out.join("checkpoint.bin")).unwrap();
    assert_eq!(c.header.step, 3);
    assert!(c.x.iter().chain(&c.v).all(|v| v.is_finite()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An output that cannot be written (a folder where frame 2 goes) fails the run the same way,
/// naming the file.
#[test]
fn an_output_that_cannot_be_written_fails_the_run_naming_it() {
    let dir = tmp("unwritable");
    let out = dir.join("out");
    std::fs::create_dir_all(out.join("frames/frame_00002.vtu")).unwrap();
    let o = run_scene_with(
        &dir,
        "bar.toml",
        &BASE.replace("steps = 2", "steps = 4"),
        &[],
    );
    assert_last_line_error(&o, 1, &["frame_00002.vtu"]);
    let m = json(&out.join("manifest.json"));
    assert_eq!(m["status"], "failed");
    assert!(m["message"].as_str().unwrap().contains("frame_00002.vtu"));
    assert_eq!(m["last_complete_step"], 1);
    assert_eq!(json(&out.join("stats.json"))["status"], "failed");
    assert!(out.join("frames/frame_00001.vtu").is_file());
    assert!(
        out.join("frames/frame_00002.vtu").is_dir(),
        "the folder is left alone"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A step count past the cap is one line naming the key, before any work or allocation.
#[test]
fn a_huge_step_count_is_a_one_line_error() {
    let dir = tmp("huge");
    let text = BASE.replace("steps = 2", "steps = 9223372036854775807");
    let o = run_scene_with(&dir, "huge.toml", &text, &[]);
    assert_one_line_error(
        &o,
        &["huge.toml", "`simulation.steps`", "9223372036854775807"],
    );
    assert!(
        !dir.join("out").exists(),
        "a refused run wrote its directory"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every step unconverged (see [`common::cli::CAPPED_SCENE`]).
const CAPPED: &str = common::cli::CAPPED_SCENE;

#[test]
fn require_converged_fails_a_run_with_an_unconverged_step() {
    let dir = tmp("require");
    let o = run_scene_with(&dir, "capped.toml", CAPPED, &["--require-converged"]);
    let s = json(&dir.join("out/stats.json"));
    let steps = s["steps"].as_array().unwrap();
    let bad: Vec<u64> = steps
        .iter()
        .filter(|st| st["converged"] == false)
        .map(|st| st["step"].as_u64().unwrap())
        .collect();
    assert!(
        !bad.is_empty(),
        "the scene no longer leaves a step unconverged"
    );
    assert_eq!(s["first_unconverged_step"].as_u64(), Some(bad[0]));
    let first = format!("step {} did not converge", bad[0]);
    let count = format!("{} of 3 steps", bad.len());
    assert_last_line_error(&o, 3, &[&first, &count, "--require-converged"]);
    // The run itself is complete; only the exit status says otherwise.
    assert_eq!(s["status"], "complete");
    // Without the flag the same run exits 0, and a converged run passes with it.
    let o = run_scene_with(&dir, "capped.toml", CAPPED, &["--overwrite"]);
    assert_ok(&o);
    let o = run_scene_with(
        &dir,
        "bar.toml",
        BASE,
        &["--overwrite", "--require-converged"],
    );
    assert_ok(&o);
    assert_eq!(
        json(&dir.join("out/stats.json"))["first_unconverged_step"],
        serde_json::Value::Null
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `jello run` on a long scene, waits for step 3, sends `signal`, and returns the exit
/// status and the stderr lines.
fn interrupt(dir: &Path, signal: &str) -> (Option<i32>, Vec<String>) {
    let scene = dir.join("long.toml");
    let text = BASE.replace("steps = 2", "steps = 1000000") + "\n[output]\nevery = 100000\n";
    std::fs::write(&scene, text).unwrap();
    let out = dir.join("out");
    let mut child = Command::new(BIN)
        .args(["run", scene.to_str().unwrap(), "--backend", "cpu", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = BufReader::new(child.stderr.take().unwrap());
    let pump = std::thread::spawn(move || {
        for line in reader.lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let t0 = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(l) => {
                let at3 = l.starts_with("step 3/");
                lines.push(l);
                if at3 {
                    break;
                }
            }
            Err(e) => {
                let _ = child.kill();
                panic!("no step 3 after {:?} ({e}): {lines:?}", t0.elapsed());
            }
        }
    }
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The run stops after the step in progress and its writes: well within a minute.
    let deadline = Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("jello did not stop within 60 s of SIG{signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    pump.join().unwrap();
    lines.extend(rx.try_iter());
    (code, lines)
}

#[test]
fn sigint_and_sigterm_stop_after_the_step_and_mark_the_run_interrupted() {
    for signal in ["INT", "TERM"] {
        let dir = tmp(&format!("sig{signal}"));
        let (code, lines) = interrupt(&dir, signal);
        assert_eq!(code, Some(130), "SIG{signal}: {lines:?}");
        let last = lines.last().unwrap();
        assert!(!lines.iter().any(|l| l.contains("panicked")), "{lines:?}");
        let out = dir.join("out");
        let m = json(&out.join("manifest.json"));
        let s = json(&out.join("stats.json"));
        let k = m["last_complete_step"].as_u64().unwrap();
        assert!(k >= 3, "stopped at step {k}");
        assert!(
            last.starts_with(&format!("error: interrupted after step {k} of 1000000"))
                && last.contains("--resume"),
            "SIG{signal}: `{last}`"
        );
        // Every line but the last is banner or progress: the stop says one thing, once.
        for l in &lines[..lines.len() - 1] {
            assert!(
                l.starts_with("step ") || l.starts_with("jello: ") || l.starts_with("backend "),
                "extra line `{l}`"
            );
        }
        // The step in progress finished: stats, manifest, checkpoint and a frame all at k.
        assert_eq!(m["status"], "interrupted");
        assert_eq!(s["status"], "interrupted");
        assert_eq!(m["completed_steps"].as_u64(), Some(k));
        assert_eq!(s["completed_steps"].as_u64(), Some(k));
        assert_eq!(s["requested_steps"], 1000000);
        assert_eq!(s["steps"].as_array().unwrap().len() as u64, k);
        let c = jello::output::Checkpoint::read(&out.join("checkpoint.bin")).unwrap();
        assert_eq!(c.header.step as u64, k);
        assert!(out.join(format!("frames/frame_{k:05}.vtu")).exists());
        assert!(
            lines.iter().filter(|l| l.starts_with("step ")).count() as u64 >= k,
            "a step line per finished step"
        );
        // The interrupted run continues to the same state as a run that was never stopped.
        let end = (k + 3).to_string();
        let scene = dir.join("long.toml");
        let o = jello(&[
            "run",
            scene.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--resume",
            "--steps",
            &end,
        ]);
        assert_ok(&o);
        let fresh = dir.join("fresh");
        let o = jello(&[
            "run",
            scene.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            fresh.to_str().unwrap(),
            "--steps",
            &end,
        ]);
        assert_ok(&o);
        let a = jello::output::Checkpoint::read(&out.join("checkpoint.bin")).unwrap();
        let b = jello::output::Checkpoint::read(&fresh.join("checkpoint.bin")).unwrap();
        assert_eq!(a.header.step as u64, k + 3);
        assert_eq!(a.t.to_bits(), b.t.to_bits());
        assert_eq!(a.x.len(), b.x.len());
        for (x, y) in a.x.iter().chain(&a.v).zip(b.x.iter().chain(&b.v)) {
            assert_eq!(x.to_bits(), y.to_bits());
        }
        assert_eq!(json(&out.join("manifest.json"))["status"], "complete");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `--backend auto` never picks a software adapter: compared with what wgpu itself lists (the
/// adapters classified here, not by jello). With WGPU_BACKEND naming an API the platform lacks
/// there is no adapter at all. A GPU test where an adapter is needed: it FAILS without one
/// unless JELLO_SKIP_GPU_TESTS=1.
#[test]
fn auto_backend_takes_hardware_gpus_only_and_says_why() {
    let dir = tmp("auto");
    let scene = dir.join("bar.toml");
    std::fs::write(&scene, BASE).unwrap();
    let xdg = dir.join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let absent_api = if cfg!(target_os = "macos") {
        "dx12"
    } else {
        "metal"
    };
    let run = |name: &str, env: &[(&str, &str)]| {
        let out = dir.join(name);
        let mut c = Command::new(BIN);
        c.args([
            "run",
            scene.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        c.args(["--backend", if name == "gpu" { "gpu" } else { "auto" }]);
        c.env("XDG_RUNTIME_DIR", &xdg);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_ok(&o);
        (o, json(&out.join("stats.json")))
    };

    let (o, s) = run("none", &[("WGPU_BACKEND", absent_api)]);
    assert_eq!(s["backend"], "cpu");
    assert_eq!(s["backend_reason"], "no GPU adapter was found");
    assert!(
        stderr(&o).contains("backend cpu (f64): no GPU adapter was found"),
        "{}",
        stderr(&o)
    );

    // What wgpu lists, classified independently of jello.
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle().with_env());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let software = |i: &wgpu::AdapterInfo| {
        let n = i.name.to_lowercase();
        i.device_type == wgpu::DeviceType::Cpu
            || ["llvmpipe", "lavapipe", "swiftshader", "softpipe", "warp"]
                .iter()
                .any(|s| n.contains(s))
    };
    let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(|a| a.get_info()).collect();
    if infos.is_empty() {
        if std::env::var("JELLO_SKIP_GPU_TESTS").as_deref() == Ok("1") {
            eprintln!("skipping the adapter half: no adapter");
            return;
        }
        panic!("no GPU adapter; set JELLO_SKIP_GPU_TESTS=1 to skip GPU tests");
    }
    let hardware: Vec<&wgpu::AdapterInfo> = infos.iter().filter(|i| !software(i)).collect();
    eprintln!(
        "adapters: {:?}",
        infos.iter().map(|i| &i.name).collect::<Vec<_>>()
    );
    let (o, s) = run("auto", &[]);
    let err = stderr(&o);
    let info = Command::new(BIN)
        .arg("info")
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout).to_string();
    if hardware.is_empty() {
        let name = &infos[0].name;
        assert_eq!(s["backend"], "cpu", "software adapter {name} was used");
        let reason = s["backend_reason"].as_str().unwrap();
        assert!(
            reason.contains("only a software adapter") && reason.contains("--backend gpu"),
            "{reason}"
        );
        assert!(
            err.contains(&format!("backend cpu (f64): {reason}")),
            "{err}"
        );
        assert!(
            info.contains(&format!("--backend auto: backend cpu (f64): {reason}")),
            "{info}"
        );
        // Asked for, the software adapter is used.
        let (_, s) = run("gpu", &[]);
        assert_eq!(s["backend"], "gpu");
        assert!(s["backend_reason"]
            .as_str()
            .unwrap()
            .contains("software adapter"));
    } else {
        assert_eq!(s["backend"], "gpu");
        assert_eq!(s["backend_reason"], "hardware adapter found");
        let adapter = s["adapter"].as_str().unwrap();
        assert!(
            hardware.iter().any(|h| adapter.contains(&h.name)),
            "{adapter} is not one of the hardware adapters"
        );
        assert!(
            info.contains("--backend auto: backend gpu (f32, "),
            "{info}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--vtu-per-object`: every frame has one `.vtu` per object listed in that object's `.pvd`,
/// a resumed run continues those series, and the manifest lists exactly the files on disk.
#[test]
fn vtu_per_object_writes_a_series_per_object_and_resumes_it() {
    let dir = tmp("per_object");
    let scene = format!(
        "{BASE}\n[[objects]]\nname = \"cube\"\n\
         mesh = {{ generator = \"box\", min = [0.0, 0.5, 0.0], max = [0.1, 0.6, 0.1], cells = [1, 1, 1] }}\n\
         material = {{ model = \"linear\", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}\n"
    );
    // Frames 0 and 1 without parts, then turned on at a resume: the series holds what exists.
    assert_ok(&run_scene_with(&dir, "two.toml", &scene, &["--steps", "1"]));
    let out = dir.join("out");
    assert_ok(&run_scene_with(
        &dir,
        "two.toml",
        &scene,
        &["--vtu-per-object", "--resume", "--steps", "2"],
    ));
    for i in 0..2 {
        assert_eq!(
            pvd_files(&out.join(format!("frames/object{i}.pvd"))),
            [format!("frame_00002.object{i}.vtu")]
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
    assert_ok(&run_scene_with(
        &dir,
        "two.toml",
        &scene,
        &["--vtu-per-object"],
    ));
    assert_ok(&run_scene_with(
        &dir,
        "two.toml",
        &scene,
        &["--vtu-per-object", "--resume", "--steps", "4"],
    ));
    for i in 0..2 {
        let expected: Vec<String> = (0..=4)
            .map(|s| format!("frame_{s:05}.object{i}.vtu"))
            .collect();
        assert_eq!(
            pvd_files(&out.join(format!("frames/object{i}.pvd"))),
            expected
        );
    }
    let listed: BTreeSet<String> = json(&out.join("manifest.json"))["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, files_under(&out));
    assert!(listed.contains("frames/frame_00004.object1.vtu"));
    // A scene without .vtu frames cannot have per-object ones: one line naming the flag.
    let no_vtu = format!("{scene}\n[output]\nvtu = false\n");
    let o = run_scene_with(
        &dir,
        "novtu.toml",
        &no_vtu,
        &["--vtu-per-object", "--overwrite"],
    );
    assert_one_line_error(&o, &["--vtu-per-object", "output.vtu"]);
}

/// `--solver qn` on an IPC scene (contact_balls.toml through the balls' impact) runs on the CPU
/// with every step converged; `--backend gpu` is refused with one line saying IPC runs on the
/// CPU (the device path's blocker, before any device work), and writes no stats.
#[test]
fn qn_runs_an_ipc_scene_on_the_cpu_and_the_gpu_request_is_one_line() {
    let dir = tmp("qn_ipc");
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/contact_balls.toml");
    let scene = scene.to_str().unwrap();
    let out = dir.join("out");
    let o = jello(&[
        "run",
        scene,
        "--solver",
        "qn",
        "--steps",
        "7",
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_ok(&o);
    let s = json(&out.join("stats.json"));
    assert_eq!(s["solver"], "qn");
    assert_eq!(s["status"], "complete");
    assert_eq!(s["converged_steps"], 7);
    let gpu = dir.join("gpu");
    let o = jello(&[
        "run",
        scene,
        "--solver",
        "qn",
        "--steps",
        "1",
        "--backend",
        "gpu",
        "--out",
        gpu.to_str().unwrap(),
    ]);
    assert_last_line_error(&o, 1, &["qn", "contact.ipc", "CPU backend"]);
    assert!(!gpu.join("stats.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--solver auto` names its pick and the reason in the banner, stats.json and the manifest; a
/// named solver writes no reason; an unknown name is still one line listing `auto`.
#[test]
fn solver_auto_names_its_pick_and_why() {
    let dir = tmp("solver_auto");
    let o = run_scene_with(&dir, "bar.toml", BASE, &["--solver", "auto"]);
    assert_ok(&o);
    // BASE is a 4 × 1 × 1 box grid: 5 × 2 × 2 vertices, small.
    let reason = "dynamic scene of 20 vertices on the CPU: qn";
    let err = stderr(&o);
    let banner = err.lines().find(|l| l.starts_with("jello: ")).unwrap();
    assert!(
        banner.contains(&format!("solver qn (auto: {reason}")),
        "{err}"
    );
    let out = dir.join("out");
    let s = json(&out.join("stats.json"));
    assert_eq!(s["solver"], "qn");
    assert!(
        s["solver_auto_reason"]
            .as_str()
            .is_some_and(|r| r.starts_with(reason)),
        "{s}"
    );
    assert_eq!(json(&out.join("manifest.json"))["solver"], "qn");
    // A resume picks the same solver, so the checkpoint's identity matches.
    let o = run_scene_with(
        &dir,
        "bar.toml",
        BASE,
        &["--solver", "auto", "--resume", "--steps", "3"],
    );
    assert_ok(&o);
    assert_eq!(json(&out.join("stats.json"))["completed_steps"], 3);

    let o = run_scene_with(
        &dir,
        "bar.toml",
        BASE,
        &["--solver", "newton", "--overwrite"],
    );
    assert_ok(&o);
    let s = json(&out.join("stats.json"));
    assert_eq!(s["solver"], "newton");
    assert!(s.get("solver_auto_reason").is_none(), "{s}");

    let o = run_scene_with(&dir, "bar.toml", BASE, &["--solver", "fastest"]);
    assert_last_line_error(
        &o,
        1,
        &["--solver: unknown solver `fastest`", "multilevel, auto)"],
    );
}
