//! The multilevel solver's Hessian-vector products and PCG on a [`Device`] (a GPU, or the WGSL
//! kernels' CPU twins): the full-space `H·x` as three dispatches (element and contact terms per
//! corner, their per-vertex gather, the block-sparse base with the gathered terms added), a
//! level's Galerkin product `Uᵀ H U q` (lift, H·x, restrict), a PCG whose every vector update
//! and dot product stays on the device, the host reading its five scalar slots once per
//! iteration to decide when to stop — the same algorithm as the f64
//! [`pcg`](crate::solver::pcg::pcg) — and, on these, the multilevel Newton direction
//! ([`DeviceDirection`]: affine and SMS levels, then the smoother; `--backend gpu`). A host f64
//! term can be added to a preconditioner ([`DevicePcg::solve_corrected`]: the SMS level's affine
//! coarse correction) at one more synchronisation per iteration.
//!
//! The PCG's coefficients never cross the bus: `α = rz/pAp` and `β = rz'/rz` are ratios of
//! scalar slots that `dev_combine` forms on the device (a ratio with a non-positive or
//! non-finite denominator is 0, so a breakdown leaves x unchanged, as the f64 loop does by
//! stopping first). Full-space vectors are the per-vertex xyz fields of the device backend;
//! subspace vectors are three full vec4s per handle, updated and dotted on all four lanes
//! (`dev_combine`/`dev_dots` with [`COMBINE_VEC4`]).

use super::levels::{Level, LevelArrays};
use super::operator::{BsrArrays, BsrLayout, DeviceTerms};
use crate::gpu::abi::{
    dev_groups, COMBINE_DOT, COMBINE_SET, COMBINE_VEC4, ML_HANDLE_VEC4, SLOT_NONE,
};
pub(super) use crate::gpu::model::upload_nonempty;
use crate::gpu::{
    Buf, Device, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo, Kernel, Params, Plan, VertexCsr,
};
use crate::problem::Model;
use crate::solver::backend::DeviceBackend;
use crate::solver::pcg::PcgOutcome;
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

// Scalar slots of the PCG.
const RZ: [u32; 2] = [0, 1];
const PAP: u32 = 2;
const RR: u32 = 3;
const BB: u32 = 4;
const SLOTS: usize = 5;

/// Records `out = A v` into a plan.
pub type RecordOp<'a> = dyn FnMut(&mut Plan, &Buf<GpuVec4>, &Buf<GpuVec4>) + 'a;

/// A host f64 routine `r ↦ c(r)` added to a device preconditioner's output
/// ([`DevicePcg::solve_corrected`]).
pub type HostCorrection<'a> = dyn FnMut(&[f64]) -> Result<Vec<f64>> + 'a;

/// PCG on a device over vectors of `n` vec4s (see the module docs); the scratch vectors are
/// allocated once.
pub struct DevicePcg {
    n: usize,
    lanes4: bool,
    r: Buf<GpuVec4>,
    z: Buf<GpuVec4>,
    ap: Buf<GpuVec4>,
    p: [Buf<GpuVec4>; 2],
    corr: Buf<GpuVec4>,
    scal: Buf<f32>,
    part: [Buf<f32>; 3],
}

impl DevicePcg {
    /// Scratch for vectors of `n` vec4s: the xyz lanes (full-space, one vec4 per vertex) or, with
    /// `lanes4`, all four (a subspace vector, three vec4s per handle).
    pub fn new(dev: &mut Device, n: usize, lanes4: bool) -> Result<Self> {
        let g = dev_groups(n).max(1);
        Ok(DevicePcg {
            n,
            lanes4,
            r: dev.alloc("pcg r", n)?,
            z: dev.alloc("pcg z", n)?,
            ap: dev.alloc("pcg Ap", n)?,
            p: [dev.alloc("pcg p", n)?, dev.alloc("pcg p'", n)?],
            corr: dev.alloc("pcg host correction", n)?,
            scal: dev.alloc("pcg scalars", SLOTS)?,
            part: [
                dev.alloc("pcg partials ab", g)?,
                dev.alloc("pcg partials aa", g)?,
                dev.alloc("pcg partials bb", g)?,
            ],
        })
    }

