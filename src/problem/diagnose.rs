//! Saying why a step's energy or gradient is not finite, in one line that names the cause as far
//! as it is known: an overflowing gravity, force or velocity, a vertex far from its inertial
//! target, an element whose energy overflows, an inverted element of a model that is infinite
//! there, or a vertex inside an obstacle. Inversion is blamed only when it is the cause.

use super::{ElasticTerms, StepProblem};
use crate::material::element_energy;
use nalgebra::Vector3;

impl StepProblem<'_> {
    /// The cause of a non-finite energy or gradient at `x`, as one line (no trailing period).
    pub fn diagnose_non_finite(&self, elastic: &dyn ElasticTerms, x: &[f64]) -> String {
        let model = self.model;
        let at = format!("at t = {:.6} s", self.t_end);
        if let Some(k) = x.iter().position(|v| !v.is_finite()) {
            return format!(
                "the position of vertex {}{} is {} {at}",
                k / 3,
                self.body_of_vertex(k / 3),
                x[k]
            );
        }
        if let Some(k) = self
            .x_tilde
            .iter()
            .chain(&self.load)
            .position(|v| !v.is_finite())
        {
            return self.input_overflow(k % self.x_tilde.len().max(1), &at);
        }
        let inertia = self.inertia_energy(x);
        if !inertia.is_finite() {
            // x̃ is finite but ½m/h²|x − x̃|² overflows: say how far, where, and what put the
            // target there.
            let (v, d) = (0..model.num_vertices())
                .map(|v| {
                    let d: f64 = (0..3)
                        .map(|k| (x[3 * v + k] - self.x_tilde[3 * v + k]).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    (v, d)
                })
                .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
            return format!(
                "the inertia term overflows {at}: vertex {v}{} is {d:.3e} m from its inertial \
                 target, put there by {}",
                self.body_of_vertex(v),
                self.dominant_cause(v)
            );
        }
        let barrier = self.barrier_energy(x);
        if !barrier.is_finite() {
            for v in 0..model.num_vertices() {
                let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
                if let Some(o) = model.obstacles.iter().position(|o| o.distance(&p).d <= 0.0) {
                    return format!(
                        "vertex {v}{} is on or inside obstacle {o} {at}",
                        self.body_of_vertex(v)
                    );
                }
            }
            if let Some((o, what)) = model.first_overlap(x) {
                return format!("obstacle {o} {what} {at}");
            }
        }
        for (t, tet) in model.mesh.tets.iter().enumerate() {
            let c = tet.map(|i| Vector3::from_column_slice(&x[3 * i as usize..3 * i as usize + 3]));
            let e = element_energy(&model.materials[t], &model.rest[t], &c);
            if e.is_finite() {
                continue;
            }
            let j = model.rest[t].deformation_gradient(&c).determinant();
            let m = model.materials[t].model;
            let body = self.body_of_tet(t);
            return if j <= 0.0 && m.infinite_when_inverted() {
                format!(
                    "element {t}{body} is inverted (J = {j:.3e}) and {}'s energy is infinite there {at}",
                    m.name()
                )
            } else {
                format!(
                    "the energy of element {t}{body} overflows (J = {j:.3e}, {}) {at}",
                    m.name()
                )
            };
        }
        let e = elastic.elastic_energy(x);
        if !e.is_finite() {
            return format!(
                "the elastic energy on backend {} is {e} {at} although every element is finite in f64",
                elastic.backend_name()
            );
        }
        format!(
            "the gradient is not finite {at} although the energy is ({:.3e} J): a force overflows",
            inertia + e + barrier
        )
    }

    /// Which input makes DOF `k`'s inertial target (or static load) non-finite.
    fn input_overflow(&self, k: usize, at: &str) -> String {
        let model = self.model;
        let (h, v) = (self.h, k / 3);
        let g = model.gravity[k % 3];
        if !(h * h * g).is_finite() || !(model.mass[v] * g).is_finite() {
            return format!(
                "gravity {:?} m/s² (key `simulation.gravity`) overflows {at} (h = {h} s)",
                model.gravity
            );
        }
        for (i, f) in model.forces.iter().enumerate() {
            if !f.vertices.contains(&(v as u32)) {
                continue;
            }
            let m_total: f64 = f.vertices.iter().map(|&w| model.mass[w as usize]).sum();
            if !(h * h * f.force[k % 3] / m_total).is_finite() {
                return format!(
                    "force {:?} N (key `forces[{i}].force`) overflows on {} kg {at}",
                    f.force, m_total
                );
            }
        }
        format!(
            "the velocity of vertex {v}{} overflows {at} ({})",
            self.body_of_vertex(v),
            self.dominant_cause(v)
        )
    }

    /// What moves vertex `v`'s inertial target furthest from where it is: h·velocity,
    /// h²·gravity or h²·force/m, named with its scene key where there is one.
    fn dominant_cause(&self, v: usize) -> String {
        let model = self.model;
        let h = self.h;
        let norm = |v: [f64; 3]| v.iter().map(|c| c * c).sum::<f64>().sqrt();
        let gravity = norm(model.gravity.map(|c| h * h * c));
        let mut forces = [0.0; 3];
        let mut best_force: Option<(usize, f64)> = None;
        for (i, f) in model.forces.iter().enumerate() {
            if !f.vertices.contains(&(v as u32)) || !f.active(self.t_end - h) {
                continue;
            }
            let m_total: f64 = f.vertices.iter().map(|&w| model.mass[w as usize]).sum();
            let push = f.force.map(|c| h * h * c / m_total);
            for k in 0..3 {
                forces[k] += push[k];
            }
            let size = norm(push);
            if best_force.is_none_or(|(_, s)| size > s) {
                best_force = Some((i, size));
            }
        }
        let hv: [f64; 3] = std::array::from_fn(|k| {
            self.x_tilde[3 * v + k] - self.x_prev[3 * v + k] - h * h * model.gravity[k] - forces[k]
        });
        let velocity = norm(hv);
        let force = best_force.map(|(_, s)| s).unwrap_or(0.0);
        if !velocity.is_finite() || (velocity > gravity && velocity > force) {
            let b = model.body_of_vertex(v);
            let key = if self.t_end - h <= 0.0 {
                format!(" (key `objects[{b}].velocity` or `angular_velocity`)")
            } else {
                String::new()
            };
            format!(
                "its velocity {:.3e} m/s{key}: h·v = {velocity:.3e} m",
                velocity / h
            )
        } else if gravity >= force {
            format!(
                "gravity {:?} m/s² (key `simulation.gravity`): h²·g = {gravity:.3e} m",
                model.gravity
            )
        } else {
            let i = best_force.map(|(i, _)| i).unwrap_or(0);
            format!(
                "force {:?} N (key `forces[{i}].force`): h²·f/m = {force:.3e} m",
                model.forces[i].force
            )
        }
    }

    fn body_of_vertex(&self, v: usize) -> String {
        self.object_named(|b| b.vertices.contains(&v))
    }

    fn body_of_tet(&self, t: usize) -> String {
        self.object_named(|b| b.tets.contains(&t))
    }

    /// " (object `name`)" for the first body matching `holds`, else nothing.
    fn object_named(&self, holds: impl Fn(&super::Body) -> bool) -> String {
        self.model
            .bodies
            .iter()
            .find(|b| holds(b))
            .map(|b| format!(" (object `{}`)", b.name))
            .unwrap_or_default()
    }
}
