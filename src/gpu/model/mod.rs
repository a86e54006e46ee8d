//! A body on a device: its mesh data and the step's start state, uploaded once and shared by
//! every device path (the elastic evaluator, `DeviceBackend`, JGS2/VBD, the multilevel
//! solver's line search).
//!
//! [`DeviceModel`] holds buffer handles on a [`Device`] it borrows (the vello pattern: the
//! caller owns the device, the model owns what it uploaded), so a solver keeps one `Device`
//! and one `DeviceModel` and adds only its own scratch. What lives here is what any kernel
//! that evaluates the body needs:
//!
//! * per element: the tets, Dm⁻¹ and the material record ([`element_records`]);
//! * per vertex: the tet-corner CSR the gathers walk (no float atomics), the lumped mass and
//!   pin flag ([`GpuVertexInfo`]), the characteristic norm's weight 1/c_v;
//! * per step: the start positions x_start and the inertial target x̃ (both relative to the
//!   [`origin`](DeviceModel::origin)) and the step's constants ([`StepConstants`]), written by
//!   [`DeviceModel::begin_step`] from a [`StepProblem`].
//!
//! Positions cross to the device relative to the rest centroid, so F keeps f32 digits for
//! bodies far from the world origin; [`relative`] is the one conversion every path uses.

mod relative;
mod step;

pub use relative::{relative, relative_low, relative_low_one, relative_one};
pub use step::StepConstants;

use super::csr::VertexCsr;
use super::device::{Buf, Device};
use super::evaluator::{element_records, ElasticRest};
use super::layout::{ElemParams, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo};
use crate::problem::{Model, Obstacle};
use crate::{JelloError, Result};

/// A body's device-resident data; see the module docs. Buffers are handles on the device the
/// model was built on ([`DeviceModel::new`]); pass that device to every method.
#[derive(Clone, Debug)]
pub struct DeviceModel {
    /// Vertices.
    pub nv: usize,
    /// Tetrahedra.
    pub ne: usize,
    /// The point device positions are relative to (the rest centroid), m.
    pub origin: [f64; 3],
    /// The characteristic norm's force scale ([`crate::problem::CharacteristicNorm`]), N.
    pub char_scale: f64,
    /// The analytic obstacles, in the model's order (per-vertex contact records follow it).
    pub obstacles: Vec<Obstacle>,
    /// Tetrahedra (vertex indices).
    pub tets: Buf<GpuTet>,
    /// Per element Dm⁻¹, 1/m.
    pub dm_inv: Buf<GpuMat3>,
    /// Per element material (μ, λ in Pa), rest volume (m³) and model id.
    pub elem: Buf<ElemParams>,
    /// Vertex → (tet, corner) CSR: offsets (nv + 1).
    pub offsets: Buf<u32>,
    /// Vertex → (tet, corner) CSR: tets (at least one entry).
    pub csr_tets: Buf<u32>,
    /// Vertex → (tet, corner) CSR: corners (at least one entry).
    pub csr_local: Buf<u32>,
    /// Per vertex lumped mass (kg) and whether it is free (not pinned).
    pub vinfo: Buf<GpuVertexInfo>,
    /// Per vertex weight 1/c_v of the characteristic norm, 1/Pa (1 without one).
    pub res_weight: Buf<f32>,
    /// The step's start positions, relative to `origin` (m).
    pub x_start: Buf<GpuVec4>,
    /// The step's inertial target x̃, relative to `origin` (m).
    pub x_tilde: Buf<GpuVec4>,
    /// The constants of the step last begun.
    pub step: StepConstants,
}

/// Uploads `data`, or one default element when it is empty (a storage binding cannot be
/// empty).
pub fn upload_nonempty<T: bytemuck::Pod + Default>(
    dev: &mut Device,
    label: &str,
    data: &[T],
) -> Result<Buf<T>> {
    if data.is_empty() {
        dev.upload(label, &[T::default()])
    } else {
        dev.upload(label, data)
    }
}

