//! Uploading CPU-side surfaces into buffers laid out the way the renderer reads them, for
//! callers that do not already hold the positions on the GPU (CLI frame output, tests).

use super::surface::SurfaceDraw;
use crate::error::{JelloError, Result};
use crate::mesh::{surface, TetMesh};
use wgpu::util::DeviceExt;

/// Converts f64 xyz positions (m) to the renderer's `vec4<f32>` layout (w = 1).
pub fn positions_to_vec4(positions: &[[f64; 3]]) -> Vec<[f32; 4]> {
    positions
        .iter()
        .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 1.0])
        .collect()
}

/// Checks a CPU surface before upload: finite positions, indices in range.
pub fn validate_surface(positions: &[[f32; 4]], triangles: &[[u32; 3]]) -> Result<()> {
    if let Some(i) = positions
        .iter()
        .position(|p| !p[..3].iter().all(|c| c.is_finite()))
    {
        return Err(JelloError::Invalid(format!(
            "render: position {i} is not finite: {:?}",
            positions[i]
        )));
    }
    let n = positions.len();
    if let Some((t, tri)) = triangles
        .iter()
        .enumerate()
        .find(|(_, tri)| tri.iter().any(|&v| v as usize >= n))
    {
        return Err(JelloError::Invalid(format!(
            "render: triangle {t} {tri:?} references a vertex outside 0..{n}"
        )));
    }
    Ok(())
}

/// A surface held in GPU buffers with the usages the simulation's own buffers have
/// (positions: VERTEX | STORAGE | COPY_SRC | COPY_DST; indices: INDEX | COPY_DST).
pub struct SurfaceMesh {
    positions: wgpu::Buffer,
    indices: wgpu::Buffer,
    vertex_count: u32,
    index_count: u32,
}

impl SurfaceMesh {
    /// Uploads positions (xyzw, w ignored, m) and outward-oriented triangles.
    pub fn new(
        device: &wgpu::Device,
        positions: &[[f32; 4]],
        triangles: &[[u32; 3]],
    ) -> Result<Self> {
        validate_surface(positions, triangles)?;
        let too_big = |what: &str| JelloError::Invalid(format!("render: too many {what}"));
        let vertex_count = u32::try_from(positions.len()).map_err(|_| too_big("vertices"))?;
        let index_count = u32::try_from(triangles.len() * 3).map_err(|_| too_big("triangles"))?;
        // Zero-sized buffers are legal but cannot be bound; keep one dummy element instead.
        let pos_bytes: &[u8] = if positions.is_empty() {
            &[0u8; 16]
        } else {
            bytemuck::cast_slice(positions)
        };
        let idx_bytes: &[u8] = if triangles.is_empty() {
            &[0u8; 12]
        } else {
            bytemuck::cast_slice(triangles)
        };
        let positions = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("jello surface positions"),
            contents: pos_bytes,
            usage: wgpu::BufferUsages::VERTEX
                | wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
        });
        let indices = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("jello surface indices"),
            contents: idx_bytes,
            usage: wgpu::BufferUsages::INDEX | wgpu::BufferUsages::COPY_DST,
        });
        Ok(SurfaceMesh {
            positions,
            indices,
            vertex_count,
            index_count,
        })
    }

    /// Uploads every vertex of a tet mesh (f64 → f32) with its outward boundary triangles
    /// ([`crate::mesh::surface`]), the layout a simulation's position buffer has.
    pub fn from_tet_mesh(device: &wgpu::Device, mesh: &TetMesh) -> Result<Self> {
        let positions = positions_to_vec4(&mesh.positions);
        Self::new(device, &positions, &surface(mesh).triangles)
    }

    /// Replaces all vertex positions (same count as at creation), e.g. with a new frame.
    pub fn write_positions(&self, queue: &wgpu::Queue, positions: &[[f32; 4]]) -> Result<()> {
        if positions.len() != self.vertex_count as usize {
            return Err(JelloError::Invalid(format!(
                "render: surface has {} vertices, got {} positions",
                self.vertex_count,
                positions.len()
            )));
        }
        if positions.is_empty() {
            return Ok(());
        }
        validate_surface(positions, &[])?;
        queue.write_buffer(&self.positions, 0, bytemuck::cast_slice(positions));
        Ok(())
    }

    /// The position buffer (`array<vec4<f32>>`).
    pub fn positions(&self) -> &wgpu::Buffer {
        &self.positions
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> u32 {
        self.vertex_count
    }

    /// Number of indices (3 × triangles).
    pub fn index_count(&self) -> u32 {
        self.index_count
    }

    /// A draw of this surface in `colour` (sRGB).
    pub fn draw(&self, colour: [f32; 3]) -> SurfaceDraw<'_> {
        SurfaceDraw {
            positions: &self.positions,
            indices: &self.indices,
            index_count: self.index_count,
            colour,
        }
    }
}
