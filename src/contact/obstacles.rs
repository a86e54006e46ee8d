//! Triangle-mesh obstacles of IPC contact (issue 12): static or scripted surfaces without
//! degrees of freedom, read from OBJ/PLY/STL ([`crate::mesh::read_triangle_mesh`]), added to a
//! model's collision mesh by [`crate::problem::Model::with_obstacle_meshes`].
//!
//! **Motion.** An obstacle follows a [`Script`] (the pins' scripts: fixed, translate, rotate,
//! keyframes) from its placed positions at t = 0. Within one step it does not move: the step's
//! problem puts it at its scripted positions at the step's end t + h
//! ([`IpcContact::positions_at`]) and Newton's iterates, the CCD step filter and the barrier
//! all see it there. Like a pinned vertex it *jumps* there at the step's start, outside the
//! filter; unlike a pinned vertex the jump is checked: [`IpcContact::obstacle_jump_conflict`]
//! runs additive CCD of the jump (obstacles from their positions at t to those at t + h, pinned
//! model vertices to their targets, free ones still) and the step fails when a pair would
//! touch or come within [`JUMP_RESCALING`]'s margin of touching.
//!
//! **Friction.** An obstacle vertex's friction displacement over the step is its scripted
//! motion: the relative tangential velocity of a pair is then the model's velocity minus the
//! obstacle's, so an object resting on a moving plate is carried along.

use super::ccd::{additive_ccd, AccdParams};
use super::mesh::BodyKind;
use super::potential::{ContactPair, IpcContact};
use crate::error::Result;
use crate::problem::Script;
use nalgebra::Vector3;
use rayon::prelude::*;
use std::borrow::Cow;

/// η of the CCD that certifies an obstacle's jump: the jump fails when a pair would come
/// within about 1 − η = 1% of its distance at the step's start (additive CCD's stopping gap,
/// [`super::ccd`]); the step filter's η = 0.9 would refuse any jump that closes 90% of a gap,
/// which an obstacle pushing an object does every step.
pub const JUMP_RESCALING: f64 = 0.99;

/// One triangle-mesh obstacle before it joins a collision mesh.
#[derive(Clone, Debug, PartialEq)]
pub struct ObstacleMesh {
    /// Name (in errors, and for friction pairs).
    pub name: String,
    /// Vertex positions at t = 0, m (placed: the scene's transform applied).
    pub positions: Vec<[f64; 3]>,
    /// Triangles, indices into `positions` (three distinct corners each).
    pub triangles: Vec<[u32; 3]>,
    /// How it moves ([`Script::Fixed`]: static).
    pub script: Script,
}

/// A pair that an obstacle's jump would bring into contact ([`IpcContact::obstacle_jump_conflict`]).
#[derive(Clone, Debug, PartialEq)]
pub struct JumpConflict {
    /// The pair (global collision-mesh ids).
    pub pair: ContactPair,
    /// Name of the obstacle that jumps.
    pub obstacle: String,
    /// Name of the body it would hit.
    pub other: String,
    /// The fraction of the jump certified free of contact (< 1), dimensionless.
    pub t: f64,
    /// The pair's distance before the jump, m.
    pub distance: f64,
}

impl IpcContact {
    /// The collision body owning global id `v` (index into `mesh.bodies`).
    pub fn body_of(&self, v: u32) -> usize {
        let m = &self.mesh;
        let i = m.vertices.binary_search(&v).unwrap_or(0);
        m.vertex_body[i] as usize
    }

    /// Whether some obstacle follows a script other than [`Script::Fixed`].
    pub fn obstacles_move(&self) -> bool {
        self.obstacle_scripts.iter().any(|s| *s != Script::Fixed)
    }

