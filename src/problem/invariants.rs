//! The physical invariants every accepted step is checked against: no inverted element (unless
//! the scene allows it) and no obstacle inside a body.

use super::Model;
use nalgebra::Vector3;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Whether a step may end with inverted elements (J = det F ≤ 0).
///
/// `Forbid` (the default for every model): every accepted step keeps every element's J > 0. The
/// solvers run as usual; a step that ends inverted is solved again with the strict filter
/// (every iterate keeps every element positive, [`super::StepProblem::strict_inversion`]), then
/// in 2, 4 and 8 substeps, and if that fails too the step is reported as failed — never
/// accepted inverted (see [`crate::sim::Simulation::step`]).
///
/// `Allow` (only for models finite through inversion: stable Neo-Hookean, its log-free variant,
/// fixed corotated, ARAP, linear, StVK): the solvers may end a step with inverted elements;
/// they are counted and reported, and such a step is never reported as cleanly converged.
/// Neo-Hookean with log J is infinite at J ≤ 0, so no solver can accept an inverted element of
/// it and `Allow` is refused for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InversionPolicy {
    /// Every accepted step keeps every element's J > 0.
    #[default]
    Forbid,
    /// Inverted elements are reported, not prevented.
    Allow,
}

/// The invariants of one state, per body (in [`Model::bodies`] order).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StateCheck {
    /// Elements with J ≤ 0, per body.
    pub inverted: Vec<usize>,
    /// Surface triangles reaching into an obstacle's interior, per body (plus one per bounded
    /// obstacle the body encloses whole, when checked: [`Model::check_start`]).
    pub penetrations: Vec<usize>,
    /// Smallest J over all elements (1 at rest).
    pub min_j: f64,
    /// Pairs of objects whose surfaces cross for the first time in the run, in a model without
    /// IPC contact between objects (each pair once: [`crate::contact::crossings`]); filled by
    /// [`crate::sim::Simulation::step`], empty from [`Model::check_state`]. Not an invariant
    /// violation — the scene let its objects pass through each other — so
    /// [`Self::is_clean`] does not look at it; the step's warnings name it.
    pub crossings: Vec<crate::contact::Crossing>,
}

impl StateCheck {
    /// Inverted elements over all bodies.
    pub fn total_inverted(&self) -> usize {
        self.inverted.iter().sum()
    }
    /// Obstacle penetrations over all bodies.
    pub fn total_penetrations(&self) -> usize {
        self.penetrations.iter().sum()
    }
    /// Whether both invariants hold.
    pub fn is_clean(&self) -> bool {
        self.total_inverted() == 0 && self.total_penetrations() == 0
    }
}

impl Model {
    /// J = det F of element `t` at positions `x` (flattened, m).
    pub fn element_j(&self, x: &[f64], t: usize) -> f64 {
        let tet = self.mesh.tets[t];
        let p = tet.map(|i| Vector3::from_column_slice(&x[3 * i as usize..3 * i as usize + 3]));
        let v6 = (p[1] - p[0]).dot(&(p[2] - p[0]).cross(&(p[3] - p[0])));
        v6 / 6.0 / self.rest[t].volume
    }

