//! [`AdmmBackend`] in f32 on a device: fields are `mat3x3<f32>` buffers, the local step is one
//! `admm_local` dispatch (one element per invocation: F, the z-step, the dual update and the
//! corner forces), the scatter an `admm_gather` over the vertex→element CSR (no atomics), the
//! residuals per-group partials in the readback buffer's solver regions, summed in f64 on the
//! host. The state lives in the backend's extension slot.

use super::backend::{AdmmBackend, GlobalStep, LocalScalars};
use super::ProxKind;
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::gpu::abi::{ADMM_PROX_HYPERELASTIC, ADMM_PROX_PD, ADMM_RESET};
use crate::gpu::{Buf, GpuMat3, GpuVec4, Kernel, Params};
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::backend::{DeviceBackend, DeviceScalar, DeviceVector};
use nalgebra::Matrix3;

/// ADMM's per-element constants and scratch on the device.
struct DeviceAdmm {
    /// w_e² (J).
    w2: Buf<f32>,
    /// Corner forces of the last local step: 8 per element (4 right-hand side, 4 dual).
    corner: Buf<GpuVec4>,
    /// `admm_local` mode of the z-step.
    mode: u32,
}

fn admm_state(b: &DeviceBackend) -> Result<&DeviceAdmm> {
    b.extension()
        .as_deref()
        .and_then(|e| e.downcast_ref())
        .ok_or_else(|| JelloError::Solver("device backend: admm_setup was not called".into()))
}

fn rec_admm_local(
    b: &mut DeviceBackend,
    z: Buf<GpuMat3>,
    u: Buf<GpuMat3>,
    mode: u32,
) -> Result<()> {
    let a = admm_state(b)?;
    let (w2, corner) = (a.w2.id(), a.corner.id());
    let m = b.mesh_buffers();
    b.record(
        Kernel::AdmmLocal,
        &[m.x, m.tets, m.dm_inv, m.elem, w2, z.id(), u.id(), corner],
        Params::new().u0(mode),
        b.num_elements() as u32,
    );
    Ok(())
}

impl AdmmBackend for DeviceBackend {
    type Field = Buf<GpuMat3>;

    fn field(&mut self, label: &str) -> Result<Buf<GpuMat3>> {
        let ne = self.num_elements();
        self.device_mut().alloc(label, ne)
    }

    fn admm_setup(&mut self, model: &Model, w2: &[f64], prox: ProxKind) -> Result<()> {
        let ne = self.num_elements();
        if w2.len() != ne || model.mesh.num_tets() != ne {
            return Err(JelloError::Solver(format!(
                "admm_setup: {} weights for {ne} elements",
                w2.len()
            )));
        }
        let w: Vec<f32> = w2.iter().map(|&v| v as f32).collect();
        let a = DeviceAdmm {
            w2: self.device_mut().upload("admm w^2", &w)?,
            corner: self.device_mut().alloc("admm corner forces", 8 * ne)?,
            mode: match prox {
                ProxKind::Pd => ADMM_PROX_PD,
                ProxKind::Hyperelastic => ADMM_PROX_HYPERELASTIC,
            },
        };
        *self.extension_mut() = Some(Box::new(a));
        Ok(())
    }

    fn admm_reset(&mut self, z: Buf<GpuMat3>, u: Buf<GpuMat3>) -> Result<()> {
        rec_admm_local(self, z, u, ADMM_RESET)
    }

    fn admm_local(
        &mut self,
        _problem: &StepProblem,
        z: Buf<GpuMat3>,
        u: Buf<GpuMat3>,
        rhs: DeviceVector,
    ) -> Result<LocalScalars<DeviceScalar>> {
        let mode = admm_state(self)?.mode;
        rec_admm_local(self, z, u, mode)?;
        let corner = admm_state(self)?.corner.id();
        let m = self.mesh_buffers();
        let (_, dual) = self.solver_regions();
        self.record(
            Kernel::AdmmGather,
            &[
                corner,
                m.offsets,
                m.csr_tets,
                m.csr_local,
                m.vinfo,
                rhs.id(),
                m.readback,
            ],
            Params {
                u1: dual as u32,
                ..Params::default()
            },
            self.num_vertices() as u32,
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
        self.submit_and_wait()?;
        self.host_solve_stats_mut().wait_ms += t0.elapsed().as_secs_f64() * 1e3;
        let rv = self.device_mut().read(&rhs)?;
        let mut buf: Vec<f64> = rv
            .iter()
            .flat_map(|p| [p[0] as f64, p[1] as f64, p[2] as f64])
            .collect();
        let t1 = Instant::now();
        step(&mut buf, x)?;
        let host = t1.elapsed().as_secs_f64() * 1e3;
        self.write_positions(x)?;
        let nv = self.num_vertices();
        let solves = self.host_solve_stats_mut();
        solves.calls += 1;
        solves.bytes += 2 * 16 * nv;
        solves.host_ms += host;
        solves.transfer_ms += t0.elapsed().as_secs_f64() * 1e3 - host;
        Ok(())
    }

    fn admm_primal(&mut self, z: Buf<GpuMat3>) -> Result<DeviceScalar> {
        let w2 = admm_state(self)?.w2.id();
        let m = self.mesh_buffers();
        let (primal, _) = self.solver_regions();
        self.record(
            Kernel::AdmmPrimal,
            &[m.x, m.tets, m.dm_inv, w2, z.id(), m.readback],
            Params {
                u1: primal as u32,
                ..Params::default()
            },
            self.num_elements() as u32,
        );
        Ok(DeviceScalar::Primal)
    }

    fn admm_gradient(
        &mut self,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        g: DeviceVector,
    ) -> Result<(DeviceScalar, DeviceScalar)> {
        // One element pass for the energy change (against the step start's references) and
        // the element gradients.
        let res = self.record_gradient_and_change(g);
        Ok((res, DeviceScalar::Energy))
    }

    fn read_field(&mut self, f: Buf<GpuMat3>) -> Result<Vec<Matrix3<f64>>> {
        self.submit()?;
        let v = self.device_mut().read(&f)?;
        Ok(v.iter()
            .map(|m| Matrix3::from_fn(|r, c| m.get(r, c) as f64))
            .collect())
    }

    fn write_field(&mut self, f: Buf<GpuMat3>, values: &[Matrix3<f64>]) -> Result<()> {
        let v: Vec<GpuMat3> = values
            .iter()
            .map(|m| {
                GpuMat3::from_rows(std::array::from_fn(|r| {
                    std::array::from_fn(|c| m[(r, c)] as f32)
                }))
            })
            .collect();
        // Writes are ordered after submitted work only: submit what is recorded first.
        self.submit()?;
        self.device_mut().write(&f, 0, &v)
    }

    fn admm_weights(&mut self, w2: &[f64]) -> Result<()> {
        let w: Vec<f32> = w2.iter().map(|&v| v as f32).collect();
        let buf = admm_state(self)?.w2;
        self.submit()?;
        self.device_mut().write(&buf, 0, &w)
    }
}
