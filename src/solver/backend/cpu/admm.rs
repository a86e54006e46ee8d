//! [`AdmmBackend`] in f64 on the CPU: fields are `Vec<Matrix3<f64>>`, the proxes are
//! [`crate::solver::admm::prox`]'s (and a caller's [`CustomProx`]), the scatter adds element
//! by element in element order.

use super::{CpuBackend, CpuScalar, CpuVector};
use crate::error::{JelloError, Result};
use crate::material::{pk1, Material};
use crate::problem::{ElasticTerms, Model, StepProblem, StrainLimit};
use crate::solver::admm::prox::{prox_hyperelastic_within, prox_pd_within};
use crate::solver::admm::{CustomProx, ProxKind};
use crate::solver::backend::admm::{AdmmBackend, GlobalStep, LocalScalars};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;

/// Handle to a [`CpuBackend`] per-element field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuField(usize);

/// Per-element constants.
struct Element {
    grads: [Vector3<f64>; 4],
    volume: f64,
    /// w_e² (J).
    w2: f64,
    material: Material,
    /// Hard strain limits, held exactly by the z-step.
    limit: Option<StrainLimit>,
}

/// ADMM's constants and output slots on the CPU backend.
pub(super) struct CpuAdmm {
    elements: Vec<Element>,
    tets: Vec<[u32; 4]>,
    prox: ProxKind,
    custom: Option<CustomProx>,
    /// Slots: dual, primal, residual, energy change.
    out: [CpuScalar; 4],
    /// Per strain-limited element, the limit's force after the last z-step (F form, J):
    /// ν_e = w²ū_e − V_e P(z_e), the normal-cone part of the prox's optimality
    /// w²ū ∈ ∇U(z) + N_S(z). Empty without limits.
    limit_forces: Vec<(usize, Matrix3<f64>)>,
}

impl std::fmt::Debug for CpuAdmm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuAdmm")
            .field("elements", &self.elements.len())
            .field("prox", &self.prox)
            .field("custom", &self.custom.is_some())
            .finish()
    }
}

impl CpuAdmm {
    /// F of every element at positions `x` (3n, m).
    fn deformation(&self, x: &[f64]) -> Vec<Matrix3<f64>> {
        (0..self.tets.len())
            .into_par_iter()
            .map(|e| {
                let el = &self.elements[e];
                let mut out = Matrix3::zeros();
                for (a, &v) in self.tets[e].iter().enumerate() {
                    let v = v as usize;
                    let p = Vector3::new(x[3 * v], x[3 * v + 1], x[3 * v + 2]);
                    out += p * el.grads[a].transpose();
                }
                out
            })
            .collect()
    }

    /// out ← Σ_e w_e² D_eᵀ G_e (per vertex a: w_e² G_e ∇N_a), element by element.
    fn scatter(&self, g: impl Fn(usize) -> Matrix3<f64>, out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = 0.0);
        for (e, tet) in self.tets.iter().enumerate() {
            let el = &self.elements[e];
            let ge = g(e) * el.w2;
            for (a, &v) in tet.iter().enumerate() {
                let f = ge * el.grads[a];
                for c in 0..3 {
                    out[3 * v as usize + c] += f[c];
                }
            }
        }
    }
}

impl CpuAdmm {
    /// g ← g + Σ_e D_eᵀν_e over the strain-limited elements, pinned DOFs left at zero: the
    /// KKT residual of the limited problem (∇E alone does not vanish where a limit holds an
    /// element: at a solution ∇E = −Σ Dᵀν). A no-op without limits.
    fn add_limit_forces(&self, g: &mut [f64], fixed: &[bool]) {
        for (e, nu) in &self.limit_forces {
            let el = &self.elements[*e];
            for (a, &v) in self.tets[*e].iter().enumerate() {
                let f = nu * el.grads[a];
                for c in 0..3 {
                    let k = 3 * v as usize + c;
                    if !fixed[k] {
                        g[k] += f[c];
                    }
                }
            }
        }
    }
}

impl CpuBackend {
    /// Replaces ADMM's z-step by `prox` (f64 CPU only: the device has no custom proxes).
    pub fn set_custom_prox(&mut self, prox: Option<CustomProx>) {
        if let Some(a) = self.admm.as_mut() {
            a.custom = prox;
        }
    }

    /// A field's values.
    pub fn field_values(&self, f: CpuField) -> &[Matrix3<f64>] {
        &self.fields[f.0]
    }

    fn admm_state(&self) -> Result<&CpuAdmm> {
        self.admm
            .as_deref()
            .ok_or_else(|| JelloError::Solver("cpu backend: admm_setup was not called".into()))
    }
}

impl AdmmBackend for CpuBackend {
    type Field = CpuField;

    fn field(&mut self, _label: &str) -> Result<CpuField> {
        self.fields.push(Vec::new());
        Ok(CpuField(self.fields.len() - 1))
    }