    /// Counts inverted elements and obstacle penetrations at `x`, per body.
    pub fn check_state(&self, x: &[f64]) -> StateCheck {
        let nb = self.bodies.len().max(1);
        let js: Vec<f64> = (0..self.mesh.num_tets())
            .into_par_iter()
            .map(|t| self.element_j(x, t))
            .collect();
        let mut inverted = vec![0usize; nb];
        for (t, &j) in js.iter().enumerate() {
            if j.is_nan() || j <= 0.0 {
                inverted[self.body_of_tet(t)] += 1;
            }
        }
        let mut penetrations = vec![0usize; nb];
        if !self.obstacles.is_empty() {
            let hits: Vec<usize> = self
                .surface
                .triangles
                .par_iter()
                .enumerate()
                .filter(|(_, tri)| {
                    let p = tri.map(|v| {
                        Vector3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3])
                    });
                    self.obstacles.iter().any(|o| o.overlaps_triangle(&p))
                })
                .map(|(f, _)| self.body_of_vertex(self.surface.triangles[f][0] as usize))
                .collect();
            for b in hits {
                penetrations[b] += 1;
            }
        }
        StateCheck {
            inverted,
            penetrations,
            min_j: js.iter().copied().fold(f64::INFINITY, f64::min),
            crossings: Vec::new(),
        }
    }

    /// The start-state check: [`Self::check_state`] plus bounded obstacles a body encloses whole
    /// (no surface triangle touches them, but their centre lies in one of the body's elements).
    pub fn check_start(&self, x: &[f64]) -> StateCheck {
        let mut c = self.check_state(x);
        for o in &self.obstacles {
            let Some(q) = o.interior_point() else {
                continue;
            };
            if let Some(t) = (0..self.mesh.num_tets()).find(|&t| self.tet_contains(x, t, &q)) {
                let b = self.body_of_tet(t);
                c.penetrations[b] += 1;
            }
        }
        c
    }

    /// Describes the first obstacle that overlaps a body at `x` — "obstacle 1 (sphere) overlaps
    /// object `ball`: surface triangle 12 reaches into it" — or `None` when none does.
    pub fn first_overlap(&self, x: &[f64]) -> Option<(usize, String)> {
        for (i, o) in self.obstacles.iter().enumerate() {
            for (f, tri) in self.surface.triangles.iter().enumerate() {
                let p =
                    tri.map(|v| Vector3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3]));
                if o.overlaps_triangle(&p) {
                    let b = &self.bodies[self.body_of_vertex(tri[0] as usize)];
                    return Some((
                        i,
                        format!(
                            "overlaps object `{}`: its surface triangle {f} (vertices {}, {}, {}) \
                             reaches into the obstacle",
                            b.name, tri[0], tri[1], tri[2]
                        ),
                    ));
                }
            }
            if let Some(q) = o.interior_point() {
                if let Some(t) = (0..self.mesh.num_tets()).find(|&t| self.tet_contains(x, t, &q)) {
                    let b = &self.bodies[self.body_of_tet(t)];
                    return Some((
                        i,
                        format!(
                            "lies inside object `{}` (its centre is in element {t})",
                            b.name
                        ),
                    ));
                }
            }
        }
        None
    }

    fn tet_contains(&self, x: &[f64], t: usize, q: &Vector3<f64>) -> bool {
        let tet = self.mesh.tets[t];
        let p = tet.map(|i| Vector3::from_column_slice(&x[3 * i as usize..3 * i as usize + 3]));
        let vol = |a: &Vector3<f64>, b: &Vector3<f64>, c: &Vector3<f64>, d: &Vector3<f64>| {
            (b - a).dot(&(c - a).cross(&(d - a)))
        };
        let whole = vol(&p[0], &p[1], &p[2], &p[3]);
        if whole == 0.0 {
            return false;
        }
        let s = whole.signum();
        [
            vol(q, &p[1], &p[2], &p[3]),
            vol(&p[0], q, &p[2], &p[3]),
            vol(&p[0], &p[1], q, &p[3]),
            vol(&p[0], &p[1], &p[2], q),
        ]
        .iter()
        .all(|v| v * s >= 0.0)
    }

    /// Index into [`Self::bodies`] of the body holding vertex `v` (0 without bodies).
    pub fn body_of_vertex(&self, v: usize) -> usize {
        self.bodies
            .iter()
            .position(|b| b.vertices.contains(&v))
            .unwrap_or(0)
    }

    /// Index into [`Self::bodies`] of the body holding element `t` (0 without bodies).
    pub fn body_of_tet(&self, t: usize) -> usize {
        self.bodies
            .iter()
            .position(|b| b.tets.contains(&t))
            .unwrap_or(0)
    }
}
