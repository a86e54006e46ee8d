//! The backward pass: loss gradients on states in, parameter gradients out.

use super::hessian::ExactHessian;
use super::options::Unconverged;
use super::params::{young_poisson_jacobian, Gradients, Param};
use super::step::{step_adjoint, StepInputs, Wanted};
use super::tape::Tape;
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use std::collections::BTreeMap;

/// dL/dxˢ and dL/dvˢ of a loss L on the states of a recorded run: per step number s (0 = the
/// initial state), 3n values (flattened per vertex); steps not listed contribute nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seeds {
    /// dL/dxˢ, 1/m × [L].
    pub x: BTreeMap<usize, Vec<f64>>,
    /// dL/dvˢ, s/m × [L].
    pub v: BTreeMap<usize, Vec<f64>>,
}

/// What a backward pass cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BackwardStats {
    /// Wall time of the backward pass, ms (recomputed steps included).
    pub backward_ms: f64,
    /// Wall time of the recorded forward steps, ms.
    pub forward_ms: f64,
    /// Steps re-solved from checkpoints.
    pub recomputed_steps: usize,
    /// The most states held at once.
    pub peak_states: usize,
    /// Those states' size, bytes (positions, velocities and BDF2 history, f64).
    pub peak_state_bytes: usize,
}