    fn admm_setup(&mut self, model: &Model, w2: &[f64], prox: ProxKind) -> Result<()> {
        let ne = model.mesh.tets.len();
        if w2.len() != ne {
            return Err(JelloError::Solver(format!(
                "admm_setup: {} weights for {ne} elements",
                w2.len()
            )));
        }
        let elements = (0..ne)
            .map(|e| Element {
                grads: model.rest[e].shape_gradients(),
                volume: model.rest[e].volume,
                w2: w2[e],
                material: model.materials[e],
                limit: model.strain_limit(e),
            })
            .collect();
        let out = std::array::from_fn(|_| {
            self.scalars.push(0.0);
            CpuScalar(self.scalars.len() - 1)
        });
        for f in &mut self.fields {
            *f = vec![Matrix3::zeros(); ne];
        }
        let custom = self.admm.take().and_then(|a| a.custom);
        self.admm = Some(Box::new(CpuAdmm {
            elements,
            tets: model.mesh.tets.clone(),
            prox,
            custom,
            out,
            limit_forces: Vec::new(),
        }));
        Ok(())
    }

    fn admm_reset(&mut self, z: CpuField, u: CpuField) -> Result<()> {
        if let Some(a) = self.admm.as_mut() {
            a.limit_forces.clear();
        }
        let fx = self.admm_state()?.deformation(&self.x[self.cur]);
        let ne = fx.len();
        self.fields[u.0] = vec![Matrix3::zeros(); ne];
        self.fields[z.0] = fx;
        Ok(())
    }

    fn admm_local(
        &mut self,
        problem: &StepProblem,
        z: CpuField,
        u: CpuField,
        rhs: CpuVector,
    ) -> Result<LocalScalars<CpuScalar>> {
        let a = self
            .admm
            .take()
            .ok_or_else(|| JelloError::Solver("cpu backend: admm_setup was not called".into()))?;
        let fx = a.deformation(&self.x[self.cur]);
        let z_prev = std::mem::take(&mut self.fields[z.0]);
        let (zn, un): (Vec<_>, Vec<_>) = self.fields[u.0]
            .par_iter()
            .enumerate()
            .map(|(e, u)| {
                let el = &a.elements[e];
                let v = fx[e] + u;
                let z = match a.prox {
                    _ if a.custom.is_some() => a.custom.as_ref().expect("some")(e, &v, el.w2),
                    ProxKind::Pd => prox_pd_within(&el.material, el.volume, &v, el.w2, el.limit)
                        .expect("PD form checked in AdmmSolver::new"),
                    ProxKind::Hyperelastic => {
                        prox_hyperelastic_within(&el.material, el.volume, &v, el.w2, el.limit)
                    }
                };
                (z, v - z)
            })
            .unzip();
        // Dual residual s = DᵀW²(zⁿ⁺¹ − zⁿ) on the free vertices.
        let mut sv = vec![0.0; self.n];
        a.scatter(|e| zn[e] - z_prev[e], &mut sv);
        for (s, &f) in sv.iter_mut().zip(&problem.fixed) {
            if f {
                *s = 0.0;
            }
        }
        self.scalars[a.out[0].0] = sv.iter().map(|s| s * s).sum::<f64>().sqrt();
        a.scatter(|e| zn[e] - un[e], &mut self.vectors[rhs.0]);
        let mut a = a;
        a.limit_forces.clear();
        for (e, el) in a.elements.iter().enumerate() {
            if el.limit.is_some() {
                let p = pk1(&el.material, &zn[e]) * el.volume;
                a.limit_forces.push((e, un[e] * el.w2 - p));
            }
        }
        self.fields[z.0] = zn;
        self.fields[u.0] = un;
        let dual = a.out[0];
        self.admm = Some(a);
        Ok(LocalScalars { dual })
    }

    fn admm_global(
        &mut self,
        rhs: CpuVector,
        x: &mut [f64],
        step: &mut GlobalStep<'_>,
    ) -> Result<()> {
        let mut buf = self.vectors[rhs.0].clone();
        step(&mut buf, x)?;
        self.x[self.cur].copy_from_slice(x);
        Ok(())
    }

    fn admm_primal(&mut self, z: CpuField) -> Result<CpuScalar> {
        let a = self.admm_state()?;
        let fx = a.deformation(&self.x[self.cur]);
        let r = fx
            .iter()
            .zip(&self.fields[z.0])
            .zip(&a.elements)
            .map(|((f, z), el)| el.w2 * (f - z).norm_squared())
            .sum::<f64>()
            .sqrt();
        let slot = a.out[1];
        self.scalars[slot.0] = r;
        Ok(slot)
    }

    fn admm_gradient(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        g: CpuVector,
    ) -> Result<(CpuScalar, CpuScalar)> {
        let [_, _, res, ch] = self.admm_state()?.out;
        let c = self.cur;
        let (e, change) = problem.gradient_and_change(elastic, &self.x[c], &mut self.vectors[g.0]);
        if let Some(a) = self.admm.as_deref() {
            a.add_limit_forces(&mut self.vectors[g.0], &problem.fixed);
        }
        self.energy_at[c] = e;
        self.scalars[res.0] = problem.model.char_norm.residual(&self.vectors[g.0]);
        self.scalars[ch.0] = change;
        Ok((res, ch))
    }

    fn read_field(&mut self, f: CpuField) -> Result<Vec<Matrix3<f64>>> {
        Ok(self.fields[f.0].clone())
    }
}
