//! The IPC broad phase on a device: the point–triangle and edge–edge candidate pairs of a
//! [`CollisionMesh`] found by kernels from device positions, into a device pair list of
//! [`GpuPair`] records that the per-pair kernels (`ipc_pairs`, `ipc_ccd`, …) read directly — the
//! list [`crate::contact::IpcContact`]'s candidate queries compute on the host (a superset of
//! it: the boxes are rounded outward), without uploading it every step.
//!
//! **Use.** [`DeviceBroadPhase::new`] uploads the mesh's topology once (primitive records with
//! their bodies, edge rest lengths for the edge–edge mollifier threshold). Each query records
//! four kernels and two reductions ([`DeviceBroadPhase::record`]) into the caller's plan, then
//! reads one small counter buffer ([`DeviceBroadPhase::read_count`], one readback): the pair
//! count, and whether the grid's entries or the pairs overflowed their capacity. On overflow
//! [`DeviceBroadPhase::grow`] reallocates to the counts and the query is recorded again (the
//! buffer ids change, so a plan recorded before is stale); [`DeviceBroadPhase::find`] does all of
//! that. The algorithm, its rounding margin and its capacity rules are documented with the
//! kernels' twins, [`crate::gpu::twins::broad`].
//!
//! **Positions** are the collision routines' array ([`CollisionMesh::positions`]: the model's
//! vertices, then the obstacles'), f32 in metres relative to the caller's origin, one `vec4`
//! each (w unused) — `DeviceIpc::xc`'s layout; displacements likewise.

use super::device::{Buf, Device, Plan};
use super::layout::{GpuPair, GpuVec4, Params};
use super::model::upload_nonempty;
use super::twins::broad::{
    BROAD_SWEPT, COUNTERS, COUNT_ENTRIES, COUNT_PAIRS, OBSTACLE, SELF_CONTACT,
};
use super::Kernel;
use crate::contact::{BodyKind, CollisionMesh};
use crate::{JelloError, Result};

/// Grid entries per inserted primitive at first (a box spans about 8 cells at the default cell
/// size; fewer at rest).
const ENTRIES_PER_PRIMITIVE: usize = 8;
/// Pairs per query primitive at first.
const PAIRS_PER_PRIMITIVE: usize = 2;
/// Attempts of [`DeviceBroadPhase::find`] (each growth is to the counts, so a second run fits
/// unless the entries overflowed and hid pairs: then a third does).
const ATTEMPTS: usize = 4;

/// The counts of the last query ([`DeviceBroadPhase::read_count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BroadCount {
    /// Candidate pairs found (may exceed `pair_capacity`: then only that many were written).
    pub pairs: usize,
    /// Pairs the list holds.
    pub pair_capacity: usize,
    /// Grid entries the query needed (exact even on overflow).
    pub entries: usize,
    /// Grid entries the buffer holds (past it, primitives were left out of the grid and pairs
    /// may be missing: `pairs` is then a lower bound).
    pub entry_capacity: usize,
}

impl BroadCount {
    /// Whether the list is incomplete (pairs or grid entries past their capacity).
    pub fn overflowed(&self) -> bool {
        self.pairs > self.pair_capacity || self.entries > self.entry_capacity
    }
}

/// A device broad phase over one collision mesh (see the module docs).
pub struct DeviceBroadPhase {
    /// Faces, edges, surface vertices, collision vertices.
    nf: usize,
    ne: usize,
    nv: usize,
    n_coll: usize,
    /// Buckets per grid (a power of two).
    table: usize,
    /// Primitive records: faces, edges, vertices (`twins::broad`).
    prims: Buf<[u32; 4]>,
    /// Rest length² of each edge, m².
    len2: Buf<f32>,
    /// Two vec4 (lo, hi) per primitive, m.
    boxes: Buf<GpuVec4>,
    /// Largest box side per primitive, m.
    side: Buf<f32>,
    /// The edges' sides, copied to the start of a buffer for their sum.
    side_edges: Buf<f32>,
    /// Σ face sides, Σ edge sides (m), 1/h of the two grids (m⁻¹).
    sums: Buf<f32>,
    /// 2T bucket heads, then the large-face list.
    heads: Buf<u32>,
    /// Grid entries (prim, cell key, next).
    entries: Buf<[u32; 4]>,
    /// Pairs found, entries reserved, large faces, unused.
    counters: Buf<u32>,
    /// The candidate pairs.
    pairs: Buf<GpuPair>,
    /// Bound as the displacements of a query that is not swept.
    no_motion: Buf<GpuVec4>,
}

/// A primitive's body bits (`twins::broad`).
fn body_bits(mesh: &CollisionMesh, b: u32) -> u32 {
    let body = &mesh.bodies[b as usize];
    let mut bits = b;
    if body.kind == BodyKind::Obstacle {
        bits |= OBSTACLE;
    }
    if body.self_contact {
        bits |= SELF_CONTACT;
    }
    bits
}

