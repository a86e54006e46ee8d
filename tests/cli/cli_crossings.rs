//! `jello run` on a scene whose objects pass through each other without contact prints one
//! warning naming both objects, the step and the time, once, and still exits 0 — also on a
//! solver that has no IPC contact; with contact on it prints none. tests/cpu/contact_crossings.rs
//! checks the library's record.

use crate::common;

use std::process::Output;

/// contact_balls.toml (two balls thrown at each other, meeting after ~5 steps) over `steps`
/// steps with `[contact] ipc = ipc` (without contact at the looser ε = 1e-5, for qn's sake),
/// run on the CPU with `flags`; the output and stats.json.
fn run_balls(test: &str, ipc: bool, steps: usize, flags: &[&str]) -> (Output, serde_json::Value) {
    let dir = common::cli::tmp_dir("crossings", test);
    let text = std::fs::read_to_string(common::bundled_scene_path("contact_balls.toml")).unwrap();
    assert!(text.contains("ipc = true") && text.contains("steps = 40"));
    assert!(text.contains("tolerance = 1e-7"));
    let mut text = text
        .replace("ipc = true", &format!("ipc = {ipc}"))
        .replace("steps = 40", &format!("steps = {steps}"));
    if !ipc {
        text = text.replace("tolerance = 1e-7", "tolerance = 1e-5");
    }
    let o = common::cli::run_scene_with(&dir, "balls.toml", &text, flags);
    let out = dir.join("out");
    let stats = std::fs::read_to_string(out.join("stats.json"))
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (o, stats)
}

fn pass_through_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains("pass through"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn balls_without_contact_warn_once_naming_both_and_exit_zero() {
    // The scene's newton, and qn: a solver that cannot do IPC contact gets the warning too.
    for (test, flags) in [("newton", &[][..]), ("qn", &["--solver", "qn"][..])] {
        let (o, stats) = run_balls(test, false, 20, flags);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{test}: {err}");
        let lines = pass_through_lines(&o);
        assert_eq!(lines.len(), 1, "{test}: {err}");
        let w = &lines[0];
        assert!(w.starts_with("warning: step "), "{test}: {w}");
        assert!(w.contains("`left` (0)") && w.contains("`right` (1)"), "{w}");
        assert!(w.contains(" s): ") && w.contains("ipc = true"), "{w}");
        // stats.json: the record at the step the line names, nowhere else.
        let steps = stats["steps"].as_array().unwrap();
        let at: Vec<u64> = steps
            .iter()
            .filter(|s| !s["crossings"].as_array().unwrap().is_empty())
            .map(|s| s["step"].as_u64().unwrap())
            .collect();
        assert_eq!(at.len(), 1, "{test}: {at:?}");
        assert!(
            w.contains(&format!("step {} (t = ", at[0])),
            "{w} vs step {}",
            at[0]
        );
        let s = &steps[at[0] as usize - 1];
        assert_eq!(
            s["crossings"][0]["names"],
            serde_json::json!(["left", "right"])
        );
        assert!(s["crossings"][0]["triangle_pairs"].as_u64().unwrap() > 0);
        eprintln!("{test}: {w}");
    }
}

#[test]
fn balls_with_contact_print_no_crossing() {
    let (o, stats) = run_balls("ipc", true, 10, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(pass_through_lines(&o).is_empty());
    for s in stats["steps"].as_array().unwrap() {
        assert!(s["crossings"].as_array().unwrap().is_empty());
    }
}
