//! What a solver's own extension of [`DeviceBackend`] may use (crate-visible, the rest stays
//! private): the device, the mesh's buffers, the plan to record into, the current positions,
//! the readback buffer's solver regions, the host-solve counters, one gradient pass, and a slot
//! for the extension's state, which the backend stores without knowing its type. ADMM's trait
//! and its device implementation (`src/solver/admm/device.rs`) are written on these; JGS2/VBD's
//! (`src/solver/jgs2/device.rs`), which records its own plans, borrows the device, the model,
//! the point pair and the element cache together with its state ([`DeviceBackend::parts`]), so
//! the backend names no solver.

use super::{DeviceBackend, DeviceScalar, DeviceVector, HostSolveStats};
use crate::error::Result;
use crate::gpu::{Buf, BufferId, Device, DeviceModel, GpuContact, GpuVec4, Kernel, Params, Plan};
use std::any::Any;

/// The extension slot's type: a solver's state on a backend.
pub(crate) type Extension = Option<Box<dyn Any + Send + Sync>>;

/// Ids of the mesh's static buffers and the current positions, for a solver's dispatches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MeshBuffers {
    /// Current positions (vec4, relative to [`DeviceBackend::origin`]).
    pub x: BufferId,
    /// Element vertex indices.
    pub tets: BufferId,
    /// Per-element Dm⁻¹.
    pub dm_inv: BufferId,
    /// Per-element material records.
    pub elem: BufferId,
    /// Vertex → element CSR: offsets, element indices, local corner indices.
    pub offsets: BufferId,
    pub csr_tets: BufferId,
    pub csr_local: BufferId,
    /// Per-vertex mass and free flag.
    pub vinfo: BufferId,
    /// The readback buffer (partials the host sums).
    pub readback: BufferId,
}

/// The backend's device-resident parts a solver with its own plans works on, borrowed together
/// with the extension slot ([`DeviceBackend::parts`]).
pub(crate) struct DeviceParts<'a> {
    /// The device.
    pub dev: &'a mut Device,
    /// The body's mesh data, step start and step constants ([`DeviceModel::begin_step`]).
    pub m: &'a mut DeviceModel,
    /// The point pair (vec4, relative to [`DeviceBackend::origin`]): current and trial by
    /// `cur`; `x[0]` is the buffer hosts draw from after a step.
    pub x: [Buf<GpuVec4>; 2],
    /// The points' per-vertex, per-obstacle contact records.
    pub contacts: [Buf<GpuContact>; 2],
    /// Which of `x` holds the current point.
    pub cur: &'a mut usize,
    /// Element energies and element gradients (4 per element) of the `elastic` kernel.
    pub energy: Buf<f32>,
    pub egrad: Buf<GpuVec4>,
}

impl DeviceBackend {
    /// The device-resident parts and the extension slot, borrowed at once (a solver's state
    /// and the buffers its plans bind). The backend's own plan must be empty: such a solver
    /// submits its own.
    pub(crate) fn parts(&mut self) -> (DeviceParts<'_>, &mut Extension) {
        debug_assert!(self.plan.is_empty());
        (
            DeviceParts {
                dev: &mut self.dev,
                m: &mut self.m,
                x: self.x,
                contacts: self.contacts,
                cur: &mut self.cur,
                energy: self.energy,
                egrad: self.egrad,
            },
            &mut self.ext,
        )
    }

    /// The backend's plan, its device and the extension slot, borrowed at once: a solver's own
    /// kernels recorded in order with the backend's vector work ([`crate::solver::backend::Backend::combine`]
    /// and the rest), on buffers its state keeps (the multilevel levels and Hessians). A
    /// solver that frees buffers a recorded dispatch names submits first ([`Self::submit`]).
    pub(crate) fn recorder(&mut self) -> (&mut Plan, &mut Device, &mut Extension) {
        (&mut self.plan, &mut self.dev, &mut self.ext)
    }

    /// The extension slot (see the module docs).
    pub(crate) fn extension(&self) -> &Extension {
        &self.ext
    }

    /// The extension slot, mutable.
    pub(crate) fn extension_mut(&mut self) -> &mut Extension {
        &mut self.ext
    }

    /// The device, for a solver's own allocations, uploads and reads.
    pub(crate) fn device_mut(&mut self) -> &mut Device {
        &mut self.dev
    }

    /// Number of elements.
    pub(crate) fn num_elements(&self) -> usize {
        self.m.ne
    }

    /// Number of vertices.
    pub(crate) fn num_vertices(&self) -> usize {
        self.m.nv
    }

    /// The buffers a solver's element and vertex kernels read.
    pub(crate) fn mesh_buffers(&self) -> MeshBuffers {
        MeshBuffers {
            x: self.x[self.cur].id(),
            tets: self.m.tets.id(),
            dm_inv: self.m.dm_inv.id(),
            elem: self.m.elem.id(),
            offsets: self.m.offsets.id(),
            csr_tets: self.m.csr_tets.id(),
            csr_local: self.m.csr_local.id(),
            vinfo: self.m.vinfo.id(),
            readback: self.readback.id(),
        }
    }

    /// Offsets in the readback buffer of the two solver-owned partial regions: the per-element
    /// group partials ([`DeviceScalar::Primal`] sums them) and the per-vertex group partials
    /// right after them ([`DeviceScalar::Dual`]).
    pub(crate) fn solver_regions(&self) -> (usize, usize) {
        (self.regions.admm, self.regions.admm + self.regions.ge)
    }

    /// Records one dispatch into the backend's plan (submitted at the next read).
    pub(crate) fn record(&mut self, kernel: Kernel, bufs: &[BufferId], params: Params, n: u32) {
        self.plan.dispatch(kernel, bufs, params, n);
    }

    /// Submits the recorded plan and waits until the device has run it.
    pub(crate) fn submit_and_wait(&mut self) -> Result<()> {
        self.flush()?;
        self.dev.wait_idle()
    }

    /// Submits the recorded plan (no wait: a read waits).
    pub(crate) fn submit(&mut self) -> Result<()> {
        self.flush()
    }

    /// Writes host positions (3n f64, m) as the current point.
    pub(crate) fn write_positions(&mut self, x: &[f64]) -> Result<()> {
        let xs = self.m.relative(x);
        self.dev.write(&self.x[self.cur], 0, &xs)
    }

    /// The host-solve counters, for a solver's own host steps.
    pub(crate) fn host_solve_stats_mut(&mut self) -> &mut HostSolveStats {
        &mut self.solves
    }

    /// Records one element pass at the current point (energies against the step start's
    /// references, and the element gradients) and the gradient tail into `g`; returns the
    /// residual's handle (the energy change is [`DeviceScalar::Energy`]).
    pub(crate) fn record_gradient_and_change(&mut self, g: DeviceVector) -> DeviceScalar {
        let c = self.cur;
        self.rec_energies(c, c, false, true);
        self.rec_gradient_tail(c, g)
    }
}
