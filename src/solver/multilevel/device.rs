//! The multilevel solver on a [`Device`] (a GPU, or the WGSL kernels' CPU twins): its
//! operators as kernels — the full-space `H·x` as three dispatches (element and contact terms
//! per corner, their per-vertex gather, the block-sparse base with the gathered terms added),
//! a level's lift, restriction and Galerkin product `Uᵀ H U q` (lift, H·x, restrict), the
//! levels' block Jacobi — and [`MultilevelBackend`] for [`DeviceBackend`] on them: the
//! Hessians and blocks kept in the backend's extension slot, every operation recorded into the
//! backend's plan in order with its vector work. The direction itself ([`DeviceDirection`]:
//! affine and SMS levels, then the smoother; `--backend gpu`) is
//! [`super::backend::LevelsDirection`] on that backend, its PCGs
//! [`crate::solver::pcg::BackendPcg`]: subspace vectors are the backend's flat vectors, three
//! full vec4s per handle updated and dotted on all four lanes.

use super::backend::{DirectionRun, DirectionSolve, Hessian, LevelsDirection, MultilevelBackend};
use super::levels::{Level, LevelArrays};
use super::operator::{BsrArrays, BsrLayout, DeviceTerms, HessianOperator};
use crate::gpu::abi::ML_HANDLE_VEC4;
pub(super) use crate::gpu::model::upload_nonempty;
use crate::gpu::{
    Buf, Device, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo, Kernel, Params, Plan, VertexCsr,
};
use crate::problem::Model;
use crate::solver::backend::{DeviceBackend, DeviceVector};
use crate::Result;

/// The per-vertex pin flags as the kernels read them (`free` only; mass unused here).
pub fn vertex_info(pinned: &[bool]) -> Vec<GpuVertexInfo> {
    pinned
        .iter()
        .map(|&p| GpuVertexInfo {
            mass: 0.0,
            free: u32::from(!p),
        })
        .collect()
}

/// A block-sparse matrix uploaded for `ml_bsr_hv` ([`BsrArrays`]).
pub struct DeviceBsr {
    n: usize,
    row_ptr: Buf<u32>,
    cols: Buf<u32>,
    blocks: Buf<GpuMat3>,
}

impl DeviceBsr {
    /// Uploads `a`.
    pub fn new(dev: &mut Device, a: &BsrArrays) -> Result<Self> {
        Ok(DeviceBsr {
            n: a.row_ptr.len().saturating_sub(1),
            row_ptr: dev.upload("bsr rows", &a.row_ptr)?,
            cols: upload_nonempty(dev, "bsr cols", &a.cols)?,
            blocks: upload_nonempty(dev, "bsr blocks", &a.blocks)?,
        })
    }

    /// Releases the buffers.
    pub fn free(self, dev: &mut Device) {
        dev.free(self.row_ptr);
        dev.free(self.cols);
        dev.free(self.blocks);
    }

    /// Records `y = A x (+ add)`.
    pub fn record(
        &self,
        plan: &mut Plan,
        x: &Buf<GpuVec4>,
        add: Option<&Buf<GpuVec4>>,
        y: &Buf<GpuVec4>,
    ) {
        plan.dispatch(
            Kernel::MlBsrHv,
            &[
                self.row_ptr.id(),
                self.cols.id(),
                self.blocks.id(),
                x.id(),
                add.unwrap_or(x).id(),
                y.id(),
            ],
            Params {
                u0: u32::from(add.is_some()),
                ..Params::new()
            },
            self.n as u32,
        );
    }
}

/// The full-space H of [`super::HessianOperator`] on a device: its base as block rows, its
/// element terms and contact stencils as [`DeviceTerms`], the terms' vertex→(term, corner) CSR
/// and scratch for the per-corner and gathered products.
pub struct DeviceOperator {
    nv: usize,
    nt: usize,
    base: DeviceBsr,
    tets: Buf<GpuTet>,
    hess: Buf<f32>,
    scale: Buf<f32>,
    vinfo: Buf<GpuVertexInfo>,
    offsets: Buf<u32>,
    csr_tets: Buf<u32>,
    csr_local: Buf<u32>,
    corners: Buf<GpuVec4>,
    gathered: Buf<GpuVec4>,
}

