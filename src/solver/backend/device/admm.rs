//! [`AdmmBackend`] in f32 on a device: fields are `mat3x3<f32>` buffers, the local step is one
//! `admm_local` dispatch (one element per invocation: F, the z-step, the dual update and the
//! corner forces), the scatter an `admm_gather` over the vertex→element CSR (no atomics), the
//! residuals per-group partials in the readback buffer summed in f64 on the host.

use super::{DeviceBackend, DeviceScalar, DeviceVector};
use crate::error::{JelloError, Result};
use crate::gpu::twins::admm::{ADMM_PROX_HYPERELASTIC, ADMM_PROX_PD, ADMM_RESET};
use crate::gpu::{Buf, GpuMat3, GpuVec4, Kernel, Params};
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::admm::ProxKind;
use crate::solver::backend::admm::{AdmmBackend, GlobalStep, LocalScalars};
use nalgebra::Matrix3;
use std::time::Instant;

/// ADMM's per-element constants and scratch on the device.
pub(super) struct DeviceAdmm {
    /// w_e² (J).
    w2: Buf<f32>,
    /// Corner forces of the last local step: 8 per element (4 right-hand side, 4 dual).
    corner: Buf<GpuVec4>,
    /// `admm_local` mode of the z-step.
    mode: u32,
}

impl DeviceBackend {
    fn admm_state(&self) -> Result<&DeviceAdmm> {
        self.admm
            .as_deref()
            .ok_or_else(|| JelloError::Solver("device backend: admm_setup was not called".into()))
    }

    fn rec_admm_local(&mut self, z: Buf<GpuMat3>, u: Buf<GpuMat3>, mode: u32) -> Result<()> {
        let a = self.admm_state()?;
        let (w2, corner) = (a.w2.id(), a.corner.id());
        self.plan.dispatch(
            Kernel::AdmmLocal,
            &[
                self.x[self.cur].id(),
                self.m.tets.id(),
                self.m.dm_inv.id(),
                self.m.elem.id(),
                w2,
                z.id(),
                u.id(),
                corner,
            ],
            Params::new().u0(mode),
            self.m.ne as u32,
        );
        Ok(())
    }
}

impl AdmmBackend for DeviceBackend {
    type Field = Buf<GpuMat3>;

    fn field(&mut self, label: &str) -> Result<Buf<GpuMat3>> {
        self.dev.alloc(label, self.m.ne)
    }

    fn admm_setup(&mut self, model: &Model, w2: &[f64], prox: ProxKind) -> Result<()> {
        if w2.len() != self.m.ne || model.mesh.num_tets() != self.m.ne {
            return Err(JelloError::Solver(format!(
                "admm_setup: {} weights for {} elements",
                w2.len(),
                self.m.ne
            )));
        }
        let w: Vec<f32> = w2.iter().map(|&v| v as f32).collect();
        let a = DeviceAdmm {
            w2: self.dev.upload("admm w^2", &w)?,
            corner: self.dev.alloc("admm corner forces", 8 * self.m.ne)?,
            mode: match prox {
                ProxKind::Pd => ADMM_PROX_PD,
                ProxKind::Hyperelastic => ADMM_PROX_HYPERELASTIC,
            },
        };
        self.admm = Some(Box::new(a));
        Ok(())
    }

    fn admm_reset(&mut self, z: Buf<GpuMat3>, u: Buf<GpuMat3>) -> Result<()> {
        self.rec_admm_local(z, u, ADMM_RESET)
    }

    fn admm_local(
        &mut self,
        _problem: &StepProblem,
        z: Buf<GpuMat3>,
        u: Buf<GpuMat3>,
        rhs: DeviceVector,
    ) -> Result<LocalScalars<DeviceScalar>> {
        let mode = self.admm_state()?.mode;
        self.rec_admm_local(z, u, mode)?;
        let corner = self.admm_state()?.corner.id();
        self.plan.dispatch(
            Kernel::AdmmGather,
            &[
                corner,
                self.m.offsets.id(),
                self.m.csr_tets.id(),
                self.m.csr_local.id(),
                self.m.vinfo.id(),
                rhs.id(),
                self.readback.id(),
            ],
            Params {
                u1: (self.regions.admm + self.regions.ge) as u32,
                ..Params::default()
            },
            self.m.nv as u32,
        );
        Ok(LocalScalars {
            dual: DeviceScalar::Dual,
        })
    }

    fn admm_global(
        &mut self,
        rhs: DeviceVector,
        x: &mut [f64],
        step: &mut GlobalStep<'_>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.flush()?;
        self.dev.wait_idle()?;
        self.solves.wait_ms += t0.elapsed().as_secs_f64() * 1e3;
        let rv = self.dev.read(&rhs)?;
        let mut buf: Vec<f64> = rv
            .iter()
            .flat_map(|p| [p[0] as f64, p[1] as f64, p[2] as f64])
            .collect();
        let t1 = Instant::now();
        step(&mut buf, x)?;
        let host = t1.elapsed().as_secs_f64() * 1e3;
        let xs = self.m.relative(x);
        self.dev.write(&self.x[self.cur], 0, &xs)?;
        self.solves.calls += 1;
        self.solves.bytes += 2 * 16 * self.m.nv;
        self.solves.host_ms += host;
        self.solves.transfer_ms += t0.elapsed().as_secs_f64() * 1e3 - host;
        Ok(())
    }

    fn admm_primal(&mut self, z: Buf<GpuMat3>) -> Result<DeviceScalar> {
        let w2 = self.admm_state()?.w2.id();
        self.plan.dispatch(
            Kernel::AdmmPrimal,
            &[
                self.x[self.cur].id(),
                self.m.tets.id(),
                self.m.dm_inv.id(),
                w2,
                z.id(),
                self.readback.id(),
            ],
            Params {
                u1: self.regions.admm as u32,
                ..Params::default()
            },
            self.m.ne as u32,
        );
        Ok(DeviceScalar::Primal)
    }

    fn admm_gradient(
        &mut self,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        g: DeviceVector,
    ) -> Result<(DeviceScalar, DeviceScalar)> {
        let c = self.cur;
        // One element pass for the energy change (against the step start's references) and
        // the element gradients.
        self.rec_energies(c, c, false, true);
        let res = self.rec_gradient_tail(c, g);
        Ok((res, DeviceScalar::Energy))
    }

    fn read_field(&mut self, f: Buf<GpuMat3>) -> Result<Vec<Matrix3<f64>>> {
        self.flush()?;
        let v = self.dev.read(&f)?;
        Ok(v.iter()
            .map(|m| Matrix3::from_fn(|r, c| m.get(r, c) as f64))
            .collect())
    }
}
