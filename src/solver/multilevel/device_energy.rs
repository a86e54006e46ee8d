//! The multilevel solver's line-search energies on a [`Device`] (issue 13): for trials x_t
//! along a direction from a base point x, the change E(x_t) − E(x) of the step's incremental
//! potential, with the elastic and IPC terms from the WGSL kernels (or their CPU twins) and a
//! bound on its f32 round-off, so that the Armijo test can decide on the device's value where
//! it is clear and fall back to the f64 potential where it is not ([`device_backtracking`]).
//!
//! **Terms.**
//! - Elastic: the `elastic` kernel per element at x_t, and `dev_element_energy` forming
//!   Ψ_e(x_t) − Ψ_e(x) against the per-element values kept at the base
//!   ([`DeviceEnergy::begin`]), summed per 256 elements in f32 and over groups in f64.
//! - IPC barrier and lagged friction: [`DeviceContact`] on the candidates swept over the
//!   search's segment ([`crate::contact::IpcContact::swept_candidates`]), so every trial of
//!   the search is evaluated on one pair list; the base's values are taken on the same list.
//! - Inertia (and load) and the obstacle barriers (half-spaces, spheres, boxes) stay f64 on the
//!   host: a few flops and one distance per vertex, against the elements' SVDs and the pairs'
//!   distances that make the cost; and the inertia difference needs f64 (its terms are
//!   products of nearly equal positions).
//!
//! **Round-off bound** ([`DeviceDifference::slack`]). The energies are evaluated in σ − 1
//! (shaders/shared/material.wgsl), so an element's Ψ keeps f32 precision relative to itself;
//! what dominates is the rounding of the positions to f32 — relative to the rest centroid, at
//! the scale of the body, not of the element — which moves a stiff element's energy by
//! |force|·|position|·2⁻²⁴, far more than 2⁻²⁴·Ψ when its strain is small (a 1e10 Pa hoop:
//! 100× more). At both points the bound takes that first-order term over every element and
//! pair, R = Σ_terms Σ_corners Σ_k |f_k|·|p_k|·2⁻²⁴ (`dev_rounding` over the corner forces
//! `elastic`, `ipc_pairs` and `ipc_friction` write; only per-group partials come back), and
//! the slack is `ROUNDING_FACTOR`·(R(x) + R(x_t)) + `ELASTIC_REL`·(Σ|Ψ_e(x)| + Σ|Ψ_e(x_t)|) +
//! `CONTACT_REL`·(B + D at both points). Checked against the f64 potential on soft and stiff
//! balls in contact, at trials from 1e-6 to 1 of a Newton step, with the ratio error / bound
//! printed (`tests/gpu/gpu_multilevel.rs`, `device_line_search_energy_is_within_its_bound`).
//!
//! **What crosses the bus** per trial: the positions (16 bytes per vertex, twice with IPC
//! contact: the elements' and the collision array), and back the per-group partials (three
//! f32 per 256 elements) and the per-pair energies (4 bytes per pair) with their rounding
//! partials. Per search, the swept candidate list and the lagged friction pairs go up once.

use super::device_contact::{ContactEnergy, DeviceContact};
use crate::error::{JelloError, Result};
use crate::gpu::abi::{dev_groups, ELASTIC_GRADIENT, ENERGY_REFERENCE};
use crate::gpu::{Buf, Device, DeviceModel, GpuVec4, Kernel};
use crate::gpu::{Params, Plan};
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::backend::DeviceBackend;
use crate::solver::LineSearchResult;

/// 2⁻²⁴: the relative error of rounding to the nearest f32.
pub const ROUNDING_UNIT: f64 = 1.0 / 16_777_216.0;
/// Relative round-off of an f32 element energy beyond its inputs' rounding (a few ulps).
pub const ELASTIC_REL: f64 = 1e-6;
/// Relative round-off of an f32 pair's barrier or friction value beyond its inputs' rounding.
pub const CONTACT_REL: f64 = 1e-6;
/// The multiple of the inputs' first-order rounding effect in the slack: the arithmetic after
/// the inputs' rounding (F, the SVD, the distances) adds errors of the same kind and size.
pub const ROUNDING_FACTOR: f64 = 2.0;

/// E(x_t) − E(x) from the device, J ([`DeviceEnergy::difference`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceDifference {
    /// The change; +∞ where the host's f64 obstacle barrier says x_t is infeasible.
    pub value: f64,
    /// The bound on its round-off (module docs), J; +∞ when the device cannot tell (a contact
    /// pair that f32 puts at distance 0, or a non-finite value).
    pub slack: f64,
    /// Its elastic part Σ_e (Ψ_e(x_t) − Ψ_e(x)), J.
    pub elastic: f64,
    /// Its IPC part: barrier and lagged friction, J.
    pub contact: f64,
}