    /// `y ← (y +) c·x` with `c = −ratio·scal[num]/scal[den]` (or `c = base` without `num`).
    #[allow(clippy::too_many_arguments)]
    fn combine(
        &self,
        plan: &mut Plan,
        y: &Buf<GpuVec4>,
        x: &Buf<GpuVec4>,
        base: f32,
        ratio: f32,
        num: u32,
        den: u32,
        set: bool,
    ) {
        let flags = if set { COMBINE_SET } else { 0 } | if self.lanes4 { COMBINE_VEC4 } else { 0 };
        debug_assert_eq!(flags & COMBINE_DOT, 0);
        plan.dispatch(
            Kernel::DevCombine,
            &[self.scal.id(), x.id(), x.id(), y.id(), self.part[0].id()],
            Params {
                u0: SLOT_NONE | num << 10 | den << 20,
                u1: SLOT_NONE | flags << 10,
                f0: base,
                f1: ratio,
                ..Params::new()
            },
            self.n as u32,
        );
    }

    /// Records `y ← c·x` (`set`) or `y ← y + c·x` on this solver's vectors' lanes.
    pub fn record_axpy(
        &self,
        plan: &mut Plan,
        y: &Buf<GpuVec4>,
        x: &Buf<GpuVec4>,
        c: f32,
        set: bool,
    ) {
        self.combine(plan, y, x, c, 0.0, SLOT_NONE, SLOT_NONE, set);
    }

    /// `scal[ab] = a·b`, `scal[aa] = a·a` (each when given).
    fn dots(
        &self,
        plan: &mut Plan,
        a: &Buf<GpuVec4>,
        b: &Buf<GpuVec4>,
        ab: Option<u32>,
        aa: Option<u32>,
    ) {
        plan.dispatch(
            Kernel::DevDots,
            &[
                a.id(),
                b.id(),
                self.part[0].id(),
                self.part[1].id(),
                self.part[2].id(),
            ],
            Params {
                u0: u32::from(self.lanes4),
                ..Params::new()
            },
            self.n as u32,
        );
        let g = dev_groups(self.n) as u32;
        if let Some(s) = ab {
            plan.sum(&self.part[0], g, &self.scal, s);
        }
        if let Some(s) = aa {
            plan.sum(&self.part[1], g, &self.scal, s);
        }
    }

    fn read(&self, dev: &mut Device, plan: &mut Plan) -> Result<Vec<f64>> {
        dev.submit(plan)?;
        *plan = Plan::new();
        Ok(dev.read(&self.scal)?.iter().map(|&v| v as f64).collect())
    }