impl DeviceOperator {
    /// Uploads H = `base` + `terms` over the vertices' pin flags `pinned`.
    pub fn new(
        dev: &mut Device,
        base: &BsrArrays,
        terms: &DeviceTerms,
        pinned: &[bool],
    ) -> Result<Self> {
        let nv = pinned.len();
        let csr = VertexCsr::new(&terms.tets, nv)?;
        Ok(DeviceOperator {
            nv,
            nt: terms.len(),
            base: DeviceBsr::new(dev, base)?,
            tets: upload_nonempty(dev, "H terms", &terms.tets)?,
            hess: upload_nonempty(dev, "H term Hessians", &terms.hess)?,
            scale: upload_nonempty(dev, "H term scales", &terms.scale)?,
            vinfo: dev.upload("pins", &vertex_info(pinned))?,
            offsets: dev.upload("H term csr", &csr.offsets)?,
            csr_tets: upload_nonempty(dev, "H term csr terms", &csr.tets)?,
            csr_local: upload_nonempty(dev, "H term csr corners", &csr.local)?,
            corners: dev.alloc("H term corners", (4 * terms.len()).max(1))?,
            gathered: dev.alloc("H terms gathered", nv)?,
        })
    }

    /// Vertex count.
    pub fn num_vertices(&self) -> usize {
        self.nv
    }

    /// Releases the buffers (H changes every Newton iteration; the device keeps what it is
    /// given until freed).
    pub fn free(self, dev: &mut Device) {
        self.base.free(dev);
        dev.free(self.tets);
        dev.free(self.hess);
        dev.free(self.scale);
        dev.free(self.vinfo);
        dev.free(self.offsets);
        dev.free(self.csr_tets);
        dev.free(self.csr_local);
        dev.free(self.corners);
        dev.free(self.gathered);
    }

    /// The pin flags buffer (shared with the level kernels).
    pub fn vinfo(&self) -> &Buf<GpuVertexInfo> {
        &self.vinfo
    }

    /// Records `y = H x` (x, y: one vec4 per vertex, xyz in m and N; `y` ≠ `x`).
    pub fn record_apply(&self, plan: &mut Plan, x: &Buf<GpuVec4>, y: &Buf<GpuVec4>) {
        if self.nt == 0 {
            self.base.record(plan, x, None, y);
            return;
        }
        plan.dispatch(
            Kernel::MlElementHv,
            &[
                x.id(),
                self.tets.id(),
                self.hess.id(),
                self.scale.id(),
                self.vinfo.id(),
                self.corners.id(),
            ],
            Params::new(),
            self.nt as u32,
        )
        .dispatch(
            Kernel::GatherGradient,
            &[
                self.corners.id(),
                self.offsets.id(),
                self.csr_tets.id(),
                self.csr_local.id(),
                self.gathered.id(),
            ],
            Params::new(),
            self.nv as u32,
        );
        self.base.record(plan, x, Some(&self.gathered), y);
    }
}

/// A subspace level on a device: its CSR lists ([`Level::device_arrays`]) and full-space
/// scratch for the Galerkin product.
pub struct DeviceLevel {
    nh: usize,
    nv: usize,
    vptr: Buf<u32>,
    vhandle: Buf<u32>,
    vframe: Buf<GpuVec4>,
    hptr: Buf<u32>,
    hvertex: Buf<u32>,
    hframe: Buf<GpuVec4>,
    u: Buf<GpuVec4>,
    hu: Buf<GpuVec4>,
}

impl DeviceLevel {
    /// Uploads `level`'s lists over `nv` vertices.
    pub fn new(dev: &mut Device, level: &Level, nv: usize) -> Result<Self> {
        let a: LevelArrays = level.device_arrays()?;
        Ok(DeviceLevel {
            nh: level.n_handles(),
            nv,
            vptr: dev.upload("level vptr", &a.vertex_ptr)?,
            vhandle: upload_nonempty(dev, "level vhandle", &a.vertex_handle)?,
            vframe: upload_nonempty(dev, "level vframe", &a.vertex_frame)?,
            hptr: dev.upload("level hptr", &a.handle_ptr)?,
            hvertex: upload_nonempty(dev, "level hvertex", &a.handle_vertex)?,
            hframe: upload_nonempty(dev, "level hframe", &a.handle_frame)?,
            u: dev.alloc("level lift", nv)?,
            hu: dev.alloc("level H lift", nv)?,
        })
    }

