//! Objects passing through each other unnoticed: the check a scene *without* IPC contact
//! between its objects gets, so that two objects that meet do not cross silently.
//!
//! Without `[contact] ipc = true` objects do not collide; that is a choice the scene makes
//! (e.g. a solver that has no contact, or objects known to stay apart), but one a newcomer
//! cannot see being made: the run exits 0 with the objects through each other. A
//! [`CrossingWatch`] finds, after each step, pairs of objects whose boundary surfaces cross —
//! exactly, with the triangle–triangle test of [`super::intersect`] over the face pairs of
//! [`super::broad::face_pairs`] — and reports each pair once, at the first step it crosses
//! ([`crate::sim::Simulation::step`] turns that into a warning and a
//! [`crate::problem::StateCheck::crossings`] record).
//!
//! **Cost.** Only pairs not yet reported are looked at, and only when their surfaces' bounding
//! boxes overlap: a scene whose objects stay apart pays one pass over the surface vertices per
//! step. For a pair whose boxes overlap, only the faces of each that reach into the overlap
//! are tested (all pairs of them, or the grid when they are many: [`DIRECT_PAIRS`]); a ball
//! in a hoop's hole has none. A scene with one object (or IPC contact on) has no watch at all. Once every pair has
//! been reported the check stops. Self-intersection is not looked for (an object folding
//! through itself is not what a missing `ipc` key hides), nor obstacles (half-spaces and
//! solids report penetrations of their own).

use super::broad::Aabb;
use super::intersect::{faces_intersect, intersecting_pairs};
use super::mesh::CollisionMesh;
use crate::error::Result;
use crate::problem::Model;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// Face pairs of one pair of objects tested directly (every pair of their faces that reach into
/// the overlap of the objects' boxes) rather than through the grid over all faces
/// ([`super::broad::face_pairs`]), whose set-up costs about as much as this many box tests.
pub const DIRECT_PAIRS: usize = 1 << 16;

/// A box no box overlaps (an object without surface vertices).
const EMPTY: Aabb = Aabb {
    lo: [f64::INFINITY; 3],
    hi: [f64::NEG_INFINITY; 3],
};

/// Two objects whose surfaces cross, at the first step they do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Crossing {
    /// The objects' indices (0-based, scene order; the lower first).
    pub objects: [usize; 2],
    /// Their names (the scene's `name` keys).
    pub names: [String; 2],
    /// Pairs of surface triangles, one of each object, that intersect at that step.
    pub triangle_pairs: usize,
}

/// Watches the objects of a model without IPC contact for surfaces that cross (module docs).
pub struct CrossingWatch {
    /// The model's surfaces, each body without self-contact: only pairs of objects are tested.
    mesh: CollisionMesh,
    /// Whether pair (a, b), a < b, has been reported: `a * bodies + b`.
    reported: Vec<bool>,
    /// Pairs not yet reported.
    remaining: usize,
}

impl CrossingWatch {
    /// A watch for `model`, or `None` when there is nothing to watch: fewer than two objects, or
    /// IPC contact on (objects then collide). Errors as [`CollisionMesh::from_model`].
    pub fn new(model: &Model) -> Result<Option<Self>> {
        let n = model.bodies.len();
        if n < 2 || model.contact.is_some() {
            return Ok(None);
        }
        let mut mesh = CollisionMesh::from_model(model)?;
        for b in &mut mesh.bodies {
            b.self_contact = false;
        }
        Ok(Some(CrossingWatch {
            mesh,
            reported: vec![false; n * n],
            remaining: n * (n - 1) / 2,
        }))
    }

    /// Pairs of objects whose surfaces cross at model positions `x` (flat, m) and were not
    /// reported before, sorted by object indices; each pair is returned once in a watch's life.
    pub fn check(&mut self, x: &[f64]) -> Result<Vec<Crossing>> {
        if self.remaining == 0 {
            return Ok(Vec::new());
        }
        let xs: &[[f64; 3]] = bytemuck::cast_slice(x);
        let n = self.mesh.bodies.len();
        // Bounding boxes of each object's surface: no overlap, no crossing.
        let mut boxes: Vec<Option<Aabb>> = vec![None; n];
        for (&v, &b) in self.mesh.vertices.iter().zip(&self.mesh.vertex_body) {
            let p = xs[v as usize];
            let bx = boxes[b as usize].get_or_insert(Aabb { lo: p, hi: p });
            bx.lo = [0, 1, 2].map(|k| bx.lo[k].min(p[k]));
            bx.hi = [0, 1, 2].map(|k| bx.hi[k].max(p[k]));
        }
        let open = |a: usize, b: usize| match (&boxes[a], &boxes[b]) {
            (Some(ba), Some(bb)) => ba.overlaps(bb),
            _ => false,
        };
        let open_pairs: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| !self.reported[a * n + b] && open(a, b))
            .collect();
        if open_pairs.is_empty() {
            return Ok(Vec::new());
        }
        let faces = &self.mesh.faces;
        let face_boxes: Vec<Aabb> = faces
            .iter()
            .map(|f| Aabb::around(f.map(|v| xs[v as usize]), 0.0))
            .collect();
        let mut counts: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        // Per open pair, the faces of each object that reach into the overlap of the two
        // boxes: few pairs of them are tested directly, many go to the grid over every face.
        let mut to_grid = Vec::new();
        for &(a, b) in &open_pairs {
            let (ba, bb) = (boxes[a].unwrap_or(EMPTY), boxes[b].unwrap_or(EMPTY));
            let overlap = Aabb {
                lo: [0, 1, 2].map(|k| ba.lo[k].max(bb.lo[k])),
                hi: [0, 1, 2].map(|k| ba.hi[k].min(bb.hi[k])),
            };
            let near = |body: usize| -> Vec<usize> {
                (0..faces.len())
                    .filter(|&f| {
                        self.mesh.face_body[f] as usize == body && face_boxes[f].overlaps(&overlap)
                    })
                    .collect()
            };
            let (fa, fb) = (near(a), near(b));
            if fa.len().saturating_mul(fb.len()) > DIRECT_PAIRS {
                to_grid.push((a, b));
                continue;
            }
            let crossing: usize = fa
                .par_iter()
                .map(|&f| {
                    fb.iter()
                        .filter(|&&g| {
                            face_boxes[f].overlaps(&face_boxes[g])
                                && faces_intersect(faces[f], faces[g], xs)
                        })
                        .count()
                })
                .sum();
            if crossing > 0 {
                counts.insert((a, b), crossing);
            }
        }
        if !to_grid.is_empty() {
            for [f, g] in intersecting_pairs(&self.mesh, xs)? {
                let (bf, bg) = (
                    self.mesh.face_body[f as usize] as usize,
                    self.mesh.face_body[g as usize] as usize,
                );
                let pair = (bf.min(bg), bf.max(bg));
                if to_grid.contains(&pair) {
                    *counts.entry(pair).or_default() += 1;
                }
            }
        }
        Ok(counts
            .into_iter()
            .map(|((a, b), triangle_pairs)| {
                self.reported[a * n + b] = true;
                self.remaining -= 1;
                Crossing {
                    objects: [a, b],
                    names: [a, b].map(|i| self.mesh.bodies[i].name.clone()),
                    triangle_pairs,
                }
            })
            .collect())
    }
}
