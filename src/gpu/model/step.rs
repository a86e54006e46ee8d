//! The step's start state on the device: x_start, x̃, the obstacle records at x_start and the
//! step's constants, uploaded once per step from a [`StepProblem`].

use super::DeviceModel;
use crate::gpu::device::{Buf, Device};
use crate::gpu::layout::{GpuContact, GpuVec4};
use crate::problem::{Model, StepProblem};
use crate::{JelloError, Result};

/// The constants of one step as the kernels take them (f32).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepConstants {
    /// The inertia weight 1/ĥ², 1/s² ([`StepProblem::inertia`]; 1/h² under implicit Euler).
    pub inertia: f32,
    /// The obstacle barrier's weight 1/h², 1/s² (κ·m/h² with the real step: not `inertia`
    /// under BDF2, [`crate::problem::integrator`]).
    pub barrier_ih2: f32,
    /// Barrier stiffness κ (the model's).
    pub kappa: f32,
    /// Barrier activation distance d̂, m.
    pub dhat: f32,
    /// Whether the step uses the strict inversion filter ([`StepProblem::strict_inversion`]).
    pub strict: bool,
}

impl StepConstants {
    /// The model's barrier constants, before any step.
    pub fn of_model(model: &Model) -> Self {
        StepConstants {
            kappa: model.barrier.kappa as f32,
            dhat: model.barrier.dhat as f32,
            ..Default::default()
        }
    }
}

impl DeviceModel {
    /// Starts `problem`'s step: checks it is this model's and finite, writes x_start and x̃,
    /// writes x_start into `current` and the obstacle records at x_start (f64, per vertex per
    /// obstacle, [`GpuContact::at`]) into `contacts`, and sets [`DeviceModel::step`]. `who`
    /// names the caller in errors.
    ///
    /// Writes go to the device's queue: the caller flushes anything recorded before.
    pub fn begin_step(
        &mut self,
        dev: &mut Device,
        problem: &StepProblem,
        current: &Buf<GpuVec4>,
        contacts: &Buf<GpuContact>,
        who: &str,
    ) -> Result<()> {
        let model = problem.model;
        if !self.fits(model) {
            return Err(JelloError::Solver(format!(
                "{who}: the problem's model is not the one it was built for"
            )));
        }
        if let Some(k) = problem
            .x_start
            .iter()
            .chain(&problem.x_tilde)
            .position(|v| !v.is_finite())
        {
            return Err(JelloError::Invalid(format!(
                "{who}: non-finite start or inertial target at DOF {k}"
            )));
        }
        let xs = self.relative(&problem.x_start);
        let xt = self.relative(&problem.x_tilde);
        dev.write(current, 0, &xs)?;
        dev.write(&self.x_start, 0, &xs)?;
        dev.write(&self.x_tilde, 0, &xt)?;
        dev.write(contacts, 0, &self.contact_records(&problem.x_start))?;
        self.step = StepConstants {
            inertia: problem.inertia as f32,
            barrier_ih2: problem.inv_h2() as f32,
            kappa: model.barrier.kappa as f32,
            dhat: model.barrier.dhat as f32,
            strict: problem.strict_inversion,
        };
        Ok(())
    }

    /// The obstacle records of positions `x` (flat, m), computed in f64 relative to each
    /// obstacle (precise near contact): [`Self::contacts_per_vertex`] per vertex.
    pub fn contact_records(&self, x: &[f64]) -> Vec<GpuContact> {
        let mut cs = Vec::with_capacity(self.nv * self.contacts_per_vertex());
        for p in x.chunks_exact(3) {
            if self.obstacles.is_empty() {
                cs.push(GpuContact::none());
            }
            for ob in &self.obstacles {
                cs.push(GpuContact::at(ob, [p[0], p[1], p[2]]));
            }
        }
        cs
    }
}
