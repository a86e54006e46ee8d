//! The TOML scene format and how a [`Scene`] becomes a [`crate::problem::Model`].
//!
//! A scene lists objects (a mesh file or a generator, a transform, a material with optional
//! per-region overrides, an initial velocity), pins with kinematic scripts, obstacles, gravity,
//! the time step, the number of steps, the solver and its parameters, and output options.
//! Every invalid value is reported as `FILE: key `dotted.key`: reason`. See
//! `docs/src/scene-format.md` for the format with units and defaults.

mod build;
mod solver;
mod spec;

pub use build::{ball_max_resolution, BuiltScene, MeshFiles, RunConfig};
pub use solver::*;
pub use spec::*;

use crate::error::{JelloError, Result};
use std::path::{Path, PathBuf};

/// A parsed scene file.
#[derive(Clone, Debug)]
pub struct Scene {
    /// The file it came from (used in error messages and to resolve relative mesh paths).
    pub path: PathBuf,
    /// The parsed content.
    pub spec: SceneSpec,
}

impl Scene {
    /// Reads and parses a scene file. Unknown keys, wrong types and missing required keys are
    /// errors naming the file, line and key. Anything but a regular UTF-8 file of at most
    /// [`crate::limits::MAX_SCENE_FILE_BYTES`] (a directory, a FIFO, a device) is refused before
    /// it is opened; a leading UTF-8 byte-order mark is fine.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = crate::limits::read_capped(path, crate::limits::MAX_SCENE_FILE_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..at].iter().filter(|&&c| c == b'\n').count() + 1;
            JelloError::parse(path, line, "the scene file is not valid UTF-8 text")
        })?;
        Self::parse(path, &text)
    }

    /// Parses scene text; `path` is used for messages and relative paths. A leading UTF-8
    /// byte-order mark is skipped.
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let spec: SceneSpec = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(0);
            let msg = e.message().replace('\n', " ");
            // serde's messages do not say where (e.g. "invalid type: string, expected f64"):
            // name the dotted key at the error's position when the text parses as TOML.
            // An unknown key inside a value serde buffers (an internally tagged table such as
            // a pin's `script`) is reported at the whole value: name the key itself.
            let unknown = msg
                .strip_prefix("unknown field `")
                .and_then(|m| m.split_once('`'))
                .map(|(name, _)| name);
            let key = e.span().and_then(|s| {
                unknown
                    .and_then(|name| key_named_within(text, s.clone(), name))
                    .or_else(|| key_at(text, s.start))
            });
            // A table read in two passes (`[solver]`) names the key itself: the error's span is
            // the whole table's, so the line is the named key's.
            if let Some((named, _)) = msg.strip_prefix("key `").and_then(|m| m.split_once('`')) {
                let line = key_line(text, named).unwrap_or(line);
                return JelloError::parse(path, line, msg);
            }
            let msg = match key {
                Some(k) => format!("key `{k}`: {msg}"),
                None => msg,
            };
            JelloError::parse(path, line, msg)
        })?;
        Ok(Scene {
            path: path.to_path_buf(),
            spec,
        })
    }
}

/// The dotted key path (`objects[0].material.density`) of the innermost key or value whose
/// span contains byte offset `pos`, or `None` if `text` is not valid TOML or nothing matches.
fn key_at(text: &str, pos: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    fn in_span(span: std::ops::Range<usize>, pos: usize) -> bool {
        span.start <= pos && pos < span.end.max(span.start + 1)
    }
    fn search(table: &DeTable, pos: usize, path: &mut String) -> bool {
        for (k, v) in table.iter() {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k.get_ref());
            if in_span(k.span(), pos) {
                return true;
            }
            match v.get_ref() {
                DeValue::Table(t) if search(t, pos, path) => return true,
                DeValue::Array(a) => {
                    for (i, e) in a.iter().enumerate() {
                        let len = path.len();
                        path.push_str(&format!("[{i}]"));
                        let found = match e.get_ref() {
                            DeValue::Table(t) => search(t, pos, path) || in_span(e.span(), pos),
                            _ => in_span(e.span(), pos),
                        };
                        if found {
                            return true;
                        }
                        path.truncate(len);
                    }
                }
                _ => {}
            }
            if in_span(v.span(), pos) {
                return true;
            }
            path.truncate(len);
        }
        false
    }
    let doc = DeTable::parse(text).ok()?;
    let mut path = String::new();
    search(doc.get_ref(), pos, &mut path).then_some(path)
}

/// The 1-based line of the key at dotted path `path` (tables only, e.g. `solver.history`), or
/// `None` if `text` is not valid TOML or there is no such key.
fn key_line(text: &str, path: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let (k, v) = table.iter().find(|(k, _)| k.get_ref() == part)?;
        if parts.peek().is_none() {
            return Some(text[..k.span().start.min(text.len())].matches('\n').count() + 1);
        }
        match v.get_ref() {
            DeValue::Table(t) => table = t,
            _ => return None,
        }
    }
    None
}

/// The dotted key path of the first key named `name` whose own span lies inside `span`, or
/// `None` if `text` is not valid TOML or there is none.
fn key_named_within(text: &str, span: std::ops::Range<usize>, name: &str) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    fn search(
        table: &DeTable,
        span: &std::ops::Range<usize>,
        name: &str,
        path: &mut String,
    ) -> bool {
        for (k, v) in table.iter() {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k.get_ref());
            let ks = k.span();
            if k.get_ref() == name && span.start <= ks.start && ks.end <= span.end {
                return true;
            }
            let found = match v.get_ref() {
                DeValue::Table(t) => search(t, span, name, path),
                DeValue::Array(a) => a.iter().enumerate().any(|(i, e)| {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    let hit =
                        matches!(e.get_ref(), DeValue::Table(t) if search(t, span, name, path));
                    if !hit {
                        path.truncate(len);
                    }
                    hit
                }),
                _ => false,
            };
            if found {
                return true;
            }
            path.truncate(len);
        }
        false
    }
    let doc = DeTable::parse(text).ok()?;
    let mut path = String::new();
    search(doc.get_ref(), &span, name, &mut path).then_some(path)
}