    /// vec4s of a subspace vector (three per handle).
    pub fn len(&self) -> usize {
        ML_HANDLE_VEC4 * self.nh
    }

    /// Whether the level has no handles.
    pub fn is_empty(&self) -> bool {
        self.nh == 0
    }

    /// Records `u = P U q`.
    pub fn record_lift(
        &self,
        plan: &mut Plan,
        vinfo: &Buf<GpuVertexInfo>,
        q: &Buf<GpuVec4>,
        u: &Buf<GpuVec4>,
    ) {
        plan.dispatch(
            Kernel::MlLift,
            &[
                q.id(),
                self.vptr.id(),
                self.vhandle.id(),
                self.vframe.id(),
                vinfo.id(),
                u.id(),
            ],
            Params::new(),
            self.nv as u32,
        );
    }

    /// Records `q = Uᵀ P y`.
    pub fn record_restrict(
        &self,
        plan: &mut Plan,
        vinfo: &Buf<GpuVertexInfo>,
        y: &Buf<GpuVec4>,
        q: &Buf<GpuVec4>,
    ) {
        plan.dispatch(
            Kernel::MlRestrict,
            &[
                y.id(),
                self.hptr.id(),
                self.hvertex.id(),
                self.hframe.id(),
                vinfo.id(),
                q.id(),
            ],
            Params::new(),
            self.nh as u32,
        );
    }

    /// Records the Galerkin product `out = Uᵀ H U q` (lift, H·x, restrict; one plan).
    pub fn record_galerkin(
        &self,
        plan: &mut Plan,
        h: &DeviceOperator,
        q: &Buf<GpuVec4>,
        out: &Buf<GpuVec4>,
    ) {
        self.record_lift(plan, h.vinfo(), q, &self.u);
        h.record_apply(plan, &self.u, &self.hu);
        self.record_restrict(plan, h.vinfo(), &self.hu, out);
    }
}

/// Inverted 12×12 blocks uploaded for `ml_block_apply` ([`super::pack_blocks`]).
pub struct DeviceBlocks {
    nh: usize,
    blocks: Buf<GpuVec4>,
}

impl DeviceBlocks {
    /// Uploads the inverted blocks (row-major, one per handle, e.g. [`super::invert_blocks`]).
    pub fn new(dev: &mut Device, inverted: &[[f64; 144]]) -> Result<Self> {
        Ok(DeviceBlocks {
            nh: inverted.len(),
            blocks: upload_nonempty(dev, "block Jacobi", &super::pack_blocks(inverted))?,
        })
    }

    /// Releases the buffer.
    pub fn free(self, dev: &mut Device) {
        dev.free(self.blocks);
    }

    /// Records `z = B r`.
    pub fn record(&self, plan: &mut Plan, r: &Buf<GpuVec4>, z: &Buf<GpuVec4>) {
        plan.dispatch(
            Kernel::MlBlockApply,
            &[self.blocks.id(), r.id(), z.id()],
            Params::new(),
            (ML_HANDLE_VEC4 * self.nh) as u32,
        );
    }
}

/// The two Hessians of one Newton iteration on the device, and the smoother's Jacobi.
struct Uploaded {
    sub: DeviceOperator,
    lag: DeviceOperator,
    jacobi: DeviceBsr,
}

/// The multilevel state a [`DeviceBackend`] keeps in its extension slot
/// ([`MultilevelBackend::ml_attach`]).
struct MlState {
    nv: usize,
    pinned: Vec<bool>,
    levels: [Option<(DeviceLevel, Option<DeviceBlocks>)>; 2],
    h: Option<Uploaded>,
    /// The block layout of the last lagged Hessian's pattern (the elastic pattern: the same
    /// for the whole run), so its conversion to block rows is one pass per iteration.
    lag_layout: Option<BsrLayout>,
}

fn no_state() -> crate::JelloError {
    crate::JelloError::Solver("multilevel device: ml_attach was not called".into())
}

fn no_hessian() -> crate::JelloError {
    crate::JelloError::Solver("multilevel device: no Hessian uploaded".into())
}

