//! Drawing a soft body straight from jello's device position buffer.
//!
//! For a body whose solver keeps jello's device position buffer current (Newton with its element
//! work on Bevy's device: [`jello::problem::DeviceElastic`]), a compute pass in Bevy's render
//! world writes the surface's positions and normals into the very vertex buffer (Bevy's mesh
//! slab) that the PBR pipeline draws the body's `Mesh` from. The CPU reads no positions and
//! Bevy uploads no mesh per frame; what the CPU still sends is the solver's own upload of the
//! step's result into jello's buffer (`DeviceElastic::sync_positions`, 16 bytes per tet-mesh
//! vertex per step), since Newton keeps its state in f64 on the host.
//!
//! How: the plugin asks Bevy's mesh allocator for STORAGE usage on vertex slabs
//! (`MeshAllocatorSettings::extra_buffer_usages`), so the slab can be bound read-write in a
//! compute shader (`shaders/surface.wgsl`). Every render frame, after Bevy has placed meshes
//! (`RenderSystems::PrepareResources`, after `PrepareAssets`), each such body's mesh slice is
//! looked up and rewritten; the submission precedes the frame's render graph on the same queue,
//! so the frame draws this step's shape. Rewriting every frame (not only after a step) also
//! covers a slab that grew and moved the mesh. The `Mesh` asset itself keeps its rest shape and
//! is never changed, so Bevy never re-uploads it over the written data; its bounds are the rest
//! shape's, so bodies carry `NoFrustumCulling`.

use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshAllocator;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::Extract;
use wgpu::util::DeviceExt;

use crate::surface::Surface;

/// One body's surface on the GPU: jello's position buffer and the static data the shader
/// needs.
#[derive(Clone)]
pub(crate) struct GpuSurface {
    /// The mesh whose vertex slab is written.
    pub mesh: AssetId<Mesh>,
    /// jello's device positions (`array<vec4<f32>>`, relative to `origin`).
    pub positions: wgpu::Buffer,
    /// The point jello's positions are relative to, m.
    pub origin: [f32; 3],
    /// Surface vertices.
    pub count: u32,
    vertex_map: wgpu::Buffer,
    adjacency_start: wgpu::Buffer,
    adjacency: wgpu::Buffer,
    triangles: wgpu::Buffer,
}

impl GpuSurface {
    /// Uploads `surface`'s static data (once per body).
    pub fn new(
        device: &wgpu::Device,
        surface: &Surface,
        mesh: AssetId<Mesh>,
        positions: wgpu::Buffer,
        origin: [f64; 3],
    ) -> Self {
        let n = surface.vertices.len();
        let mut start = vec![0u32; n + 1];
        for t in &surface.triangles {
            for &v in t {
                start[v as usize + 1] += 1;
            }
        }
        for s in 0..n {
            start[s + 1] += start[s];
        }
        let mut fill = start.clone();
        let mut adjacency = vec![0u32; 3 * surface.triangles.len()];
        for (i, t) in surface.triangles.iter().enumerate() {
            for &v in t {
                adjacency[fill[v as usize] as usize] = i as u32;
                fill[v as usize] += 1;
            }
        }
        let storage = |label: &str, data: &[u32]| {
            // wgpu refuses zero-sized storage bindings.
            let data = if data.is_empty() { &[0u32][..] } else { data };
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::STORAGE,
            })
        };
        GpuSurface {
            mesh,
            positions,
            origin: origin.map(|o| o as f32),
            count: n as u32,
            vertex_map: storage("jello surface vertex map", &surface.vertices),
            adjacency_start: storage("jello surface adjacency start", &start),
            adjacency: storage("jello surface adjacency", &adjacency),
            triangles: storage("jello surface triangles", &surface.triangles.concat()),
        }
    }
}

/// Every GPU-drawn body's surface, by entity (main world; extracted to the render world).
#[derive(Resource, Clone, Default)]
pub(crate) struct GpuSurfaces(pub HashMap<Entity, GpuSurface>);

/// Copies the main world's [`GpuSurfaces`] into the render world when it changed.
pub(crate) fn extract_surfaces(mut commands: Commands, surfaces: Extract<Res<GpuSurfaces>>) {
    if surfaces.is_changed() {
        commands.insert_resource(GpuSurfaces::clone(&surfaces));
    }
}

/// The compute pipeline of `shaders/surface.wgsl`, built on first use.
pub(crate) struct SurfacePipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

impl SurfacePipeline {
    fn new(device: &wgpu::Device) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("jello surface"),
            source: wgpu::ShaderSource::Wgsl(include_str!("shaders/surface.wgsl").into()),
        });
        let entry = |binding: u32, ty: wgpu::BufferBindingType| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let read = wgpu::BufferBindingType::Storage { read_only: true };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("jello surface"),
            entries: &[
                entry(0, wgpu::BufferBindingType::Uniform),
                entry(1, read),
                entry(2, read),
                entry(3, read),
                entry(4, read),
                entry(5, read),
                entry(6, wgpu::BufferBindingType::Storage { read_only: false }),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("jello surface"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("jello surface"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        SurfacePipeline { pipeline, layout }
    }
}

/// A bind group entry of a whole buffer.
fn bind(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: buffer.as_entire_binding(),
    }
}

/// Writes every GPU-drawn body's surface into its mesh's vertex slab (render world,
/// `RenderSystems::PrepareResources`).
pub(crate) fn write_surfaces(
    surfaces: Option<Res<GpuSurfaces>>,
    allocator: Res<MeshAllocator>,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    mut pipeline: Local<Option<SurfacePipeline>>,
) {
    let Some(surfaces) = surfaces else {
        return;
    };
    if surfaces.0.is_empty() {
        return;
    }
    let device = device.wgpu_device();
    let pipeline = pipeline.get_or_insert_with(|| SurfacePipeline::new(device));
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("jello surfaces"),
    });
    let mut any = false;
    for s in surfaces.0.values() {
        // Not placed yet (the mesh is extracted the frame after it is added).
        let Some(slice) = allocator.mesh_vertex_slice(&s.mesh) else {
            continue;
        };
        let slab: &wgpu::Buffer = slice.buffer;
        let mut params = [0u8; 32];
        params[0..4].copy_from_slice(&(6 * slice.range.start).to_le_bytes());
        params[4..8].copy_from_slice(&s.count.to_le_bytes());
        for k in 0..3 {
            params[16 + 4 * k..20 + 4 * k].copy_from_slice(&s.origin[k].to_le_bytes());
        }
        let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("jello surface params"),
            contents: &params,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("jello surface"),
            layout: &pipeline.layout,
            entries: &[
                bind(0, &uniform),
                bind(1, &s.positions),
                bind(2, &s.vertex_map),
                bind(3, &s.adjacency_start),
                bind(4, &s.adjacency),
                bind(5, &s.triangles),
                bind(6, slab),
            ],
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("jello surface"),
            timestamp_writes: None,
        });
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(s.count.div_ceil(64), 1, 1);
        any = true;
    }
    if any {
        queue.submit([encoder.finish()]);
    }
}
