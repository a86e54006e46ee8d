//! Offscreen renderer for deformed surfaces, drawing straight from the simulation's position
//! buffers (no CPU copy, no normal buffer).

use super::camera::Camera;
use super::image::RgbaImage;
use super::lighting::FrameParams;
use super::style::{srgb3_to_linear, GroundPlane, RenderStyle};
use crate::error::{JelloError, Result};
use bytemuck::{Pod, Zeroable};
use glam::Vec3;
use std::time::Duration;
use wgpu::util::DeviceExt;

/// Colour target format: 8-bit sRGB, so shading happens in linear space and read-back bytes
/// are ready for a PNG.
pub const COLOUR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8UnormSrgb;
/// Depth target format.
pub const DEPTH_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;
/// Bytes per vertex of a position buffer: one `vec4<f32>` (xyz in metres, w unused).
pub const POSITION_STRIDE: u64 = 16;
/// Most surfaces one [`SurfaceRenderer::record`] call accepts (each takes a 256-byte uniform
/// slot addressed by a `u32` dynamic offset).
pub const MAX_DRAWS: usize = 65536;
/// How long [`SurfaceRenderer::read_rgba`] waits for the GPU before giving up.
pub const READBACK_TIMEOUT: Duration = Duration::from_secs(30);

/// One surface to draw: vertex positions and outward-oriented triangles, both owned by the
/// caller (typically the simulation's live buffers).
#[derive(Clone, Copy, Debug)]
pub struct SurfaceDraw<'a> {
    /// `array<vec4<f32>>` positions (xyz in metres, w unused), 16-byte stride; needs
    /// `BufferUsages::VERTEX` (the simulation creates it STORAGE | VERTEX | COPY_SRC | COPY_DST).
    pub positions: &'a wgpu::Buffer,
    /// `u32` vertex indices, three per triangle; needs `BufferUsages::INDEX`.
    pub indices: &'a wgpu::Buffer,
    /// Number of indices to draw (3 × triangles), from the start of `indices`.
    pub index_count: u32,
    /// Base colour of the body (sRGB, [0, 1] per channel).
    pub colour: [f32; 3],
}

/// Per-frame uniforms; layout mirrors `Frame` in `surface.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct FrameUniform {
    view_proj: [[f32; 4]; 4],
    eye: [f32; 4],
    key_dir: [f32; 4],
    fill_dir: [f32; 4],
    up: [f32; 4],
    background: [f32; 4],
    ground_centre: [f32; 4],
    ground_u: [f32; 4],
    ground_v: [f32; 4],
}

/// Per-draw uniforms; layout mirrors `Draw` in `surface.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DrawUniform {
    colour: [f32; 4],
    params: [f32; 4],
}

/// Offscreen flat-shaded surface renderer: a colour target (sRGB RGBA8, optionally 4× MSAA
/// resolved into a single-sample texture) and a depth target of a fixed size. Borrows the
/// caller's `wgpu::Device`/`Queue` per call and never owns them.
///
/// Typical use per frame: [`SurfaceRenderer::record`] into the caller's encoder, submit, then
/// [`SurfaceRenderer::read_rgba`] (or sample [`SurfaceRenderer::colour_texture`] directly).
pub struct SurfaceRenderer {
    size: (u32, u32),
    samples: u32,
    body_pipeline: wgpu::RenderPipeline,
    ground_pipeline: wgpu::RenderPipeline,
    bind_group_layout: wgpu::BindGroupLayout,
    /// Multisampled colour target (absent when `samples == 1`).
    msaa_colour: Option<wgpu::TextureView>,
    /// Single-sample colour texture holding the final image (resolve target or direct target).
    colour: wgpu::Texture,
    colour_view: wgpu::TextureView,
    depth_view: wgpu::TextureView,
    /// Distance between per-draw uniform slots (≥ the device's uniform offset alignment).
    draw_stride: u64,
    style: RenderStyle,
    ground: Option<GroundPlane>,
}

impl SurfaceRenderer {
    /// A renderer with 4× MSAA for `size = (width, height)` pixels.
    pub fn new(device: &wgpu::Device, size: (u32, u32)) -> Result<Self> {
        Self::with_samples(device, size, 4)
    }

