//! The IPC barrier and lagged friction of a step on a device — the pair lists and the
//! per-pair buffers the two term kernels write, and the recording of those kernels
//! (`ipc_pairs`: κ·m·b(d²) with its gradient and PSD-projected Hessian; `ipc_friction`:
//! μλ·f₀(‖u‖) with its gradient and PSD Hessian), each gathered per model vertex
//! (`ipc_gather` over the lists' CSRs, no atomics). One place for every device path that
//! evaluates contact: the multilevel solver's gradient and line-search energies
//! (`solver::multilevel::device_contact`) and the JGS2 / VBD device iteration
//! (`solver::jgs2::device_ipc`), which add their own work around it (host positions and
//! rounding bounds there, trust boxes, CCD and the pairs' coupling here).
//!
//! **Data.** Both kernels read collision-vertex arrays: [`ContactTerms::xc`], the model's
//! vertices then the obstacles' (f32, relative to the caller's origin; with fine parts, each
//! position split as coarse + fine, the fine parts after the n_coll coarse ones —
//! `twins::ipc::pair_relative`), and
//! [`ContactTerms::dxc`], each collision vertex's step displacement (friction's u). Who fills
//! them, and how, is the caller's: a host upload, or copies from a device iterate.
//!
//! **Rows.** A list's CSR has one row per model vertex it gathers into; entries of vertices a
//! caller leaves out (pinned vertices, obstacle vertices) go to a row no gather reads, so the
//! gathered gradient is zero there, as the f64 gradient of a pinned vertex is.

use super::abi::{FRICTION_HESSIAN, IPC_HESSIAN};
use super::device::{Buf, Device, Plan};
use super::layout::{GpuFrictionPair, GpuMat3, GpuPair, GpuVec4, Params};
use super::{Kernel, PairList};
use crate::contact::friction::FrictionSet;
use crate::contact::ContactPair;
use crate::Result;

/// Where a term's per-pair outputs go after its kernel ([`ContactTerms::rec_barrier`],
/// [`ContactTerms::rec_friction`]).
#[derive(Clone, Copy)]
pub struct Gather<'a> {
    /// Per model vertex the gradient sum (N) is added into (the first `rows` entries).
    pub g: &'a Buf<GpuVec4>,
    /// With the kernel's Hessian flag: the per-vertex 3×3 blocks the pairs' diagonal blocks
    /// are added into.
    pub blocks: Option<&'a Buf<GpuMat3>>,
    /// Model vertices gathered.
    pub rows: usize,
}

/// The barrier and friction pair lists of one step on a device (module docs).
pub struct ContactTerms {
    /// κ (J/m⁴), d̂² (m²) and friction's ε_v·h (m).
    pub kappa: f32,
    pub dhat_sq: f32,
    pub eps: f32,
    /// Collision positions (m, f32 relative to the caller's origin), then — when
    /// [`Self::fine_at`] is not 0 — their fine parts from index `fine_at` (= the collision
    /// vertices): position = `xc[v] + xc[fine_at + v]`.
    pub xc: Buf<GpuVec4>,
    /// Where [`Self::xc`]'s fine parts begin (0: plain f32 positions).
    pub fine_at: u32,
    /// Step displacement per collision vertex (m).
    pub dxc: Buf<GpuVec4>,
    /// The candidate barrier pairs and the lagged friction pairs (`None`: none).
    pub barrier: Option<PairList<GpuPair>>,
    pub friction: Option<PairList<GpuFrictionPair>>,
    /// Per barrier pair its squared distance (m²) and distance type, as `ipc_pairs` writes.
    pub dist: Buf<f32>,
    ptype: Buf<u32>,
    /// The barrier's and friction's 12×12 pair Hessians (144 per pair), when asked for.
    pub hess: Buf<f32>,
    pub fhess: Buf<f32>,
    /// Bound in the Hessian and block slots of a pass without them.
    unused: (Buf<f32>, Buf<GpuMat3>),
}

impl ContactTerms {
    /// Empty lists over `n_coll` collision vertices, κ = 0, with activation distance d̂² =
    /// `dhat_sq` (m²); with `fine_parts`, room for the positions' fine parts in [`Self::xc`].
    pub fn new(dev: &mut Device, n_coll: usize, dhat_sq: f64, fine_parts: bool) -> Result<Self> {
        let n = n_coll.max(1);
        Ok(ContactTerms {
            kappa: 0.0,
            dhat_sq: dhat_sq as f32,
            eps: 1.0,
            xc: dev.alloc("contact positions", if fine_parts { 2 * n } else { n })?,
            fine_at: if fine_parts { n as u32 } else { 0 },
            dxc: dev.alloc("contact step displacements", n_coll.max(1))?,
            barrier: None,
            friction: None,
            dist: dev.alloc("contact pair distances", 1)?,
            ptype: dev.alloc("contact pair types", 1)?,
            hess: dev.alloc("contact pair Hessians", 144)?,
            fhess: dev.alloc("friction pair Hessians", 144)?,
            unused: (
                dev.alloc("contact no Hessian", 1)?,
                dev.alloc("contact no Hessian blocks", 1)?,
            ),
        })
    }

    /// Barrier pairs in the list (0 without one).
    pub fn barrier_len(&self) -> usize {
        self.barrier.as_ref().map_or(0, |b| b.n)
    }

    /// Friction pairs in the list (0 without one).
    pub fn friction_len(&self) -> usize {
        self.friction.as_ref().map_or(0, |f| f.n)
    }