impl DeviceModel {
    /// Uploads `model`'s mesh data to `dev` and allocates the step buffers. Errors on an
    /// empty mesh, one too large for u32 indices, or degenerate rest shapes.
    pub fn new(dev: &mut Device, model: &Model) -> Result<Self> {
        let nv = model.num_vertices();
        let rest = ElasticRest::from_model(model);
        let vinfo: Vec<GpuVertexInfo> = (0..nv)
            .map(|v| GpuVertexInfo {
                mass: model.mass[v] as f32,
                free: (!model.pinned[v]) as u32,
            })
            .collect();
        let res_weight: Vec<f32> = if model.char_norm.inv_c.len() == nv {
            model.char_norm.inv_c.iter().map(|&w| w as f32).collect()
        } else {
            vec![1.0; nv]
        };
        let mut m = Self::upload(dev, &rest, &vinfo, &res_weight)?;
        m.char_scale = model.char_norm.scale;
        m.obstacles = model.obstacles.clone();
        m.step = StepConstants::of_model(model);
        Ok(m)
    }

    /// Uploads a bare elastic body (no pins, no obstacles, unit residual weights): what the
    /// [`super::ElasticEvaluator`] evaluates.
    pub fn from_rest(dev: &mut Device, rest: &ElasticRest<'_>) -> Result<Self> {
        let (ne, nv) = (rest.tets.len(), rest.num_vertices);
        if rest.rest.len() != ne || rest.materials.len() != ne {
            return Err(JelloError::Invalid(format!(
                "evaluator: {ne} tets but {} rest records and {} materials",
                rest.rest.len(),
                rest.materials.len()
            )));
        }
        if rest.masses.len() != nv {
            return Err(JelloError::Invalid(format!(
                "evaluator: {nv} vertices but {} masses",
                rest.masses.len()
            )));
        }
        let vinfo: Vec<GpuVertexInfo> = rest
            .masses
            .iter()
            .map(|&m| GpuVertexInfo {
                mass: m as f32,
                free: 1,
            })
            .collect();
        Self::upload(dev, rest, &vinfo, &vec![1.0; nv])
    }

    fn upload(
        dev: &mut Device,
        rest: &ElasticRest<'_>,
        vinfo: &[GpuVertexInfo],
        res_weight: &[f32],
    ) -> Result<Self> {
        let (ne, nv) = (rest.tets.len(), rest.num_vertices);
        if nv == 0 || ne == 0 || ne > (u32::MAX / 4) as usize || nv > u32::MAX as usize {
            return Err(JelloError::Invalid(format!(
                "device model: a mesh of {nv} vertices and {ne} tets cannot be uploaded \
                 (empty, or too large for u32 indices)"
            )));
        }
        let csr = VertexCsr::new(rest.tets, nv)?;
        let (dm, ep) = element_records(rest.rest, rest.materials)?;
        Ok(DeviceModel {
            nv,
            ne,
            origin: rest.origin,
            char_scale: 1.0,
            obstacles: Vec::new(),
            tets: dev.upload("tets", rest.tets)?,
            dm_inv: dev.upload("Dm^-1", &dm)?,
            elem: dev.upload("element params", &ep)?,
            offsets: dev.upload("csr offsets", &csr.offsets)?,
            csr_tets: upload_nonempty(dev, "csr tets", &csr.tets)?,
            csr_local: upload_nonempty(dev, "csr local", &csr.local)?,
            vinfo: dev.upload("vertex info", vinfo)?,
            res_weight: dev.upload("residual weights", res_weight)?,
            x_start: dev.alloc("step start", nv)?,
            x_tilde: dev.alloc("inertial target", nv)?,
            step: StepConstants::default(),
        })
    }

    /// Whether this was built for a model of `model`'s size (same vertex and tet counts).
    pub fn fits(&self, model: &Model) -> bool {
        self.nv == model.num_vertices() && self.ne == model.mesh.num_tets()
    }

    /// Per-vertex obstacle records per vertex (at least one: [`GpuContact::none`] without
    /// obstacles).
    ///
    /// [`GpuContact::none`]: super::layout::GpuContact::none
    pub fn contacts_per_vertex(&self) -> usize {
        self.obstacles.len().max(1)
    }

    /// `x` (flat, m) as device positions relative to the origin.
    pub fn relative(&self, x: &[f64]) -> Vec<GpuVec4> {
        relative(x, self.origin)
    }

    /// Frees the buffers on `dev`.
    pub fn free(self, dev: &mut Device) {
        dev.free(self.tets);
        dev.free(self.dm_inv);
        dev.free(self.elem);
        dev.free(self.offsets);
        dev.free(self.csr_tets);
        dev.free(self.csr_local);
        dev.free(self.vinfo);
        dev.free(self.res_weight);
        dev.free(self.x_start);
        dev.free(self.x_tilde);
    }
}