    /// A renderer with `samples` ∈ {1, 4} samples per pixel (WebGPU guarantees both for the
    /// formats used here).
    pub fn with_samples(device: &wgpu::Device, size: (u32, u32), samples: u32) -> Result<Self> {
        let (w, h) = size;
        let max = device.limits().max_texture_dimension_2d;
        if w == 0 || h == 0 || w > max || h > max {
            return Err(JelloError::Invalid(format!(
                "render: image size {w}×{h} must be within 1..={max} on each side"
            )));
        }
        if samples != 1 && samples != 4 {
            return Err(JelloError::Invalid(format!(
                "render: sample count must be 1 or 4, got {samples}"
            )));
        }
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("jello surface shader"),
            source: wgpu::ShaderSource::Wgsl(include_str!("surface.wgsl").into()),
        });
        let uniform_entry = |binding, dynamic, size: usize| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: dynamic,
                min_binding_size: wgpu::BufferSize::new(size as u64),
            },
            count: None,
        };
        let bind_group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("jello surface uniforms"),
            entries: &[
                uniform_entry(0, false, std::mem::size_of::<FrameUniform>()),
                uniform_entry(1, true, std::mem::size_of::<DrawUniform>()),
            ],
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("jello surface pipeline layout"),
            bind_group_layouts: &[Some(&bind_group_layout)],
            immediate_size: 0,
        });
        let make_pipeline = |label, bias: wgpu::DepthBiasState| {
            device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some(label),
                layout: Some(&layout),
                vertex: wgpu::VertexState {
                    module: &shader,
                    entry_point: Some("vs_main"),
                    compilation_options: Default::default(),
                    buffers: &[Some(wgpu::VertexBufferLayout {
                        array_stride: POSITION_STRIDE,
                        step_mode: wgpu::VertexStepMode::Vertex,
                        attributes: &[wgpu::VertexAttribute {
                            format: wgpu::VertexFormat::Float32x4,
                            offset: 0,
                            shader_location: 0,
                        }],
                    })],
                },
                primitive: wgpu::PrimitiveState {
                    topology: wgpu::PrimitiveTopology::TriangleList,
                    // Two-sided: the shader flips normals towards the viewer, so either winding
                    // (and open or inverted surfaces mid-simulation) renders correctly.
                    cull_mode: None,
                    ..Default::default()
                },
                depth_stencil: Some(wgpu::DepthStencilState {
                    format: DEPTH_FORMAT,
                    depth_write_enabled: Some(true),
                    depth_compare: Some(wgpu::CompareFunction::Less),
                    stencil: Default::default(),
                    bias,
                }),
                multisample: wgpu::MultisampleState {
                    count: samples,
                    ..Default::default()
                },
                fragment: Some(wgpu::FragmentState {
                    module: &shader,
                    entry_point: Some("fs_main"),
                    compilation_options: Default::default(),
                    targets: &[Some(COLOUR_FORMAT.into())],
                }),
                multiview_mask: None,
                cache: None,
            })
        };
        let body_pipeline = make_pipeline("jello surface bodies", Default::default());
        // Push the ground slightly back so bodies resting exactly on it win the depth test.
        let ground_pipeline = make_pipeline(
            "jello surface ground",
            wgpu::DepthBiasState {
                constant: 16,
                slope_scale: 2.0,
                clamp: 0.0,
            },
        );

        let extent = wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        };
        let texture = |label, format, usage, sample_count| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: extent,
                mip_level_count: 1,
                sample_count,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage,
                view_formats: &[],
            })
        };
        let colour = texture(
            "jello surface colour",
            COLOUR_FORMAT,
            wgpu::TextureUsages::RENDER_ATTACHMENT
                | wgpu::TextureUsages::COPY_SRC
                | wgpu::TextureUsages::TEXTURE_BINDING,
            1,
        );
        let colour_view = colour.create_view(&Default::default());
        let msaa_colour = (samples > 1).then(|| {
            texture(
                "jello surface colour (msaa)",
                COLOUR_FORMAT,
                wgpu::TextureUsages::RENDER_ATTACHMENT,
                samples,
            )
            .create_view(&Default::default())
        });
        let depth_view = texture(
            "jello surface depth",
            DEPTH_FORMAT,
            wgpu::TextureUsages::RENDER_ATTACHMENT,
            samples,
        )
        .create_view(&Default::default());
        let align = device.limits().min_uniform_buffer_offset_alignment as u64;
        let draw_stride = (std::mem::size_of::<DrawUniform>() as u64).next_multiple_of(align);
        Ok(SurfaceRenderer {
            size,
            samples,
            body_pipeline,
            ground_pipeline,
            bind_group_layout,
            msaa_colour,
            colour,
            colour_view,
            depth_view,
            draw_stride,
            style: RenderStyle::default(),
            ground: None,
        })
    }

    /// Image size in pixels (width, height).
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Samples per pixel (1 or 4).
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Width / height of the image, for [`Camera`] construction.
    pub fn aspect(&self) -> f32 {
        self.size.0 as f32 / self.size.1 as f32
    }

    /// The single-sample colour texture holding the last rendered image (COPY_SRC and
    /// TEXTURE_BINDING), for hosts that display it without a CPU round trip.
    pub fn colour_texture(&self) -> &wgpu::Texture {
        &self.colour
    }

    /// A view of [`SurfaceRenderer::colour_texture`].
    pub fn colour_view(&self) -> &wgpu::TextureView {
        &self.colour_view
    }

    /// Background and lights.
    pub fn style(&self) -> &RenderStyle {
        &self.style
    }

    /// Sets background and lights for subsequent frames.
    pub fn set_style(&mut self, style: RenderStyle) {
        self.style = style;
    }

    /// The ground plane drawn under the bodies, if any.
    pub fn ground(&self) -> Option<&GroundPlane> {
        self.ground.as_ref()
    }

    /// Sets (or removes, with `None`) the ground plane for subsequent frames.
    pub fn set_ground(&mut self, ground: Option<GroundPlane>) -> Result<()> {
        if let Some(g) = &ground {
            g.validate()?;
        }
        self.ground = ground;
        Ok(())
    }

    /// Records one frame into `encoder`: clears to the background, draws the ground plane (if
    /// set) and every surface in `draws` seen through `camera`. `device` is only used to
    /// create this frame's small uniform buffer, so several frames may be recorded before one
    /// submit; each overwrites the same colour target, so read back in between.
    pub fn record(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        draws: &[SurfaceDraw<'_>],
        camera: &Camera,
    ) -> Result<()> {
        camera.validate()?;
        if draws.len() > MAX_DRAWS {
            return Err(JelloError::Invalid(format!(
                "render: {} draws in one frame, at most {MAX_DRAWS}",
                draws.len()
            )));
        }
        for (i, d) in draws.iter().enumerate() {
            validate_draw(i, d)?;
        }

        // Uniform buffer: frame block in slot 0, then one slot per draw (ground last).
        let frame = self.frame_uniform(camera);
        let frame_bytes = bytemuck::bytes_of(&frame);
        // Draw slots start at the first aligned offset after the frame block; the ground
        // always gets the slot after the last body.
        let first_draw = (frame_bytes.len() as u64).next_multiple_of(self.draw_stride);
        let mut bytes =
            vec![0u8; (first_draw + self.draw_stride * (draws.len() as u64 + 1)) as usize];
        bytes[..frame_bytes.len()].copy_from_slice(frame_bytes);
        let slot = |k: usize| first_draw + self.draw_stride * k as u64;
        let mut put = |k: usize, u: DrawUniform| {
            let o = slot(k) as usize;
            bytes[o..o + std::mem::size_of::<DrawUniform>()]
                .copy_from_slice(bytemuck::bytes_of(&u));
        };
        for (k, d) in draws.iter().enumerate() {
            let [r, g, b] = srgb3_to_linear(d.colour);
            put(
                k,
                DrawUniform {
                    colour: [r, g, b, 1.0],
                    params: [0.0; 4],
                },
            );
        }
        let ground_slot = draws.len();
        if let Some(gp) = &self.ground {
            let [r, g, b] = srgb3_to_linear(gp.colour);
            put(
                ground_slot,
                DrawUniform {
                    colour: [r, g, b, 1.0],
                    params: [1.0, 0.0, 0.0, 0.0],
                },
            );
        }
        let uniforms = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("jello surface frame uniforms"),
            contents: &bytes,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("jello surface frame bind group"),
            layout: &self.bind_group_layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &uniforms,
                        offset: 0,
                        size: wgpu::BufferSize::new(std::mem::size_of::<FrameUniform>() as u64),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &uniforms,
                        offset: 0,
                        size: wgpu::BufferSize::new(std::mem::size_of::<DrawUniform>() as u64),
                    }),
                },
            ],
        });
        let ground_geometry = self.ground.as_ref().map(|gp| {
            let corners = gp.corners();
            let vb = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("jello ground vertices"),
                contents: bytemuck::cast_slice(&corners),
                usage: wgpu::BufferUsages::VERTEX,
            });
            let ib = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("jello ground indices"),
                contents: bytemuck::cast_slice(&[0u32, 1, 2, 0, 2, 3]),
                usage: wgpu::BufferUsages::INDEX,
            });
            (vb, ib)
        });

        let bg = srgb3_to_linear(self.style.background);
        let (target, resolve) = match &self.msaa_colour {
            Some(msaa) => (msaa, Some(&self.colour_view)),
            None => (&self.colour_view, None),
        };
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("jello surface pass"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: target,
                depth_slice: None,
                resolve_target: resolve,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color {
                        r: bg[0] as f64,
                        g: bg[1] as f64,
                        b: bg[2] as f64,
                        a: 1.0,
                    }),
                    // With MSAA only the resolved image is needed afterwards.
                    store: if resolve.is_some() {
                        wgpu::StoreOp::Discard
                    } else {
                        wgpu::StoreOp::Store
                    },
                },
            })],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &self.depth_view,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(1.0),
                    store: wgpu::StoreOp::Discard,
                }),
                stencil_ops: None,
            }),
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_pipeline(&self.body_pipeline);
        for (k, d) in draws.iter().enumerate() {
            if d.index_count == 0 {
                continue;
            }
            pass.set_bind_group(0, &bind_group, &[slot(k) as u32]);
            pass.set_vertex_buffer(0, d.positions.slice(..));
            pass.set_index_buffer(d.indices.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..d.index_count, 0, 0..1);
        }
        if let Some((vb, ib)) = &ground_geometry {
            pass.set_pipeline(&self.ground_pipeline);
            pass.set_bind_group(0, &bind_group, &[slot(ground_slot) as u32]);
            pass.set_vertex_buffer(0, vb.slice(..));
            pass.set_index_buffer(ib.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..6, 0, 0..1);
        }
        Ok(())
    }

    fn frame_uniform(&self, camera: &Camera) -> FrameUniform {
        let f = FrameParams::new(camera, &self.style, self.ground.as_ref());
        let v4 = |v: Vec3, w: f32| [v.x, v.y, v.z, w];
        let (g_centre, g_u, g_v) = match &f.ground {
            Some(g) => (v4(g.centre, g.fade_radius), v4(g.u, g.cell), v4(g.v, 0.0)),
            None => ([0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0], [0.0; 4]),
        };
        FrameUniform {
            view_proj: f.view_proj.to_cols_array_2d(),
            eye: v4(f.eye, 1.0),
            key_dir: v4(f.key_dir, f.key_intensity),
            fill_dir: v4(f.fill_dir, f.fill_intensity),
            up: v4(f.up, f.ambient),
            background: v4(f.background, 1.0),
            ground_centre: g_centre,
            ground_u: g_u,
            ground_v: g_v,
        }
    }

    /// Copies the last recorded (and submitted) image back to the CPU. Submits its own copy
    /// command on `queue` and blocks until it completes or [`READBACK_TIMEOUT`] passes.
    pub fn read_rgba(&self, device: &wgpu::Device, queue: &wgpu::Queue) -> Result<RgbaImage> {
        let (w, h) = self.size;
        let row = 4 * w;
        let padded_row = row.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("jello surface readback"),
            size: padded_row as u64 * h as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("jello surface readback"),
        });
        encoder.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &self.colour,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &readback,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded_row),
                    rows_per_image: Some(h),
                },
            },
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
        );
        let submission = queue.submit([encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        readback.map_async(wgpu::MapMode::Read, .., move |r| {
            // The receiver may have given up (timeout); nothing to do then.
            let _ = tx.send(r);
        });
        device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: Some(READBACK_TIMEOUT),
            })
            .map_err(|e| JelloError::Gpu(format!("render readback: {e}")))?;
        match rx.recv_timeout(READBACK_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(JelloError::Gpu(format!("render readback map: {e}"))),
            Err(_) => {
                return Err(JelloError::Gpu(
                    "render readback: buffer map did not complete in time".into(),
                ))
            }
        }
        let mut pixels = Vec::with_capacity(row as usize * h as usize);
        {
            let view = readback
                .get_mapped_range(..)
                .map_err(|e| JelloError::Gpu(format!("render readback view: {e}")))?;
            for r in view.chunks_exact(padded_row as usize) {
                pixels.extend_from_slice(&r[..row as usize]);
            }
        }
        readback.unmap();
        Ok(RgbaImage {
            width: w,
            height: h,
            pixels,
        })
    }
}