    /// Replaces the barrier list by `pairs` (collision ids), its CSR over `rows` model
    /// vertices without those `keep` refuses; with `hessians`, room for their Hessians.
    pub fn set_barrier(
        &mut self,
        dev: &mut Device,
        pairs: &[ContactPair],
        rows: usize,
        keep: impl Fn(u32) -> bool,
        hessians: bool,
    ) -> Result<()> {
        if let Some(old) = self.barrier.take() {
            old.free(dev);
        }
        let n = pairs.len().max(1);
        if hessians {
            dev.grow(&mut self.hess, "contact pair Hessians", 144 * n)?;
        }
        dev.grow(&mut self.dist, "contact pair distances", n)?;
        dev.grow(&mut self.ptype, "contact pair types", n)?;
        if !pairs.is_empty() {
            let list: Vec<GpuPair> = pairs.iter().map(GpuPair::of).collect();
            let stencils: Vec<[u32; 4]> = pairs.iter().map(|p| p.ids).collect();
            self.barrier = Some(PairList::new(
                dev,
                "contact pairs",
                &list,
                &stencils,
                rows,
                keep,
            )?);
        }
        Ok(())
    }

    /// Replaces the friction list by `set`'s pairs (ε_v·h from it too), CSR as
    /// [`Self::set_barrier`]'s; `None` or no pair: no friction.
    pub fn set_friction(
        &mut self,
        dev: &mut Device,
        set: Option<&FrictionSet>,
        rows: usize,
        keep: impl Fn(u32) -> bool,
        hessians: bool,
    ) -> Result<()> {
        if let Some(old) = self.friction.take() {
            old.free(dev);
        }
        let Some(set) = set.filter(|s| !s.pairs.is_empty()) else {
            return Ok(());
        };
        let list: Vec<GpuFrictionPair> = set
            .pairs
            .iter()
            .map(|p| GpuFrictionPair::new(p.ids, p))
            .collect();
        let stencils: Vec<[u32; 4]> = set.pairs.iter().map(|p| p.ids).collect();
        if hessians {
            dev.grow(&mut self.fhess, "friction pair Hessians", 144 * list.len())?;
        }
        self.friction = Some(PairList::new(
            dev,
            "friction pairs",
            &list,
            &stencils,
            rows,
            keep,
        )?);
        self.eps = set.eps as f32;
        Ok(())
    }

    /// Records `ipc_pairs` at [`Self::xc`] with `flags` (`IPC_GRADIENT`, `IPC_HESSIAN`,
    /// `IPC_PROJECT`) and, with `gather`, the gathers of its gradient (and, with blocks and
    /// the Hessian flag, of its diagonal blocks). Nothing without barrier pairs.
    pub fn rec_barrier(&self, p: &mut Plan, flags: u32, gather: Option<Gather>) {
        let Some(b) = &self.barrier else {
            return;
        };
        let with_h = flags & IPC_HESSIAN != 0;
        let hess = if with_h { &self.hess } else { &self.unused.0 };
        p.dispatch(
            Kernel::IpcPairs,
            &[
                self.xc.id(),
                b.list.id(),
                b.energy.id(),
                self.dist.id(),
                self.ptype.id(),
                b.grad.id(),
                hess.id(),
            ],
            Params {
                u1: self.fine_at,
                f1: self.kappa,
                ..Params::new().u0(flags).f0(self.dhat_sq)
            },
            b.n as u32,
        );
        if let Some(gt) = gather {
            self.rec_gather(p, b, with_h.then_some(hess), gt);
        }
    }

    /// Records `ipc_friction` at [`Self::dxc`] with `flags` (`FRICTION_GRADIENT`,
    /// `FRICTION_HESSIAN`) and, with `gather`, its gathers as [`Self::rec_barrier`]'s.
    pub fn rec_friction(&self, p: &mut Plan, flags: u32, gather: Option<Gather>) {
        let Some(f) = &self.friction else {
            return;
        };
        let with_h = flags & FRICTION_HESSIAN != 0;
        let hess = if with_h { &self.fhess } else { &self.unused.0 };
        p.dispatch(
            Kernel::IpcFriction,
            &[
                self.dxc.id(),
                f.list.id(),
                f.energy.id(),
                f.grad.id(),
                hess.id(),
            ],
            Params::new().u0(flags).f0(self.eps),
            f.n as u32,
        );
        if let Some(gt) = gather {
            self.rec_gather(p, f, with_h.then_some(hess), gt);
        }
    }

    /// `list`'s gather of its gradients (and, given `hess` and blocks, of the Hessians'
    /// diagonal blocks).
    fn rec_gather<T: bytemuck::Pod + Default>(
        &self,
        p: &mut Plan,
        list: &PairList<T>,
        hess: Option<&Buf<f32>>,
        gather: Gather,
    ) {
        let unused = (&self.unused.0, &self.unused.1);
        let blocks = hess.zip(gather.blocks);
        list.record_gather(p, blocks, unused, gather.g, gather.rows);
    }

    /// Records `list`'s gather of its per-pair corner vectors (what the last pass left in
    /// [`PairList::grad`]) into `g` over `rows` vertices, without Hessian blocks.
    pub fn rec_gather_vectors<T: bytemuck::Pod + Default>(
        &self,
        p: &mut Plan,
        list: &PairList<T>,
        g: &Buf<GpuVec4>,
        rows: usize,
    ) {
        let gather = Gather {
            g,
            blocks: None,
            rows,
        };
        self.rec_gather(p, list, None, gather);
    }

    /// Releases the buffers.
    pub fn free(mut self, dev: &mut Device) {
        if let Some(b) = self.barrier.take() {
            b.free(dev);
        }
        if let Some(f) = self.friction.take() {
            f.free(dev);
        }
        for b in [self.dist, self.hess, self.fhess, self.unused.0] {
            dev.free(b);
        }
        dev.free(self.xc);
        dev.free(self.dxc);
        dev.free(self.ptype);
        dev.free(self.unused.1);
    }
}