/// The line-search energies of a multilevel step on a device (module docs).
pub struct DeviceEnergy {
    /// Positions: the base, then each trial (m, relative to `origin`).
    x_base: Buf<GpuVec4>,
    x: Buf<GpuVec4>,
    energy: Buf<f32>,
    eref: Buf<f32>,
    /// Per element its corner forces at the last point (N), for `dev_rounding`.
    egrad: Buf<GpuVec4>,
    unused_hess: Buf<f32>,
    /// Per group of 256 elements: Σ (Ψ_e − Ψ_e(x)) (or Σ|Ψ_e| at the base), the
    /// inverted-element counts, and `dev_rounding`'s Σ|f|·|p|.
    partials: Buf<f32>,
    /// The line search's state (`None` before [`Self::begin`]).
    base: Option<Base>,
}

/// What [`DeviceEnergy::begin`] records at the base point.
struct Base {
    x: Vec<f64>,
    /// Σ_e |Ψ_e(x)|, J.
    elastic_magnitude: f64,
    /// The first-order effect of rounding x's coordinates on the device terms, J.
    rounding: f64,
    /// The obstacle barriers at x (host f64), J.
    obstacle: f64,
    contact: Option<(DeviceContact, ContactEnergy)>,
}

impl DeviceEnergy {
    /// The line search's scratch on `b`'s device, for `b`'s model (its mesh data are the
    /// backend's [`DeviceModel`]).
    pub fn new(b: &mut DeviceBackend) -> Result<Self> {
        let (nv, ne) = (b.num_vertices(), b.num_elements());
        let dev = b.device_mut();
        Ok(DeviceEnergy {
            x_base: dev.alloc("line-search base", nv)?,
            x: dev.alloc("line-search trial", nv)?,
            energy: dev.alloc("line-search element energy", ne)?,
            eref: dev.alloc("line-search element energy at the base", ne)?,
            egrad: dev.alloc("line-search element forces", 4 * ne)?,
            unused_hess: dev.alloc("line-search no hessian", 1)?,
            partials: dev.alloc("line-search partials", 3 * dev_groups(ne))?,
            base: None,
        })
    }

    /// Whether `b`'s model (the one this evaluator works on) has `model`'s mesh size.
    pub fn fits(b: &DeviceBackend, model: &Model) -> bool {
        b.m.fits(model)
    }

    /// Records, at `x`: the `elastic` kernel with the corner forces, `dev_element_energy` in
    /// `mode` and `dev_rounding` over the forces.
    fn record_elements(&self, m: &DeviceModel, plan: &mut Plan, x: &Buf<GpuVec4>, mode: u32) {
        plan.dispatch(
            Kernel::Elastic,
            &[
                x.id(),
                m.tets.id(),
                m.dm_inv.id(),
                m.elem.id(),
                self.energy.id(),
                self.egrad.id(),
                self.unused_hess.id(),
            ],
            Params::new().u0(ELASTIC_GRADIENT),
            m.ne as u32,
        );
        plan.dispatch(
            Kernel::DevElementEnergy,
            &[
                self.energy.id(),
                self.eref.id(),
                self.x_base.id(),
                x.id(),
                m.tets.id(),
                m.elem.id(),
                self.partials.id(),
            ],
            Params::new().u0(mode),
            m.ne as u32,
        );
        plan.dispatch(
            Kernel::DevRounding,
            &[self.egrad.id(), x.id(), m.tets.id(), self.partials.id()],
            Params {
                u1: 2 * dev_groups(m.ne) as u32,
                ..Params::new()
            },
            m.ne as u32,
        );
    }

    /// The element sums of the last pass: Σ of the energy partials (J) and the rounding bound
    /// (J), in f64.
    fn read_sums(&self, dev: &mut Device, ne: usize) -> Result<(f64, f64)> {
        let ge = dev_groups(ne);
        let p = dev.read_range(&self.partials, 0..3 * ge)?;
        let sum = |r: &[f32]| r.iter().map(|&v| v as f64).sum::<f64>();
        Ok((sum(&p[..ge]), sum(&p[2 * ge..]) * ROUNDING_UNIT))
    }

