//! What the readers do with elements that are not linear tetrahedra — one rule for every
//! format, so nothing is ever dropped silently:
//!
//! - 4-node tetrahedra are read;
//! - 10-node (quadratic) tetrahedra are read as linear ones from their 4 corner nodes (every
//!   format lists the corners first), with a warning giving the count; the mid-edge nodes stay
//!   as vertices no tet uses (reported as such);
//! - lower-dimensional elements (points, lines, triangles, quadrangles, of any order) are
//!   skipped with one warning giving the count per kind: real files carry them to name boundary
//!   groups, and they hold no material;
//! - every other volume element (hexahedra, prisms, pyramids, tetrahedra of order 3 and up,
//!   polyhedra) is an error at its line or record: dropping it would remove material, and jello
//!   does not split it into tetrahedra;
//! - an element type the reader does not know is an error.

use std::collections::BTreeMap;
use std::path::Path;

/// How a reader treats one element kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Treat {
    /// A linear tetrahedron.
    Tet4,
    /// A quadratic tetrahedron: corners kept.
    Tet10,
    /// A point, line or surface element: skipped and counted.
    Skip,
    /// A volume element jello cannot simulate: refused.
    Refuse,
}

/// A format's element kind: how many nodes, what it is called, what happens to it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kind {
    pub nodes: usize,
    pub name: &'static str,
    pub treat: Treat,
}

impl Kind {
    pub const fn new(nodes: usize, name: &'static str, treat: Treat) -> Self {
        Kind { nodes, name, treat }
    }

    /// The message for a refused element of this kind; `what` names it in the format's terms
    /// (`gmsh element type 5`, `MEDIT section Hexahedra`).
    pub fn refusal(&self, what: &str) -> String {
        format!(
            "{what} ({}) is a volume element jello cannot simulate: only tetrahedra are read \
             (4-node, or 10-node by their corners); convert the mesh to tetrahedra",
            self.name
        )
    }
}

/// Counts of what a reader skipped or converted, turned into warnings at the end.
#[derive(Default)]
pub(crate) struct Tally {
    /// Label (kind name and the format's code) → count.
    skipped: BTreeMap<String, usize>,
    converted: usize,
}

impl Tally {
    /// Records `count` skipped elements of `kind`; `code` names it in the format's terms
    /// (`type 2`, `section Triangles`).
    pub fn skip(&mut self, code: &str, kind: &Kind, count: usize) {
        if count > 0 {
            *self
                .skipped
                .entry(format!("{} ({code})", kind.name))
                .or_default() += count;
        }
    }

    /// Records `count` quadratic tets read by their corners.
    pub fn convert(&mut self, count: usize) {
        self.converted += count;
    }

    /// The warnings (none when nothing was skipped or converted).
    pub fn warnings(&self, path: &Path, format: &str) -> Vec<String> {
        let mut out = Vec::new();
        if !self.skipped.is_empty() {
            let total = self
                .skipped
                .values()
                .fold(0usize, |a, &n| a.saturating_add(n));
            let mut parts: Vec<_> = self.skipped.iter().collect();
            // Most numerous first, then by type.
            parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let list: Vec<String> = parts
                .iter()
                .map(|(label, n)| format!("{n} × {label}"))
                .collect();
            out.push(format!(
                "{}: skipped {total} lower-dimensional {format} elements (boundary groups, no \
                 volume): {}",
                path.display(),
                list.join(", ")
            ));
        }
        if self.converted > 0 {
            out.push(format!(
                "{}: read {} 10-node (quadratic) tetrahedra as linear ones from their corner \
                 nodes",
                path.display(),
                self.converted
            ));
        }
        out
    }
}
