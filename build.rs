//! Build script: preprocesses, parses and validates every WGSL kernel in `shaders/` with naga, so a
//! broken shader fails `cargo build`. The sources themselves are embedded by `src/gpu/shaders.rs`
//! with `include_str!` (not through OUT_DIR, which checkouts sharing a target dir could clobber).
//!
//! Preprocessing is one directive: a line `#import name` is replaced by the contents of
//! `shaders/shared/name.wgsl` (each snippet at most once per kernel; snippets may import others).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let shader_dir = root.join("shaders");
    let shared_dir = shader_dir.join("shared");
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-changed=build.rs");

    let mut names: Vec<PathBuf> = fs::read_dir(&shader_dir)
        .expect("read shaders/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    names.sort();
    if let Ok(rd) = fs::read_dir(&shared_dir) {
        for e in rd.flatten() {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }

    let mut failures = Vec::new();
    for path in &names {
        println!("cargo:rerun-if-changed={}", path.display());
        let mut seen = HashSet::new();
        let src = match preprocess(path, &shared_dir, &mut seen) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let module = match naga::front::wgsl::parse_str(&src) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.emit_to_string_with_path(&src, &path.display().to_string()));
                continue;
            }
        };
        let mut validator = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        );
        if let Err(e) = validator.validate(&module) {
            failures.push(e.emit_to_string_with_path(&src, &path.display().to_string()));
            continue;
        }
        let computes = module
            .entry_points
            .iter()
            .filter(|ep| ep.stage == naga::ShaderStage::Compute && ep.name == "main")
            .count();
        if computes != 1 {
            failures.push(format!(
                "{}: expected one compute entry point `main`",
                path.display()
            ));
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("{f}");
        }
        panic!(
            "{} WGSL shader(s) failed validation:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Inline `#import name` lines (each snippet once).
fn preprocess(path: &Path, shared: &Path, seen: &mut HashSet<String>) -> Result<String, String> {
    let text = fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut out = String::with_capacity(text.len());
    for (lineno, line) in text.lines().enumerate() {
        if let Some(rest) = line.trim_start().strip_prefix("#import") {
            let name = rest.trim();
            if name.is_empty() {
                return Err(format!("line {}: `#import` without a name", lineno + 1));
            }
            if seen.insert(name.to_string()) {
                let p = shared.join(format!("{name}.wgsl"));
                let inner = preprocess(&p, shared, seen)
                    .map_err(|e| format!("line {}: #import {name}: {e}", lineno + 1))?;
                out.push_str(&inner);
            }
            out.push('\n');
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}
