//! The WGSL preprocessor: one directive, a line `#import name`, replaced by the snippet
//! `shaders/shared/name.wgsl`. Each snippet is inlined at most once per kernel (a second
//! `#import` of it, direct or through another snippet, becomes an empty line), and snippets may
//! import others.
//!
//! This one file serves both `build.rs` (which includes it with `#[path]` to validate and
//! reflect every kernel with naga) and the runtime ([`super::shaders`], which preprocesses the
//! embedded sources), so the WGSL naga checked at build time is the WGSL the device compiles.
//! It therefore depends on nothing but `std`: snippets are looked up through a closure, from
//! disk in the build script and from `include_str!`s at run time.

use std::collections::HashSet;
use std::fmt;

/// A failed `#import`: the file and 1-based line of the offending directive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    /// Path of the file holding the directive (`shaders/x.wgsl` or `shaders/shared/x.wgsl`).
    pub file: String,
    /// 1-based line of the directive.
    pub line: usize,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for ImportError {}

/// Where the snippet `name` lives, for messages and for the build script's file lookups.
pub fn snippet_path(name: &str) -> String {
    format!("shaders/shared/{name}.wgsl")
}

/// Preprocesses kernel source `src` (from file `file`, named in errors); `snippet(name)` returns
/// the text of `shaders/shared/<name>.wgsl`, or `None` when there is no such snippet.
pub fn preprocess<'a>(
    file: &str,
    src: &str,
    snippet: &dyn Fn(&str) -> Option<&'a str>,
) -> Result<String, ImportError> {
    let mut out = String::with_capacity(src.len());
    expand(file, src, snippet, &mut HashSet::new(), &mut out)?;
    Ok(out)
}

fn expand<'a>(
    file: &str,
    src: &str,
    snippet: &dyn Fn(&str) -> Option<&'a str>,
    seen: &mut HashSet<String>,
    out: &mut String,
) -> Result<(), ImportError> {
    for (i, line) in src.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("#import") else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let err = |message: String| ImportError {
            file: file.to_string(),
            line: i + 1,
            message,
        };
        let name = rest.trim();
        if name.is_empty() {
            return Err(err("`#import` without a snippet name".into()));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(err(format!(
                "`#import {name}`: a snippet name is a file stem in shaders/shared/"
            )));
        }
        // Marked before recursing, so an import cycle ends instead of recursing forever.
        if seen.insert(name.to_string()) {
            let text = snippet(name)
                .ok_or_else(|| err(format!("`#import {name}`: no {}", snippet_path(name))))?;
            expand(&snippet_path(name), text, snippet, seen, out)?;
        }
        out.push('\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<&'static str> {
        match name {
            "a" => Some("fn a() {}"),
            "b" => Some("#import a\nfn b() {}"),
            "loop1" => Some("#import loop2\nfn l1() {}"),
            "loop2" => Some("#import loop1\nfn l2() {}"),
            "bad" => Some("\n#import missing"),
            _ => None,
        }
    }

    #[test]
    fn inlines_each_snippet_once_including_nested_imports() {
        let out = preprocess("k.wgsl", "#import b\n#import a\nfn main() {}", &lookup).unwrap();
        assert_eq!(out.matches("fn a() {}").count(), 1, "{out}");
        assert_eq!(out.matches("fn b() {}").count(), 1, "{out}");
        // `a` precedes `b` (b imports it) and both precede the kernel's own code.
        let (pa, pb, pm) = (
            out.find("fn a").unwrap(),
            out.find("fn b").unwrap(),
            out.find("fn main").unwrap(),
        );
        assert!(pa < pb && pb < pm, "{out}");
        assert!(!out.contains("#import"), "{out}");
    }

    #[test]
    fn import_cycles_terminate() {
        let out = preprocess("k.wgsl", "#import loop1", &lookup).unwrap();
        assert_eq!(out.matches("fn l1").count(), 1);
        assert_eq!(out.matches("fn l2").count(), 1);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let e = preprocess("shaders/k.wgsl", "x\n#import nope", &lookup).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("shaders/k.wgsl", 2));
        assert!(e.to_string().contains("shaders/shared/nope.wgsl"), "{e}");
        // An error inside a snippet names the snippet's file.
        let e = preprocess("shaders/k.wgsl", "#import bad", &lookup).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("shaders/shared/bad.wgsl", 2));
        let e = preprocess("shaders/k.wgsl", "  #import   ", &lookup).unwrap_err();
        assert!(e.message.contains("without a snippet name"), "{e}");
        let e = preprocess("shaders/k.wgsl", "#import ../a", &lookup).unwrap_err();
        assert!(e.message.contains("file stem"), "{e}");
    }
}