    /// Solves `A x = b` from the guess in `x` (`warm`; otherwise from 0, `x` overwritten) with
    /// `apply` recording `A v` and `precond` recording `P⁻¹ r`, stopping as
    /// [`pcg`](crate::solver::pcg::pcg) does: after `max_iterations` products or once
    /// ‖r‖ ≤ `tolerance`·‖b‖ (the recurrence's residual, in f32 on the device, compared in f64
    /// on the host). One read of five scalars per iteration.
    #[allow(clippy::too_many_arguments)]
    pub fn solve(
        &mut self,
        dev: &mut Device,
        apply: &mut RecordOp,
        precond: &mut RecordOp,
        b: &Buf<GpuVec4>,
        x: &Buf<GpuVec4>,
        warm: bool,
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<PcgOutcome> {
        self.solve_corrected(
            dev,
            apply,
            precond,
            None,
            b,
            x,
            warm,
            tolerance,
            max_iterations,
        )
    }

    /// `z += c(r)` by a host routine on the vector's f64 values (all four lanes of each vec4,
    /// or xyz): the plan so far is submitted, r read, c(r) written and added on the device.
    fn host_correct(
        &self,
        dev: &mut Device,
        plan: &mut Plan,
        correction: &mut HostCorrection,
    ) -> Result<()> {
        dev.submit(plan)?;
        *plan = Plan::new();
        let lanes = if self.lanes4 { 4 } else { 3 };
        let r: Vec<f64> = dev
            .read(&self.r)?
            .iter()
            .flat_map(|v| v[..lanes].iter().map(|&x| x as f64).collect::<Vec<_>>())
            .collect();
        let c = correction(&r)?;
        let cv: Vec<GpuVec4> = c
            .chunks(lanes)
            .map(|w| {
                let mut v = [0.0f32; 4];
                for (o, &x) in v.iter_mut().zip(w) {
                    *o = x as f32;
                }
                v
            })
            .collect();
        dev.write(&self.corr, 0, &cv)?;
        self.combine(
            plan, &self.z, &self.corr, 1.0, 0.0, SLOT_NONE, SLOT_NONE, false,
        );
        Ok(())
    }

    /// [`Self::solve`] with the preconditioner `P⁻¹ r = precond(r) + correction(r)`, the
    /// correction a host f64 routine (the SMS level's affine coarse solve): one more
    /// synchronisation and one vector each way per iteration.
    #[allow(clippy::too_many_arguments)]
    pub fn solve_corrected(
        &mut self,
        dev: &mut Device,
        apply: &mut RecordOp,
        precond: &mut RecordOp,
        mut correction: Option<&mut HostCorrection>,
        b: &Buf<GpuVec4>,
        x: &Buf<GpuVec4>,
        warm: bool,
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<PcgOutcome> {
        let (r, z, ap) = (self.r, self.z, self.ap);
        let mut plan = Plan::new();
        self.dots(&mut plan, b, b, None, Some(BB));
        // r ← b (− A x).
        self.combine(&mut plan, &r, b, 1.0, 0.0, SLOT_NONE, SLOT_NONE, true);
        if warm {
            apply(&mut plan, x, &ap);
            self.combine(&mut plan, &r, &ap, -1.0, 0.0, SLOT_NONE, SLOT_NONE, false);
        } else {
            self.combine(&mut plan, x, b, 0.0, 0.0, SLOT_NONE, SLOT_NONE, true);
        }
        precond(&mut plan, &r, &z);
        self.combine(
            &mut plan, &self.p[0], &z, 1.0, 0.0, SLOT_NONE, SLOT_NONE, true,
        );
        self.dots(&mut plan, &r, &z, Some(RZ[0]), Some(RR));
        let s = self.read(dev, &mut plan)?;
        let b_norm = s[BB as usize].sqrt();
        if b_norm == 0.0 {
            self.combine(&mut plan, x, b, 0.0, 0.0, SLOT_NONE, SLOT_NONE, true);
            dev.submit(&plan)?;
            return Ok(PcgOutcome::default());
        }
        let mut r_norm = s[RR as usize].sqrt();
        let mut rz_ok = s[RZ[0] as usize].is_finite();
        let mut done = 0;
        let mut cur = 0;
        let mut breakdown = false;
        while done < max_iterations && r_norm > tolerance * b_norm {
            let (p, p_next) = (self.p[cur], self.p[1 - cur]);
            let (rz, rz_next) = (RZ[cur], RZ[1 - cur]);
            apply(&mut plan, &p, &ap);
            self.dots(&mut plan, &p, &ap, Some(PAP), None);
            // x += (rz/pAp) p;  r −= (rz/pAp) Ap.
            self.combine(&mut plan, x, &p, 0.0, -1.0, rz, PAP, false);
            self.combine(&mut plan, &r, &ap, 0.0, 1.0, rz, PAP, false);
            precond(&mut plan, &r, &z);
            if let Some(c) = correction.as_deref_mut() {
                self.host_correct(dev, &mut plan, c)?;
            }
            self.dots(&mut plan, &r, &z, Some(rz_next), Some(RR));
            // p' = z + (rz'/rz) p.
            self.combine(&mut plan, &p_next, &z, 1.0, 0.0, SLOT_NONE, SLOT_NONE, true);
            self.combine(&mut plan, &p_next, &p, 0.0, -1.0, rz_next, rz, false);
            let s = self.read(dev, &mut plan)?;
            done += 1;
            let pap = s[PAP as usize];
            if pap.is_nan() || pap <= 0.0 || !rz_ok {
                // dev_combine's guarded ratio was 0: x and r are unchanged, as in the f64 loop.
                breakdown = true;
                break;
            }
            r_norm = s[RR as usize].sqrt();
            rz_ok = s[rz_next as usize].is_finite();
            cur = 1 - cur;
        }
        Ok(PcgOutcome {
            iterations: done,
            relative_residual: r_norm / b_norm,
            breakdown,
        })
    }
}

/// Full-space f64 values (3n) as one vec4 per vertex.
fn to_vec4(x: &[f64]) -> Vec<GpuVec4> {
    x.chunks_exact(3)
        .map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, 0.0])
        .collect()
}

/// One vec4 per vertex back to 3n f64 values.
fn from_vec4(v: &[GpuVec4]) -> Vec<f64> {
    v.iter()
        .flat_map(|p| [p[0] as f64, p[1] as f64, p[2] as f64])
        .collect()
}