    /// The obstacle vertices' positions at time `t` (s), m: each obstacle's script applied to
    /// its positions at t = 0 ([`super::CollisionMesh::obstacle_positions`]), in global-id
    /// order from `mesh.num_model_vertices`.
    pub fn obstacle_positions_at(&self, t: f64) -> Vec<[f64; 3]> {
        let m = &self.mesh;
        let n = m.num_model_vertices;
        let mut out = m.obstacle_positions.clone();
        let obstacles = m.bodies.iter().filter(|b| b.kind == BodyKind::Obstacle);
        for (body, script) in obstacles.zip(&self.obstacle_scripts) {
            if *script == Script::Fixed {
                continue;
            }
            for v in body.vertices.clone() {
                out[v - n] = script.position(m.obstacle_positions[v - n], t);
            }
        }
        out
    }

    /// The collision routines' position array at time `t` (s) for the model's flat positions
    /// `x` (m): the model's vertices, then the obstacles' at their scripted positions
    /// (borrowed, as [`Self::positions`], when no obstacle moves).
    pub fn positions_at<'a>(&self, x: &'a [f64], t: f64) -> Cow<'a, [[f64; 3]]> {
        if self.obstacles_move() {
            self.positions_with(x, &self.obstacle_positions_at(t))
        } else {
            self.positions(x)
        }
    }

    /// The collision routines' position array with the obstacle vertices at `obstacles` (m, one
    /// per obstacle vertex) and the model's at the flat `x` (m).
    pub fn positions_with<'a>(&self, x: &'a [f64], obstacles: &[[f64; 3]]) -> Cow<'a, [[f64; 3]]> {
        if obstacles.is_empty() {
            return Cow::Borrowed(bytemuck::cast_slice(x));
        }
        let mut all = Vec::with_capacity(x.len() / 3 + obstacles.len());
        all.extend_from_slice(bytemuck::cast_slice::<f64, [f64; 3]>(x));
        all.extend_from_slice(obstacles);
        Cow::Owned(all)
    }

    /// Certifies the jump of the obstacles (and of pinned model vertices) at a step's start:
    /// every vertex moves linearly from `from` to `to` (full position arrays, m), and each pair
    /// with an obstacle vertex and some motion is checked by additive CCD with η =
    /// [`JUMP_RESCALING`]. Returns the pair that would touch (or come within about 1% of
    /// touching) with the smallest certified fraction, `None` when the whole jump is clear.
    pub fn obstacle_jump_conflict(
        &self,
        from: &[[f64; 3]],
        to: &[[f64; 3]],
    ) -> Result<Option<JumpConflict>> {
        let n = self.mesh.num_model_vertices;
        let ds: Vec<[f64; 3]> = from
            .iter()
            .zip(to)
            .map(|(a, b)| [b[0] - a[0], b[1] - a[1], b[2] - a[2]])
            .collect();
        let moving: Vec<bool> = ds.iter().map(|d| *d != [0.0; 3]).collect();
        if !moving[n..].iter().any(|&m| m) {
            return Ok(None);
        }
        let pairs = self.candidate_pairs(from, Some(&ds), 0.0)?;
        let params = AccdParams {
            rescaling: JUMP_RESCALING,
            ..AccdParams::default()
        };
        let v3 = |p: [f64; 3]| Vector3::new(p[0], p[1], p[2]);
        let worst = pairs
            .par_iter()
            .enumerate()
            .filter(|(_, p)| {
                p.ids.iter().any(|&v| v as usize >= n) && p.ids.iter().any(|&v| moving[v as usize])
            })
            .map(|(i, p)| {
                let start = p.ids.map(|v| v3(from[v as usize]));
                let end = p.ids.map(|v| v3(to[v as usize]));
                (additive_ccd(p.kind, &start, &end, 0.0, 1.0, &params).t, i)
            })
            .filter(|&(t, _)| t < 1.0)
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Ok(worst.map(|(t, i)| {
            let pair = pairs[i];
            let (a, b) = (self.body_of(pair.ids[0]), self.body_of(pair.ids[3]));
            let obstacle_first = self.mesh.bodies[a].kind == BodyKind::Obstacle;
            let (o, other) = if obstacle_first { (a, b) } else { (b, a) };
            JumpConflict {
                pair,
                obstacle: self.mesh.bodies[o].name.clone(),
                other: self.mesh.bodies[other].name.clone(),
                t,
                distance: super::potential::distance_sq(&pair, from).sqrt(),
            }
        }))
    }
}