impl DeviceBroadPhase {
    /// Uploads `mesh`'s primitives with default initial capacities (grown on demand).
    pub fn new(dev: &mut Device, mesh: &CollisionMesh) -> Result<Self> {
        let (nf, ne, nv) = (mesh.faces.len(), mesh.edges.len(), mesh.vertices.len());
        Self::with_capacity(
            dev,
            mesh,
            PAIRS_PER_PRIMITIVE * (ne + nv),
            ENTRIES_PER_PRIMITIVE * (nf + ne),
        )
    }

    /// [`Self::new`] with initial capacities of `pairs` pairs and `entries` grid entries (at
    /// least 1 each).
    pub fn with_capacity(
        dev: &mut Device,
        mesh: &CollisionMesh,
        pairs: usize,
        entries: usize,
    ) -> Result<Self> {
        let (nf, ne, nv) = (mesh.faces.len(), mesh.edges.len(), mesh.vertices.len());
        let n = nf + ne + nv;
        if mesh.bodies.len() > (super::twins::broad::BODY_MASK as usize) + 1
            || n > u32::MAX as usize / 4
        {
            return Err(JelloError::Invalid(format!(
                "device broad phase: {} bodies and {n} primitives are more than it can address",
                mesh.bodies.len()
            )));
        }
        let mut prims = Vec::with_capacity(n);
        for (f, &b) in mesh.faces.iter().zip(&mesh.face_body) {
            prims.push([f[0], f[1], f[2], body_bits(mesh, b)]);
        }
        for (e, &b) in mesh.edges.iter().zip(&mesh.edge_body) {
            prims.push([e[0], e[1], e[1], body_bits(mesh, b)]);
        }
        for (&v, &b) in mesh.vertices.iter().zip(&mesh.vertex_body) {
            prims.push([v, v, v, body_bits(mesh, b)]);
        }
        let len2: Vec<f32> = mesh
            .edge_rest_length
            .iter()
            .map(|l| (l * l) as f32)
            .collect();
        let table = (2 * (nf + ne)).max(1024).next_power_of_two();
        Ok(DeviceBroadPhase {
            nf,
            ne,
            nv,
            n_coll: mesh.num_vertices(),
            table,
            prims: upload_nonempty(dev, "broad-phase primitives", &prims)?,
            len2: upload_nonempty(dev, "broad-phase edge rest lengths²", &len2)?,
            boxes: dev.alloc("broad-phase boxes", (2 * n).max(1))?,
            side: dev.alloc("broad-phase box sides", n.max(1))?,
            side_edges: dev.alloc("broad-phase edge box sides", ne.max(1))?,
            sums: dev.alloc("broad-phase cell sizes", 4)?,
            heads: dev.alloc("broad-phase bucket heads", 2 * table + nf)?,
            entries: dev.alloc("broad-phase grid entries", entries.max(1))?,
            counters: dev.alloc("broad-phase counters", COUNTERS)?,
            pairs: dev.alloc("broad-phase pairs", pairs.max(1))?,
            no_motion: dev.alloc("broad-phase no motion", 1)?,
        })
    }