/// One subspace level's device state: its lists, PCG scratch and right-hand side / solution.
struct LevelSlot {
    level: DeviceLevel,
    pcg: DevicePcg,
    b: Buf<GpuVec4>,
    q: Buf<GpuVec4>,
}

/// The two Hessians of one Newton iteration on the device.
struct Uploaded {
    sub: DeviceOperator,
    lag: DeviceOperator,
    jacobi: DeviceBsr,
}

/// What [`DeviceDirection::solve`] returns.
#[derive(Clone, Debug, Default)]
pub struct DeviceSolve {
    /// The direction (3n, m).
    pub d: Vec<f64>,
    /// Its subspace part `d_s` (3n, m; zero without levels).
    pub d_s: Vec<f64>,
    /// PCG iterations: affine, SMS, full space.
    pub counts: [usize; 3],
}

/// The multilevel Newton direction on a device: the host hands it each iteration's two
/// Hessians (`H` with the cubature terms for the levels, `H_l` with the lagged elastic
/// Hessian for the smoother; [`super::HessianOperator`]) and `−g`; the levels' block-Jacobi PCGs
/// (affine, then SMS), the residual update `r ← r − H U q` and the N_cg Jacobi-PCG smoother
/// run on the device, and the direction comes back (16·n bytes, with `d_s` 32·n).
pub struct DeviceDirection {
    /// The device backend the direction's buffers live on (its device; its model serves the
    /// line search's energies, [`super::device_energy::DeviceEnergy`]).
    backend: DeviceBackend,
    nv: usize,
    pinned: Vec<bool>,
    levels: [Option<LevelSlot>; 2],
    full: DevicePcg,
    rhs: Buf<GpuVec4>,
    r: Buf<GpuVec4>,
    d: Buf<GpuVec4>,
    ds: Buf<GpuVec4>,
    u: Buf<GpuVec4>,
    hu: Buf<GpuVec4>,
    h: Option<Uploaded>,
    /// The block layout of the last lagged Hessian's pattern (the elastic pattern: the same
    /// for the whole run), so its conversion to block rows is one pass per iteration.
    lag_layout: Option<BsrLayout>,
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
        let nv = pinned.len();
        if nv != model.num_vertices() {
            return Err(crate::JelloError::Solver(format!(
                "multilevel device: {nv} pin flags for {} vertices",
                model.num_vertices()
            )));
        }
        let mut backend = DeviceBackend::new(device, model)?;
        let dev = backend.device_mut();
        let mut slots: [Option<LevelSlot>; 2] = [None, None];
        for (slot, level) in slots.iter_mut().zip(levels) {
            if let Some(level) = level {
                let lv = DeviceLevel::new(dev, level, nv)?;
                let len = lv.len();
                *slot = Some(LevelSlot {
                    pcg: DevicePcg::new(dev, len, true)?,
                    b: dev.alloc("level rhs", len)?,
                    q: dev.alloc("level solution", len)?,
                    level: lv,
                });
            }
        }
        Ok(DeviceDirection {
            full: DevicePcg::new(dev, nv, false)?,
            rhs: dev.alloc("-g", nv)?,
            r: dev.alloc("residual", nv)?,
            d: dev.alloc("direction", nv)?,
            ds: dev.alloc("subspace direction", nv)?,
            u: dev.alloc("lift", nv)?,
            hu: dev.alloc("H lift", nv)?,
            levels: slots,
            nv,
            pinned: pinned.to_vec(),
            h: None,
            lag_layout: None,
            backend,
        })
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
    pub fn upload(
        &mut self,
        h_sub: &super::HessianOperator,
        h_lag: &super::HessianOperator,
    ) -> Result<()> {
        if let Some(old) = self.h.take() {
            old.sub.free(self.backend.device_mut());
            old.lag.free(self.backend.device_mut());
            old.jacobi.free(self.backend.device_mut());
        }
        let lag_rows = match &self.lag_layout {
            Some(l) if l.fits(h_lag.base) => l.arrays(h_lag.base),
            _ => {
                let l = BsrLayout::new(h_lag.base.pattern())?;
                let rows = l.arrays(h_lag.base);
                self.lag_layout = Some(l);
                rows
            }
        };
        let dev = self.backend.device_mut();
        let sub = DeviceOperator::new(
            dev,
            &BsrArrays::from_sym(h_sub.base)?,
            &DeviceTerms::new(h_sub.elements, h_sub.contact, self.nv),
            &self.pinned,
        )?;
        let lag = DeviceOperator::new(
            dev,
            &lag_rows,
            &DeviceTerms::new(h_lag.elements, h_lag.contact, self.nv),
            &self.pinned,
        )?;
        let inv: Vec<f64> = h_lag.diagonal().iter().map(|d| 1.0 / d).collect();
        let jacobi = DeviceBsr::new(dev, &BsrArrays::diagonal(&inv))?;
        self.h = Some(Uploaded { sub, lag, jacobi });
        Ok(())
    }