fn no_level(k: usize) -> crate::JelloError {
    crate::JelloError::Solver(format!(
        "multilevel device: level {k} absent or without blocks"
    ))
}

/// The recorder's plan and the multilevel state.
fn state(b: &mut DeviceBackend) -> Result<(&mut Plan, &mut Device, &mut MlState)> {
    let (plan, dev, ext) = b.recorder();
    let st = ext
        .as_mut()
        .and_then(|e| e.downcast_mut::<MlState>())
        .ok_or_else(no_state)?;
    Ok((plan, dev, st))
}

impl MultilevelBackend for DeviceBackend {
    fn ml_attach(&mut self, levels: [Option<&Level>; 2], pinned: &[bool]) -> Result<()> {
        let nv = self.num_vertices();
        if pinned.len() != nv {
            return Err(crate::JelloError::Solver(format!(
                "multilevel device: {} pin flags for {nv} vertices",
                pinned.len()
            )));
        }
        let dev = self.device_mut();
        let mut slots: [Option<(DeviceLevel, Option<DeviceBlocks>)>; 2] = [None, None];
        for (slot, level) in slots.iter_mut().zip(levels) {
            if let Some(level) = level {
                *slot = Some((DeviceLevel::new(dev, level, nv)?, None));
            }
        }
        *self.extension_mut() = Some(Box::new(MlState {
            nv,
            pinned: pinned.to_vec(),
            levels: slots,
            h: None,
            lag_layout: None,
        }));
        Ok(())
    }

    fn ml_set_hessians(&mut self, h_sub: &HessianOperator, h_lag: &HessianOperator) -> Result<()> {
        // The old Hessians' buffers are freed: nothing recorded may name them.
        self.submit()?;
        let (_, dev, st) = state(self)?;
        if let Some(old) = st.h.take() {
            old.sub.free(dev);
            old.lag.free(dev);
            old.jacobi.free(dev);
        }
        let lag_rows = match &st.lag_layout {
            Some(l) if l.fits(h_lag.base) => l.arrays(h_lag.base),
            _ => {
                let l = BsrLayout::new(h_lag.base.pattern())?;
                let rows = l.arrays(h_lag.base);
                st.lag_layout = Some(l);
                rows
            }
        };
        let sub = DeviceOperator::new(
            dev,
            &BsrArrays::from_sym(h_sub.base)?,
            &DeviceTerms::new(h_sub.elements, h_sub.contact, st.nv),
            &st.pinned,
        )?;
        let lag = DeviceOperator::new(
            dev,
            &lag_rows,
            &DeviceTerms::new(h_lag.elements, h_lag.contact, st.nv),
            &st.pinned,
        )?;
        let inv: Vec<f64> = h_lag.diagonal().iter().map(|d| 1.0 / d).collect();
        let jacobi = DeviceBsr::new(dev, &BsrArrays::diagonal(&inv))?;
        st.h = Some(Uploaded { sub, lag, jacobi });
        Ok(())
    }

    fn ml_set_blocks(&mut self, k: usize, inverted: &[[f64; 144]]) -> Result<()> {
        self.submit()?;
        let (_, dev, st) = state(self)?;
        let (_, blocks) = st.levels[k].as_mut().ok_or_else(|| no_level(k))?;
        if let Some(old) = blocks.take() {
            old.free(dev);
        }
        *blocks = Some(DeviceBlocks::new(dev, inverted)?);
        Ok(())
    }

    fn ml_lift(&mut self, k: usize, q: DeviceVector, u: DeviceVector) -> Result<()> {
        let (plan, _, st) = state(self)?;
        let h = st.h.as_ref().ok_or_else(no_hessian)?;
        let (level, _) = st.levels[k].as_ref().ok_or_else(|| no_level(k))?;
        level.record_lift(plan, h.sub.vinfo(), &q, &u);
        Ok(())
    }

    fn ml_restrict(&mut self, k: usize, y: DeviceVector, q: DeviceVector) -> Result<()> {
        let (plan, _, st) = state(self)?;
        let h = st.h.as_ref().ok_or_else(no_hessian)?;
        let (level, _) = st.levels[k].as_ref().ok_or_else(|| no_level(k))?;
        level.record_restrict(plan, h.sub.vinfo(), &y, &q);
        Ok(())
    }

