//! A list of contact pairs on a device — the records a per-pair kernel reads (`ipc_pairs`,
//! `ipc_friction`, `ipc_ccd`), each pair's energy and per-corner gradient it writes, and the
//! vertex→(pair, slot) CSR over which `ipc_gather` sums those per vertex (no atomics) — shared
//! by every device path that evaluates contact (the multilevel solver's line search, the
//! JGS2 / VBD device iteration).

use super::device::{Buf, Device, Plan};
use super::layout::{GpuMat3, GpuVec4, Params};
use super::model::upload_nonempty;
use super::{Kernel, VertexCsr};
use crate::gpu::abi::IPC_GATHER_HESSIAN;
use crate::Result;

/// A pair list with its gather CSR and per-pair outputs; see the module docs.
pub struct PairList<T> {
    /// Number of pairs.
    pub n: usize,
    /// The records (at least one entry: a binding cannot be empty).
    pub list: Buf<T>,
    /// Each pair's four position indices, as given (`ipc_pair_hvp` reads them).
    pub stencils: Buf<[u32; 4]>,
    /// CSR row starts (`rows + 2`: the last row collects the entries left out).
    pub offsets: Buf<u32>,
    /// CSR pair ids.
    pub csr_pairs: Buf<u32>,
    /// CSR slots (the vertex's place 0–3 in its pair's stencil).
    pub csr_slot: Buf<u32>,
    /// Per-pair energy (J).
    pub energy: Buf<f32>,
    /// Per-pair corner gradients (4 per pair, N, w = 0).
    pub grad: Buf<GpuVec4>,
}

impl<T: bytemuck::Pod + Default> PairList<T> {
    /// Uploads `list` whose pairs touch the vertices `stencils` (indices into the positions the
    /// kernels read). The CSR has `rows` rows; an entry whose vertex is ≥ `rows` or for which
    /// `keep` is false goes to an extra row no gather reads (pinned vertices, obstacles).
    pub fn new(
        dev: &mut Device,
        label: &str,
        list: &[T],
        stencils: &[[u32; 4]],
        rows: usize,
        keep: impl Fn(u32) -> bool,
    ) -> Result<Self> {
        let mapped: Vec<[u32; 4]> = stencils
            .iter()
            .map(|s| {
                s.map(|v| {
                    if (v as usize) < rows && keep(v) {
                        v
                    } else {
                        rows as u32
                    }
                })
            })
            .collect();
        let csr = VertexCsr::new(&mapped, rows + 1)?;
        let n = list.len();
        Ok(PairList {
            n,
            list: upload_nonempty(dev, label, list)?,
            stencils: upload_nonempty(dev, "contact stencils", stencils)?,
            offsets: dev.upload("contact csr offsets", &csr.offsets)?,
            csr_pairs: upload_nonempty(dev, "contact csr pairs", &csr.tets)?,
            csr_slot: upload_nonempty(dev, "contact csr slots", &csr.local)?,
            energy: dev.alloc("contact pair energies", n.max(1))?,
            grad: dev.alloc("contact pair gradients", 4 * n.max(1))?,
        })
    }

    /// Releases the buffers.
    pub fn free(self, dev: &mut Device) {
        dev.free(self.list);
        dev.free(self.stencils);
        dev.free(self.offsets);
        dev.free(self.csr_pairs);
        dev.free(self.csr_slot);
        dev.free(self.energy);
        dev.free(self.grad);
    }

    /// Records `g[v] += Σ grad[4·pair + slot]` over the first `rows` vertices and, with
    /// `hessian` = (the pairs' 12×12 Hessians, per-vertex blocks), the Hessians' diagonal 3×3
    /// blocks added to the blocks. `unused` binds the Hessian slots without it.
    pub fn record_gather(
        &self,
        plan: &mut Plan,
        hessian: Option<(&Buf<f32>, &Buf<GpuMat3>)>,
        unused: (&Buf<f32>, &Buf<GpuMat3>),
        g: &Buf<GpuVec4>,
        rows: usize,
    ) {
        let ((h, hd), flags) = match hessian {
            Some(h) => (h, IPC_GATHER_HESSIAN),
            None => (unused, 0),
        };
        plan.dispatch(
            Kernel::IpcGather,
            &[
                self.grad.id(),
                h.id(),
                self.offsets.id(),
                self.csr_pairs.id(),
                self.csr_slot.id(),
                g.id(),
                hd.id(),
            ],
            Params::new().u0(flags),
            rows as u32,
        );
    }
}