    /// The direction for right-hand side `rhs` (= −g, zero at pinned DOFs) on the uploaded
    /// Hessians: with `subspace`, each level in turn solves `UᵀHU q = Uᵀ r` by block-Jacobi PCG
    /// (`level_blocks[i]`: its inverted Galerkin blocks, [`super::invert_blocks`]) to relative
    /// `level_tolerance` or `level_max` iterations and updates `d += U q`, `r −= H U q`; then
    /// the smoother runs Jacobi PCG on `H_l d = rhs` from `d` (from zero without `subspace`)
    /// for `n_cg` iterations or to relative `full_tolerance`. `sms_correction`, when given, is
    /// added to the SMS level's preconditioner on the host ([`DevicePcg::solve_corrected`]).
    #[allow(clippy::too_many_arguments)]
    pub fn solve(
        &mut self,
        rhs: &[f64],
        subspace: bool,
        level_blocks: [Option<&[[f64; 144]]>; 2],
        mut sms_correction: Option<&mut HostCorrection>,
        level_tolerance: f64,
        level_max: usize,
        n_cg: usize,
        full_tolerance: f64,
    ) -> Result<DeviceSolve> {
        let Some(h) = &self.h else {
            return Err(crate::JelloError::Solver(
                "multilevel device: no Hessian uploaded".into(),
            ));
        };
        let dev = self.backend.device_mut();
        dev.write(&self.rhs, 0, &to_vec4(rhs))?;
        let mut counts = [0; 3];
        let mut plan = Plan::new();
        let full = &self.full;
        full.record_axpy(&mut plan, &self.r, &self.rhs, 1.0, true);
        full.record_axpy(&mut plan, &self.d, &self.rhs, 0.0, true);
        if subspace {
            for (k, slot) in self.levels.iter_mut().enumerate() {
                let (Some(slot), Some(inv)) = (slot.as_mut(), level_blocks[k]) else {
                    continue;
                };
                slot.level
                    .record_restrict(&mut plan, h.sub.vinfo(), &self.r, &slot.b);
                dev.submit(&plan)?;
                plan = Plan::new();
                let blocks = DeviceBlocks::new(dev, inv)?;
                let correction = if k == 1 {
                    sms_correction.as_deref_mut()
                } else {
                    None
                };
                let out = slot.pcg.solve_corrected(
                    dev,
                    &mut |p: &mut Plan, v, o| slot.level.record_galerkin(p, &h.sub, v, o),
                    &mut |p: &mut Plan, r, z| blocks.record(p, r, z),
                    correction,
                    &slot.b,
                    &slot.q,
                    false,
                    level_tolerance,
                    level_max,
                )?;
                blocks.free(dev);
                counts[k] = out.iterations;
                // d += U q;  r −= H U q.
                slot.level
                    .record_lift(&mut plan, h.sub.vinfo(), &slot.q, &self.u);
                h.sub.record_apply(&mut plan, &self.u, &self.hu);
                full.record_axpy(&mut plan, &self.d, &self.u, 1.0, false);
                full.record_axpy(&mut plan, &self.r, &self.hu, -1.0, false);
            }
        }
        full.record_axpy(&mut plan, &self.ds, &self.d, 1.0, true);
        dev.submit(&plan)?;
        let out = self.full.solve(
            dev,
            &mut |p: &mut Plan, v, o| h.lag.record_apply(p, v, o),
            &mut |p: &mut Plan, r, z| h.jacobi.record(p, r, None, z),
            &self.rhs,
            &self.d,
            subspace,
            full_tolerance,
            n_cg,
        )?;
        counts[2] = out.iterations;
        let d = from_vec4(&dev.read(&self.d)?);
        let d_s = from_vec4(&dev.read(&self.ds)?);
        Ok(DeviceSolve { d, d_s, counts })
    }
}