impl Tape {
    /// dL/d(`wrt`) for the loss whose state gradients are `seeds`, by the adjoint of every step
    /// up to the last seeded state (later steps cannot change L: they are not visited and their
    /// force and pin gradients are exactly zero). Each visited step factors the exact Hessian at
    /// its converged state ([`super`]'s docs).
    ///
    /// Errors, one line each: a seed for a step not recorded or of the wrong length or not
    /// finite; `pin_targets` for a model without pins; `youngs_modulus`/`poisson_ratio` for an
    /// ARAP element; an unconverged step under [`Unconverged::Refuse`]; a step whose exact
    /// Hessian is not positive definite.
    pub fn backward(
        &mut self,
        seeds: &Seeds,
        wrt: &[Param],
        unconverged: Unconverged,
    ) -> Result<(Gradients, BackwardStats)> {
        let t0 = Instant::now();
        let model = &self.model;
        let n = 3 * model.num_vertices();
        let steps = self.records.len();
        let bad = |m: String| Err(JelloError::Invalid(format!("adjoint: {m}")));
        if let Some(why) = &self.broken {
            return bad(format!("the record cannot be differentiated: {why}"));
        }
        for (what, map) in [("x", &seeds.x), ("v", &seeds.v)] {
            for (&s, g) in map {
                if s > steps {
                    return bad(format!(
                        "dL/d{what} given for step {s}, the tape holds steps 0..={steps}"
                    ));
                }
                if g.len() != n {
                    return bad(format!(
                        "dL/d{what} at step {s} has {} entries, the model {n} DOFs",
                        g.len()
                    ));
                }
                if g.iter().any(|v| !v.is_finite()) {
                    return bad(format!("dL/d{what} at step {s} is not finite"));
                }
            }
        }
        let has = |p: Param| wrt.contains(&p);
        if has(Param::PinTargets) && model.pins.is_empty() {
            return bad("`pin_targets` asked for, but the model has no pins".into());
        }
        if has(Param::ContactStiffness) {
            match &model.contact {
                None => {
                    return bad(
                        "`contact_stiffness` asked for, but the model has no IPC contact".into(),
                    )
                }
                Some(c) if c.kappa.is_none() => {
                    return bad(
                        "`contact_stiffness` needs a fixed κ (contact.ipc_kappa): an \
                         adaptive κ is chosen by the solver each step, not an input"
                            .into(),
                    )
                }
                Some(_) => {}
            }
        }
        let young = has(Param::YoungsModulus) || has(Param::PoissonRatio);
        let jacobians = if young {
            (0..model.mesh.num_tets())
                .map(|t| young_poisson_jacobian(&model.materials[t], t))
                .collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let last = seeds
            .x
            .keys()
            .chain(seeds.v.keys())
            .copied()
            .max()
            .unwrap_or(0);
        let mut flagged = Vec::new();
        for (s, r) in self.records[..last].iter().enumerate() {
            if !r.converged {
                if unconverged == Unconverged::Refuse {
                    return bad(format!(
                        "step {} did not converge (residual {:.3e}, tolerance {:.1e}): its \
                         derivative is undefined; record with more iterations, or ask with \
                         Unconverged::Flag",
                        s + 1,
                        r.residual,
                        self.options.tolerance
                    ));
                }
                flagged.push(s + 1);
            }
        }
        let want = Wanted {
            material: has(Param::Mu) || has(Param::Lambda) || young,
            mass: has(Param::Density),
            pins: has(Param::PinTargets),
            forces: has(Param::Forces),
            stiffness: has(Param::ContactStiffness),
        };
        let mut stiffness = 0.0;
        let nt = model.mesh.num_tets();
        let (mut mu, mut la, mut mass) = (vec![0.0; nt], vec![0.0; nt], vec![0.0; n / 3]);
        let mut forces = vec![vec![0.0; n]; if want.forces { steps } else { 0 }];
        let mut pins = vec![vec![0.0; n]; if want.pins { steps + 1 } else { 0 }];
        let mut hessian = ExactHessian::new(model)?;
        let mut acc: BTreeMap<usize, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        let seeded = |s: usize, acc: &mut BTreeMap<usize, (Vec<f64>, Vec<f64>)>| {
            let (mut ax, mut av) = acc
                .remove(&s)
                .unwrap_or_else(|| (vec![0.0; n], vec![0.0; n]));
            if let Some(g) = seeds.x.get(&s) {
                ax.iter_mut().zip(g).for_each(|(a, g)| *a += g);
            }
            if let Some(g) = seeds.v.get(&s) {
                av.iter_mut().zip(g).for_each(|(a, g)| *a += g);
            }
            (ax, av)
        };
        let h = self.h;
        let contact = self.contact.clone();
        let mut visit = |model: &crate::problem::Model,
                         s: usize,
                         start: &crate::problem::State,
                         end: &crate::problem::State|
         -> Result<()> {
            let (ax, av) = seeded(s + 1, &mut acc);
            let res = step_adjoint(
                &StepInputs {
                    model,
                    h,
                    number: s + 1,
                    start,
                    end,
                    contact: &contact[s],
                    ax: &ax,
                    av: &av,
                },
                &mut hessian,
                want,
                &mut mu,
                &mut la,
                &mut mass,
            )?;
            let mut add = |at: usize, wx: f64| {
                let e = acc
                    .entry(at)
                    .or_insert_with(|| (vec![0.0; n], vec![0.0; n]));
                for k in 0..n {
                    e.0[k] += wx * res.x_hat[k];
                    e.1[k] += wx * res.v_hat[k];
                }
            };
            if res.bdf2 && s > 0 {
                add(s, 4.0 / 3.0);
                add(s - 1, -1.0 / 3.0);
            } else {
                add(s, 1.0);
            }
            if let Some(f) = res.forces {
                forces[s] = f;
            }
            if let Some(p) = res.pins {
                pins[s + 1] = p;
            }
            stiffness += res.stiffness;
            Ok(())
        };
        let usage = self.reverse(last, &mut visit)?;
        let (ax0, av0) = seeded(0, &mut acc);
        let model = &self.model;
        let per_tet = |p: Param, v: &Vec<f64>| has(p).then(|| v.clone());
        let mut grads = Gradients {
            initial_positions: has(Param::InitialPositions).then_some(ax0),
            initial_velocities: has(Param::InitialVelocities).then_some(av0),
            mu: per_tet(Param::Mu, &mu),
            contact_stiffness: has(Param::ContactStiffness).then_some(stiffness),
            lambda: per_tet(Param::Lambda, &la),
            unconverged_steps: flagged,
            ..Gradients::default()
        };
        if young {
            let chain = |col: usize| -> Vec<f64> {
                (0..nt)
                    .map(|t| mu[t] * jacobians[t][0][col] + la[t] * jacobians[t][1][col])
                    .collect()
            };
            grads.youngs_modulus = has(Param::YoungsModulus).then(|| chain(0));
            grads.poisson_ratio = has(Param::PoissonRatio).then(|| chain(1));
        }
        if want.mass {
            // m_v = Σ_e ρ_e V_e / 4 over the tets at v.
            grads.density = Some(
                model
                    .mesh
                    .tets
                    .iter()
                    .zip(&model.rest)
                    .map(|(tet, r)| {
                        tet.iter().map(|&v| mass[v as usize]).sum::<f64>() * r.volume / 4.0
                    })
                    .collect(),
            );
        }
        if want.pins {
            grads.pin_targets = Some(
                pins.iter()
                    .map(|p| {
                        model
                            .pins
                            .iter()
                            .flat_map(|pin| pin.vertices.iter())
                            .flat_map(|&v| (0..3).map(move |k| p[3 * v as usize + k]))
                            .collect()
                    })
                    .collect(),
            );
        }
        if want.forces {
            grads.forces = Some(forces);
        }
        let per_state = 8
            * n
            * if model.integrator.keeps_history() {
                4
            } else {
                2
            };
        let stats = BackwardStats {
            backward_ms: t0.elapsed().as_secs_f64() * 1e3,
            forward_ms: self.forward_ms,
            recomputed_steps: usage.recomputed,
            peak_states: usage.peak,
            peak_state_bytes: usage.peak * per_state,
        };
        Ok((grads, stats))
    }
}