    /// Starts a line search from `x` (flat, m) along `d` (m) with step limit `alpha_max`:
    /// the element energies at `x` kept on the device, the IPC candidates swept over
    /// `x … x + alpha_max·d` uploaded with the present κ and lagged friction, and the base's
    /// contact and obstacle energies and rounding bound evaluated.
    pub fn begin(
        &mut self,
        b: &mut DeviceBackend,
        problem: &StepProblem,
        x: &[f64],
        d: &[f64],
        alpha_max: f64,
    ) -> Result<()> {
        let (parts, _) = b.parts();
        let (dev, m) = (parts.dev, &*parts.m);
        if x.len() != 3 * m.nv || d.len() != x.len() {
            return Err(JelloError::Solver(format!(
                "multilevel device energy: {} / {} coordinates for {} vertices",
                x.len(),
                d.len(),
                m.nv
            )));
        }
        if let Some(old) = self.base.take() {
            if let Some((c, _)) = old.contact {
                c.free(dev);
            }
        }
        dev.write(&self.x_base, 0, &m.relative(x))?;
        let mut plan = Plan::new();
        self.record_elements(m, &mut plan, &self.x_base, ENERGY_REFERENCE);
        dev.submit(&plan)?;
        let (elastic_magnitude, mut rounding) = self.read_sums(dev, m.ne)?;
        let contact = match &problem.model.contact {
            Some(ipc) => {
                let xs = problem.contact_positions(ipc, x);
                let end: Vec<f64> = x.iter().zip(d).map(|(a, b)| a + alpha_max * b).collect();
                let xe = problem.contact_positions(ipc, &end);
                let dxs: Vec<[f64; 3]> = xs
                    .iter()
                    .zip(xe.iter())
                    .map(|(a, b)| [b[0] - a[0], b[1] - a[1], b[2] - a[2]])
                    .collect();
                let pairs = ipc.swept_candidates(&xs, &dxs)?;
                let mut c = DeviceContact::new(dev, problem, &pairs)?;
                let at_base = c.evaluate_bounded(dev, x)?;
                rounding += at_base.rounding;
                Some((c, at_base))
            }
            None => None,
        };
        self.base = Some(Base {
            x: x.to_vec(),
            elastic_magnitude,
            rounding,
            obstacle: problem.obstacle_barrier_energy(x),
            contact,
        });
        Ok(())
    }

    /// E(x_t) − E(x) at the trial `x_t` (flat, m) of the search begun by [`Self::begin`], with
    /// its round-off bound.
    pub fn difference(
        &mut self,
        b: &mut DeviceBackend,
        problem: &StepProblem,
        x_t: &[f64],
    ) -> Result<DeviceDifference> {
        let (parts, _) = b.parts();
        let (dev, m) = (parts.dev, &*parts.m);
        let Some(base) = self.base.as_mut() else {
            return Err(JelloError::Solver(
                "multilevel device energy: no line search begun".into(),
            ));
        };
        if x_t.len() != base.x.len() {
            return Err(JelloError::Solver(format!(
                "multilevel device energy: {} coordinates for {} vertices",
                x_t.len(),
                m.nv
            )));
        }
        let obstacle = problem.obstacle_barrier_energy(x_t);
        if !obstacle.is_finite() {
            // The host's f64 verdict: x_t is on or inside an obstacle.
            return Ok(DeviceDifference {
                value: f64::INFINITY,
                ..DeviceDifference::default()
            });
        }
        let mut contact = 0.0;
        let mut contact_magnitude = 0.0;
        let mut rounding = base.rounding;
        if let Some((c, at_base)) = base.contact.as_mut() {
            let at = c.evaluate_bounded(dev, x_t)?;
            contact = (at.barrier - at_base.barrier) + (at.friction - at_base.friction);
            contact_magnitude = at.barrier.abs()
                + at_base.barrier.abs()
                + at.friction.abs()
                + at_base.friction.abs();
            rounding += at.rounding;
        }
        dev.write(&self.x, 0, &m.relative(x_t))?;
        let mut plan = Plan::new();
        self.record_elements(m, &mut plan, &self.x, 0);
        dev.submit(&plan)?;
        let (elastic, elastic_rounding) = self.read_sums(dev, m.ne)?;
        rounding += elastic_rounding;
        let base = self.base.as_ref().expect("checked above");
        let value = elastic
            + contact
            + (obstacle - base.obstacle)
            + problem.inertia_difference(&base.x, x_t);
        let mut slack = ROUNDING_FACTOR * rounding
            + ELASTIC_REL * (2.0 * base.elastic_magnitude + elastic.abs())
            + CONTACT_REL * contact_magnitude;
        if !(value.is_finite() && slack.is_finite()) {
            // An f32 pair at distance 0 (the f64 distance may be tiny but positive), or a
            // non-finite element: no verdict from the device.
            slack = f64::INFINITY;
        }
        Ok(DeviceDifference {
            value,
            slack,
            elastic,
            contact,
        })
    }

