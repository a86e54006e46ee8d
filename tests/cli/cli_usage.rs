//! Command-line misuse: clap keeps its usage and help, but the FIRST line always says what was
//! wrong (a missing SCENE or command, an unknown flag, a bad value for a flag, flags that
//! exclude each other); exit status 2 as clap's. Flag values jello checks itself (--backend,
//! --stop, --solver, --variant) are one-line errors (exit 1) reported before any file is read.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_jello");

fn jello(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run jello")
}

/// Exit 2, no panic, the first stderr line starts with `error:` and holds every needle, and
/// clap's usage or help (`usage_needle`) follows.
fn assert_usage_error(args: &[&str], needles: &[&str], usage_needle: &str) -> String {
    let o = jello(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let first = err.lines().next().unwrap_or_default().to_string();
    assert!(
        first.starts_with("error: "),
        "{args:?}: first line `{first}`"
    );
    for n in needles {
        assert!(
            first.contains(n),
            "{args:?}: expected `{n}` in the first line `{first}`"
        );
    }
    assert!(
        err.contains(usage_needle),
        "{args:?}: no `{usage_needle}` in: {err}"
    );
    first
}

/// Exit 1 with exactly one stderr line holding every needle.
fn assert_one_line_error(args: &[&str], needles: &[&str]) {
    let o = jello(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: expected `{n}` in `{err}`");
    }
}

#[test]
fn a_missing_argument_or_command_is_named_on_the_first_line() {
    assert_usage_error(&["run"], &["required", "<SCENE>"], "Usage: jello run");
    assert_usage_error(
        &["compare"],
        &["required", "<SCENE>"],
        "Usage: jello compare",
    );
    assert_usage_error(
        &["mesh", "info"],
        &["required", "<FILE>"],
        "Usage: jello mesh info",
    );
    assert_usage_error(
        &["mesh", "convert", "a.msh"],
        &["required", "<OUTPUT>"],
        "Usage:",
    );
    // No command at all: clap prints only the help; the first line now says why.
    assert_usage_error(&[], &["no command given"], "Commands:");
    assert_usage_error(&["mesh"], &["no command given"], "Commands:");
}

#[test]
fn an_unknown_flag_or_command_is_named_on_the_first_line() {
    assert_usage_error(
        &["run", "x.toml", "--bogus"],
        &["'--bogus'"],
        "Usage: jello run",
    );
    assert_usage_error(&["frobnicate"], &["'frobnicate'"], "Usage: jello");
    assert_usage_error(
        &["run", "x.toml", "--resume", "--overwrite"],
        &["'--resume'", "'--overwrite'"],
        "Usage: jello run",
    );
}

#[test]
fn a_bad_steps_value_is_named_on_the_first_line() {
    for v in [
        "abc",
        "-1",
        "0",
        "1.5",
        "1000000001",
        "99999999999999999999999",
    ] {
        assert_usage_error(
            &["run", "x.toml", "--steps", v],
            &["'--steps <STEPS>'", &format!("'{v}'")],
            "--help",
        );
    }
    assert_usage_error(
        &["run", "x.toml", "--steps"],
        &["'--steps <STEPS>'"],
        "--help",
    );
    assert_usage_error(
        &["compare", "x.toml", "--steps", "0"],
        &["'--steps <STEPS>'", "'0'"],
        "--help",
    );
}

#[test]
fn bad_flag_values_are_named_before_any_file_is_read() {
    // The scene does not exist: the flag is still what the error names.
    let missing = "/nonexistent/scene.toml";
    for (flag, value, expected) in [
        ("--backend", "tpu", "auto, gpu or cpu"),
        ("--stop", "rms", "cn or dx"),
        ("--solver", "fast", "newton"),
        ("--variant", "red-black", "jacobi or gs"),
    ] {
        assert_one_line_error(&["run", missing, flag, value], &[flag, value, expected]);
        let o = jello(&["run", missing, flag, value]);
        assert!(!String::from_utf8_lossy(&o.stderr).contains("nonexistent"));
    }
}