    /// Records the query into `plan`: every pair whose boxes at `positions` (m, f32 relative to
    /// the caller's origin, [`CollisionMesh::num_vertices`] of them; module docs), swept to
    /// `positions + displacements` when given, grown by `inflation/2` (m, finite, ≥ 0) on every
    /// side and rounded outward, overlap — the pairs closer than `inflation` (or coming closer
    /// along the sweep) — minus the ones [`crate::contact::broad::candidates`] excludes. The
    /// pairs land in [`Self::pairs`]; their number in [`Self::read_count`] after the plan ran.
    pub fn record(
        &self,
        plan: &mut Plan,
        positions: &Buf<GpuVec4>,
        displacements: Option<&Buf<GpuVec4>>,
        inflation: f64,
    ) -> Result<()> {
        if !(inflation.is_finite() && inflation >= 0.0) {
            return Err(JelloError::Invalid(format!(
                "device broad phase: the inflation must be finite and ≥ 0 m, got {inflation}"
            )));
        }
        for (what, b) in [
            ("positions", Some(positions)),
            ("displacements", displacements),
        ] {
            if let Some(b) = b {
                if b.len() < self.n_coll {
                    return Err(JelloError::Invalid(format!(
                        "device broad phase: {} {what} for {} collision vertices",
                        b.len(),
                        self.n_coll
                    )));
                }
            }
        }
        let (nf, ne, nv) = (self.nf, self.ne, self.nv);
        let counts = Params {
            u0: nf as u32,
            u1: ne as u32,
            ..Params::new()
        };
        let boxes = Params {
            u0: if displacements.is_some() {
                BROAD_SWEPT
            } else {
                0
            },
            // The f32 rounding of r is within the boxes' slack (twins::broad).
            f0: (0.5 * inflation) as f32,
            ..Params::new()
        };
        plan.dispatch(
            Kernel::BroadBoxes,
            &[
                self.prims.id(),
                positions.id(),
                displacements.unwrap_or(&self.no_motion).id(),
                self.boxes.id(),
                self.side.id(),
            ],
            boxes,
            (nf + ne + nv) as u32,
        );
        if nf > 0 {
            plan.sum(&self.side, nf as u32, &self.sums, 0);
        }
        if ne > 0 {
            plan.copy(&self.side, nf, &self.side_edges, 0, ne);
            plan.sum(&self.side_edges, ne as u32, &self.sums, 1);
        }
        plan.dispatch(
            Kernel::BroadClear,
            &[self.sums.id(), self.heads.id(), self.counters.id()],
            counts,
            (2 * self.table) as u32,
        );
        plan.dispatch(
            Kernel::BroadInsert,
            &[
                self.boxes.id(),
                self.sums.id(),
                self.heads.id(),
                self.entries.id(),
                self.counters.id(),
            ],
            counts,
            (nf + ne) as u32,
        );
        plan.dispatch(
            Kernel::BroadQuery,
            &[
                self.prims.id(),
                self.boxes.id(),
                self.sums.id(),
                self.heads.id(),
                self.entries.id(),
                self.len2.id(),
                self.pairs.id(),
                self.counters.id(),
            ],
            counts,
            (ne + nv) as u32,
        );
        Ok(())
    }

    /// The counts of the last query that ran (one readback of two words; waits for the device).
    pub fn read_count(&self, dev: &mut Device) -> Result<BroadCount> {
        let c = dev.read_range(&self.counters, COUNT_PAIRS..COUNT_ENTRIES + 1)?;
        Ok(BroadCount {
            pairs: c[COUNT_PAIRS] as usize,
            pair_capacity: self.pairs.len(),
            entries: c[COUNT_ENTRIES] as usize,
            entry_capacity: self.entries.len(),
        })
    }

    /// Grows the buffers that `count` overflowed to its counts plus a quarter (room for the
    /// next steps); true when something was reallocated — record the query again (the old
    /// plan names the freed buffers).
    pub fn grow(&mut self, dev: &mut Device, count: &BroadCount) -> Result<bool> {
        let mut grew = false;
        if count.entries > self.entries.len() {
            let n = count.entries + count.entries / 4;
            let old =
                std::mem::replace(&mut self.entries, dev.alloc("broad-phase grid entries", n)?);
            dev.free(old);
            grew = true;
        }
        if count.pairs > self.pairs.len() {
            let n = count.pairs + count.pairs / 4;
            let old = std::mem::replace(&mut self.pairs, dev.alloc("broad-phase pairs", n)?);
            dev.free(old);
            grew = true;
        }
        Ok(grew)
    }

    /// Runs the query of [`Self::record`] now, growing and running again until the list is
    /// complete; the number of pairs in [`Self::pairs`].
    pub fn find(
        &mut self,
        dev: &mut Device,
        positions: &Buf<GpuVec4>,
        displacements: Option<&Buf<GpuVec4>>,
        inflation: f64,
    ) -> Result<usize> {
        for _ in 0..ATTEMPTS {
            let mut plan = Plan::new();
            self.record(&mut plan, positions, displacements, inflation)?;
            dev.submit(&plan)?;
            let count = self.read_count(dev)?;
            if !count.overflowed() {
                return Ok(count.pairs);
            }
            self.grow(dev, &count)?;
        }
        Err(JelloError::Invalid(format!(
            "device broad phase: the pair list still overflowed after {ATTEMPTS} attempts"
        )))
    }

    /// The candidate pairs (the first [`BroadCount::pairs`] are valid, in no defined order;
    /// collision vertex ids as [`crate::contact::ContactPair::ids`]).
    pub fn pairs(&self) -> &Buf<GpuPair> {
        &self.pairs
    }

    /// The counter words (`twins::broad::COUNT_*`), for a kernel that reads the pair count on
    /// the device.
    pub fn counters(&self) -> &Buf<u32> {
        &self.counters
    }

    /// Releases the buffers.
    pub fn free(self, dev: &mut Device) {
        for b in [self.side, self.side_edges, self.sums, self.len2] {
            dev.free(b);
        }
        dev.free(self.prims);
        dev.free(self.boxes);
        dev.free(self.heads);
        dev.free(self.entries);
        dev.free(self.counters);
        dev.free(self.pairs);
        dev.free(self.no_motion);
    }
}