    /// Releases the buffers.
    pub fn free(mut self, b: &mut DeviceBackend) {
        let dev = b.device_mut();
        if let Some(Base {
            contact: Some((c, _)),
            ..
        }) = self.base.take()
        {
            c.free(dev);
        }
        dev.free(self.x_base);
        dev.free(self.x);
        dev.free(self.energy);
        dev.free(self.eref);
        dev.free(self.egrad);
        dev.free(self.unused_hess);
        dev.free(self.partials);
    }
}

/// What [`device_backtracking`] returns.
#[derive(Clone, Debug)]
pub struct DeviceLineSearch {
    /// The step length, the energy at the accepted point relative to the step's initial guess
    /// (J) and whether one was accepted, as [`crate::solver::backtracking`] returns them.
    pub result: LineSearchResult,
    /// Whether `result.energy` is the f64 potential's value (false: the device's, within the
    /// sum of the bounds of the device decisions since the last f64 value).
    pub exact: bool,
    /// Trials decided on the device's value.
    pub device_trials: usize,
    /// Trials decided in f64 on the host (the device's value within its bound of the threshold).
    pub host_trials: usize,
}

/// [`crate::solver::backtracking`] with each trial's energy change from `energy` on `b`'s device:
/// the same filter, start and halving, and the same Armijo test `ΔE ≤ 10⁻⁴·α·gᵀd` (+ the f64
/// round-off allowance), decided on the device's ΔE where it is farther from the threshold
/// than its round-off bound, else by the f64 potential on the host. `e0` is the change at `x`
/// (J; `e0_exact`: from the f64 potential; otherwise it is recomputed in f64 at the first host
/// decision).
#[allow(clippy::too_many_arguments)]
pub fn device_backtracking(
    energy: &mut DeviceEnergy,
    b: &mut DeviceBackend,
    problem: &StepProblem,
    elastic: &dyn ElasticTerms,
    x: &[f64],
    dx: &[f64],
    e0: f64,
    e0_exact: bool,
    g_dot_dx: f64,
    x_new: &mut Vec<f64>,
) -> Result<DeviceLineSearch> {
    let mut out = DeviceLineSearch {
        result: LineSearchResult {
            alpha: 0.0,
            energy: e0,
            accepted: false,
            trials: 0,
        },
        exact: e0_exact,
        device_trials: 0,
        host_trials: 0,
    };
    let mut alpha = problem.step_limit(x, dx);
    if alpha <= 0.0 {
        return Ok(out);
    }
    energy.begin(b, problem, x, dx, alpha)?;
    x_new.resize(x.len(), 0.0);
    let slack64 = problem.energy_slack(elastic, e0, x);
    let mut e0_host = e0_exact.then_some(e0);
    for _ in 0..40 {
        if alpha <= 0.0 {
            break;
        }
        for k in 0..x.len() {
            x_new[k] = x[k] + alpha * dx[k];
        }
        let threshold = 1e-4 * alpha * g_dot_dx;
        let d = energy.difference(b, problem, x_new)?;
        // NaN comparisons are false: an undecided trial goes to the host.
        if d.value - d.slack > threshold + slack64 {
            out.device_trials += 1;
        } else if d.value + d.slack <= threshold {
            out.device_trials += 1;
            out.result = LineSearchResult {
                alpha,
                energy: e0 + d.value,
                accepted: true,
                trials: out.device_trials + out.host_trials,
            };
            out.exact = false;
            return Ok(out);
        } else {
            // Within the device's bound of the threshold (or NaN): the f64 test of
            // `backtracking`, against the f64 change at x.
            out.host_trials += 1;
            let base = *e0_host.get_or_insert_with(|| problem.energy_change(elastic, x));
            let e = problem.energy_change(elastic, x_new);
            if e.is_finite() && e <= base + threshold + slack64 {
                out.result = LineSearchResult {
                    alpha,
                    energy: e,
                    accepted: true,
                    trials: out.device_trials + out.host_trials,
                };
                out.exact = true;
                return Ok(out);
            }
        }
        alpha *= 0.5;
    }
    out.result.trials = out.device_trials + out.host_trials;
    Ok(out)
}