    fn ml_apply(&mut self, which: Hessian, x: DeviceVector, y: DeviceVector) -> Result<()> {
        let (plan, _, st) = state(self)?;
        let h = st.h.as_ref().ok_or_else(no_hessian)?;
        match which {
            Hessian::Levels => h.sub.record_apply(plan, &x, &y),
            Hessian::Smoother => h.lag.record_apply(plan, &x, &y),
        }
        Ok(())
    }

    fn ml_galerkin(&mut self, k: usize, q: DeviceVector, out: DeviceVector) -> Result<()> {
        let (plan, _, st) = state(self)?;
        let h = st.h.as_ref().ok_or_else(no_hessian)?;
        let (level, _) = st.levels[k].as_ref().ok_or_else(|| no_level(k))?;
        level.record_galerkin(plan, &h.sub, &q, &out);
        Ok(())
    }

    fn ml_block_jacobi(&mut self, k: usize, r: DeviceVector, z: DeviceVector) -> Result<()> {
        let (plan, _, st) = state(self)?;
        let Some((_, Some(blocks))) = st.levels[k].as_ref() else {
            return Err(no_level(k));
        };
        blocks.record(plan, &r, &z);
        Ok(())
    }

    fn ml_jacobi(&mut self, r: DeviceVector, z: DeviceVector) -> Result<()> {
        let (plan, _, st) = state(self)?;
        let h = st.h.as_ref().ok_or_else(no_hessian)?;
        h.jacobi.record(plan, &r, None, &z);
        Ok(())
    }
}

/// The multilevel Newton direction on a device: a [`DeviceBackend`] for the model with the
/// levels attached ([`MultilevelBackend`]) and the direction's vectors on it
/// ([`LevelsDirection`]). The host hands it each iteration's two Hessians (`H` with the
/// cubature terms for the levels, `H_l` with the lagged elastic Hessian for the smoother;
/// [`super::HessianOperator`]) and `−g`; the direction comes back (16·n bytes, with `d_s`
/// 32·n).
pub struct DeviceDirection {
    /// The device backend the direction's buffers live on (its device; its model serves the
    /// line search's energies, [`super::device_energy::DeviceEnergy`]).
    backend: DeviceBackend,
    direction: LevelsDirection<DeviceBackend>,
}

impl DeviceDirection {
    /// Uploads `model` (a [`DeviceBackend`] on `device`) and its levels (affine, SMS; either
    /// may be absent), with pin flags `pinned`.
    pub fn new(
        device: Device,
        model: &Model,
        levels: [Option<&Level>; 2],
        pinned: &[bool],
    ) -> Result<Self> {
        let mut backend = DeviceBackend::new(device, model)?;
        backend.ml_attach(levels, pinned)?;
        let direction = LevelsDirection::new(&mut backend, levels.map(|l| l.map(Level::dim)))?;
        Ok(DeviceDirection { backend, direction })
    }

    /// The device (GPU or CPU twins).
    pub fn device(&self) -> &Device {
        self.backend.device()
    }

    /// The device backend, for other work of the solver on it (the line search's energies).
    pub fn backend_mut(&mut self) -> &mut DeviceBackend {
        &mut self.backend
    }

    /// Uploads this iteration's `h_sub` (levels) and `h_lag` (smoother; its inverse diagonal is
    /// the Jacobi preconditioner), replacing the last ones.
    pub fn upload(&mut self, h_sub: &HessianOperator, h_lag: &HessianOperator) -> Result<()> {
        self.backend.ml_set_hessians(h_sub, h_lag)
    }

    /// The direction for right-hand side `rhs` (= −g, zero at pinned DOFs) on the uploaded
    /// Hessians ([`LevelsDirection::solve`]), each present level's block Jacobi from
    /// `level_blocks` (its inverted Galerkin blocks, [`super::invert_blocks`]).
    pub fn solve(
        &mut self,
        rhs: &[f64],
        level_blocks: [Option<&[[f64; 144]]>; 2],
        run: DirectionRun,
    ) -> Result<DirectionSolve> {
        if run.subspace {
            for (k, inv) in level_blocks.iter().enumerate() {
                if let Some(inv) = inv {
                    self.backend.ml_set_blocks(k, inv)?;
                }
            }
        }
        self.direction.solve(&mut self.backend, rhs, run)
    }
}