/// Rejects draws wgpu would refuse (and panic on) before they reach the encoder.
fn validate_draw(i: usize, d: &SurfaceDraw<'_>) -> Result<()> {
    let bad = |msg: String| Err(JelloError::Invalid(format!("render: draws[{i}]: {msg}")));
    if !d.positions.usage().contains(wgpu::BufferUsages::VERTEX) {
        return bad("positions buffer lacks BufferUsages::VERTEX".into());
    }
    if !d.indices.usage().contains(wgpu::BufferUsages::INDEX) {
        return bad("indices buffer lacks BufferUsages::INDEX".into());
    }
    if d.index_count > 0 && d.positions.size() == 0 {
        return bad("positions buffer is empty".into());
    }
    if !d.positions.size().is_multiple_of(POSITION_STRIDE) {
        return bad(format!(
            "positions buffer size {} is not a multiple of {POSITION_STRIDE} (vec4<f32>)",
            d.positions.size()
        ));
    }
    if !d.index_count.is_multiple_of(3) {
        return bad(format!(
            "index_count {} is not a multiple of 3",
            d.index_count
        ));
    }
    if d.index_count as u64 * 4 > d.indices.size() {
        return bad(format!(
            "index_count {} exceeds the index buffer ({} indices)",
            d.index_count,
            d.indices.size() / 4
        ));
    }
    if !d.colour.iter().all(|c| c.is_finite()) {
        return bad(format!("colour {:?} is not finite", d.colour));
    }
    Ok(())
}
