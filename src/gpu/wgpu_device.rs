//! The wgpu backend of the device API.
//!
//! Requirements on a device (own or adopted): no optional features (`TIMESTAMP_QUERY` is used
//! for per-kernel timing when present, and an own device requests it then); `Limits::default()`
//! suffices (8 storage buffers per compute stage, 256 invocations per workgroup, 2 bind groups,
//! 1 dynamic uniform buffer). The largest binding must fit `max_storage_buffer_binding_size`
//! (128 MiB by default = 233k elements' Hessians); an own device requests the adapter's larger
//! buffer limits when it has them.
//!
//! Errors: wgpu validation and out-of-memory errors are captured with error scopes around each
//! operation and returned as `JelloError::Gpu`; device loss (own device) and readback timeouts
//! also become `JelloError::Gpu`, never a hang or a panic.

use super::adapter::{self, DeviceInfo};
use super::device::{BackendImpl, BufferId, CounterHandle, Scratch, Step};
use super::kernel::{Access, Kernel};
use super::layout::Params;
use crate::clock::Instant;
use crate::{JelloError, Result};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Default time a readback may wait for the GPU.
pub const DEFAULT_READBACK_TIMEOUT: Duration = Duration::from_secs(120);

struct GBuf {
    buffer: wgpu::Buffer,
    elem_bytes: u32,
    len: usize,
}

struct Pipe {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// wgpu implementation of the device API.
pub struct GpuDevice {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: DeviceInfo,
    owned: bool,
    pipes: Vec<Option<Pipe>>,
    params_layout: wgpu::BindGroupLayout,
    params_buf: Option<(wgpu::Buffer, wgpu::BindGroup, u64)>,
    param_stride: u64,
    bufs: Vec<Option<GBuf>>,
    bind_groups: HashMap<(Kernel, Vec<BufferId>), wgpu::BindGroup>,
    uncaptured: Arc<Mutex<Vec<String>>>,
    lost: Arc<Mutex<Option<String>>>,
    readback_timeout: Duration,
    /// Whether each dispatch is timed with timestamp queries ([`Self::set_kernel_timing`]).
    timing: bool,
    pub(crate) scratch: Scratch,
    pub(crate) counters: CounterHandle,
}

/// Timestamp queries per query set (two per dispatch: wgpu's `QUERY_SET_MAX_QUERIES`).
const QUERIES_PER_SET: u32 = wgpu::QUERY_SET_MAX_QUERIES;

fn gpu_err(what: &str, e: impl std::fmt::Display) -> JelloError {
    JelloError::Gpu(format!("{what}: {e}"))
}

impl GpuDevice {
    /// Creates an own headless device on the adapter picked from env `WGPU_BACKEND` /
    /// `WGPU_ADAPTER_NAME` (else the best available; software adapters accepted):
    /// [`Self::new_headless_async`] waited for on the calling thread, so an error on wasm32.
    pub fn new_headless() -> Result<Self> {
        adapter::block_on("creating a GPU device", Self::new_headless_async())?
    }

    /// [`Self::new_headless`] as a future, the constructor a wasm32 build uses (in a browser,
    /// on its WebGPU adapter).
    pub async fn new_headless_async() -> Result<Self> {
        let instance = adapter::instance();
        let adapter = adapter::pick_adapter_async(&instance)
            .await?
            .ok_or_else(|| JelloError::Gpu("no GPU adapter found".into()))?;
        let al = adapter.limits();
        let mut limits = wgpu::Limits::default();
        // Larger buffers only when the adapter offers them (bigger meshes), nothing else.
        limits.max_storage_buffer_binding_size = limits
            .max_storage_buffer_binding_size
            .max(al.max_storage_buffer_binding_size);
        limits.max_buffer_size = limits.max_buffer_size.max(al.max_buffer_size);
        // A downlevel adapter (some GL drivers) gets its own limits; check_needs() then says whether
        // they are enough.
        let limits = if limits.check_limits(&al) {
            limits
        } else {
            al.clone()
        };
        // Timestamp queries, when the adapter has them, for per-kernel timing on request
        // (`Device::set_kernel_timing`); nothing else optional.
        let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("jello"),
                required_features: features,
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| gpu_err("request_device", e))?;
        let d = Self::build(
            device,
            queue,
            DeviceInfo::from_adapter(&adapter.get_info()),
            true,
        )?;
        d.check_needs()?;
        let unc = d.uncaptured.clone();
        d.device
            .on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                if let Ok(mut v) = unc.lock() {
                    v.push(e.to_string());
                }
            }));
        let lost = d.lost.clone();
        d.device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut l) = lost.lock() {
                *l = Some(format!("device lost ({reason:?}): {msg}"));
            }
        });
        Ok(d)
    }

    /// Adopts a host's device and queue. The host keeps ownership: the engine holds clones of
    /// the handles, never destroys the device, and installs no uncaptured-error or device-lost
    /// handler (errors are caught with error scopes). Needs no optional feature; checks the
    /// limits listed in the module docs.
    pub fn from_wgpu(device: wgpu::Device, queue: wgpu::Queue) -> Result<Self> {
        let info = DeviceInfo::from_adapter(&device.adapter_info());
        let d = Self::build(device, queue, info, false)?;
        d.check_needs()?;
        Ok(d)
    }

    fn check_needs(&self) -> Result<()> {
        let l = self.device.limits();
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(JelloError::Gpu(format!(
                    "device {} lacks {what}",
                    self.info
                )))
            }
        };
        // The kernel table's widest kernel decides (8 = Limits::default()).
        let widest = super::kernel::KERNELS
            .iter()
            .map(|k| k.bindings.len() as u32)
            .max()
            .unwrap_or(0);
        need(
            l.max_storage_buffers_per_shader_stage >= widest,
            &format!("{widest} storage buffers per stage"),
        )?;
        need(
            l.max_compute_invocations_per_workgroup >= 256,
            "256 invocations per workgroup",
        )?;
        need(
            l.max_compute_workgroup_size_x >= 256,
            "workgroup size x ≥ 256",
        )?;
        need(l.max_bind_groups >= 2, "2 bind groups")?;
        need(
            l.max_dynamic_uniform_buffers_per_pipeline_layout >= 1,
            "a dynamic uniform buffer",
        )
    }

    fn build(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: DeviceInfo,
        owned: bool,
    ) -> Result<Self> {
        let params_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("jello params"),
            entries: &[wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: wgpu::BufferSize::new(std::mem::size_of::<Params>() as u64),
                },
                count: None,
            }],
        });
        let align = device.limits().min_uniform_buffer_offset_alignment.max(32) as u64;
        Ok(GpuDevice {
            device,
            queue,
            info,
            owned,
            pipes: (0..Kernel::ALL.len()).map(|_| None).collect(),
            params_layout,
            params_buf: None,
            param_stride: align,
            bufs: Vec::new(),
            bind_groups: HashMap::new(),
            uncaptured: Arc::new(Mutex::new(Vec::new())),
            lost: Arc::new(Mutex::new(None)),
            readback_timeout: DEFAULT_READBACK_TIMEOUT,
            timing: false,
            scratch: Scratch::default(),
            counters: CounterHandle::default(),
        })
    }

    /// The wgpu device (for hosts that share buffers with the engine).
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }
    /// The wgpu queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
    /// True when the engine created this device itself.
    pub fn owns_device(&self) -> bool {
        self.owned
    }
    /// The wgpu buffer behind an id (usage STORAGE | VERTEX | COPY_SRC | COPY_DST).
    pub fn buffer(&self, id: BufferId) -> Option<&wgpu::Buffer> {
        self.bufs.get(id.0 as usize)?.as_ref().map(|b| &b.buffer)
    }
    /// Sets how long a readback may wait for the GPU before failing.
    pub fn set_readback_timeout(&mut self, t: Duration) {
        self.readback_timeout = t;
    }

    fn check_health(&self) -> Result<()> {
        if let Some(l) = self.lost.lock().ok().and_then(|l| l.clone()) {
            return Err(JelloError::Gpu(l));
        }
        let errs: Vec<String> = self
            .uncaptured
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        if !errs.is_empty() {
            return Err(JelloError::Gpu(errs.join("; ")));
        }
        Ok(())
    }

    /// Runs `f` inside validation and out-of-memory error scopes; a captured error becomes Gpu.
    fn scoped<R>(&self, what: &str, f: impl FnOnce(&Self) -> R) -> Result<R> {
        self.check_health()?;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let r = f(self);
        let e1 = adapter::block_on(what, val.pop())?;
        let e2 = adapter::block_on(what, oom.pop())?;
        if let Some(e) = e1.or(e2) {
            return Err(gpu_err(what, e));
        }
        self.check_health()?;
        Ok(r)
    }

    fn get(&self, id: BufferId) -> Result<&GBuf> {
        self.bufs
            .get(id.0 as usize)
            .and_then(|b| b.as_ref())
            .ok_or_else(|| JelloError::Invalid(format!("buffer {id:?} does not exist")))
    }

    fn ensure_pipeline(&mut self, k: Kernel) -> Result<()> {
        if self.pipes[k.index()].is_some() {
            return Ok(());
        }
        let desc = k.desc();
        let pipe = self.scoped(&format!("creating pipeline `{}`", desc.name), |s| {
            let module = s.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(desc.name),
                source: wgpu::ShaderSource::Wgsl(desc.source().into()),
            });
            let entries: Vec<wgpu::BindGroupLayoutEntry> = desc
                .bindings
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                    binding: i as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage {
                            read_only: b.access == Access::Read,
                        },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                })
                .collect();
            let layout = s
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(desc.name),
                    entries: &entries,
                });
            let pl = s
                .device
                .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(desc.name),
                    bind_group_layouts: &[Some(&layout), Some(&s.params_layout)],
                    immediate_size: 0,
                });
            let pipeline = s
                .device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(desc.name),
                    layout: Some(&pl),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
            Pipe { pipeline, layout }
        })?;
        self.pipes[k.index()] = Some(pipe);
        Ok(())
    }

    fn ensure_params(&mut self, bytes: u64) -> Result<()> {
        if let Some((_, _, cap)) = &self.params_buf {
            if *cap >= bytes {
                return Ok(());
            }
        }
        let cap = bytes.next_power_of_two().max(4096);
        let layout = &self.params_layout;
        let (buf, bg) = self.scoped("allocating params", |s| {
            let buf = s.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("jello params"),
                size: cap,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let bg = s.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("jello params"),
                layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &buf,
                        offset: 0,
                        size: wgpu::BufferSize::new(std::mem::size_of::<Params>() as u64),
                    }),
                }],
            });
            (buf, bg)
        })?;
        self.params_buf = Some((buf, bg, cap));
        Ok(())
    }

    fn ensure_bind_group(&mut self, k: Kernel, bufs: &[BufferId]) -> Result<()> {
        let key = (k, bufs.to_vec());
        if self.bind_groups.contains_key(&key) {
            return Ok(());
        }
        let layout = &self.pipes[k.index()]
            .as_ref()
            .expect("pipeline created first")
            .layout;
        let mut entries = Vec::with_capacity(bufs.len());
        for (i, id) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32,
                resource: self.get(*id)?.buffer.as_entire_binding(),
            });
        }
        let bg = self.scoped(&format!("binding buffers for `{}`", k.desc().name), |s| {
            s.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(k.desc().name),
                layout,
                entries: &entries,
            })
        })?;
        self.bind_groups.insert(key, bg);
        Ok(())
    }

    fn wait(&self, index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        let start = Instant::now();
        let r = self.device.poll(wgpu::PollType::Wait {
            submission_index: index,
            timeout: Some(self.readback_timeout),
        });
        match r {
            Ok(_) => self.check_health(),
            Err(wgpu::PollError::Timeout) => Err(JelloError::Gpu(format!(
                "GPU did not finish within {:.0} s",
                start.elapsed().as_secs_f64()
            ))),
            Err(e) => Err(gpu_err("waiting for the GPU", e)),
        }
    }

    /// Maps `staging` (MAP_READ) once submission `index` has run, returns its bytes and
    /// destroys it.
    fn map_read(&self, staging: wgpu::Buffer, index: wgpu::SubmissionIndex) -> Result<Vec<u8>> {
        let status: Arc<Mutex<Option<std::result::Result<(), wgpu::BufferAsyncError>>>> =
            Arc::new(Mutex::new(None));
        let st = status.clone();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            if let Ok(mut s) = st.lock() {
                *s = Some(r);
            }
        });
        self.wait(Some(index))?;
        // The callback runs inside poll once the copy has completed.
        let r = status.lock().ok().and_then(|mut s| s.take());
        match r {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(gpu_err("mapping the readback buffer", e)),
            None => {
                self.wait(None)?;
                match status.lock().ok().and_then(|mut s| s.take()) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(gpu_err("mapping the readback buffer", e)),
                    None => return Err(JelloError::Gpu("readback buffer was never mapped".into())),
                }
            }
        }
        let out = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| gpu_err("reading the mapped buffer", e))?;
            view.to_vec()
        };
        staging.unmap();
        staging.destroy();
        Ok(out)
    }
}

impl BackendImpl for GpuDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn alloc(&mut self, label: &str, elem_bytes: u32, len: usize) -> Result<BufferId> {
        let bytes = (len as u64)
            .checked_mul(elem_bytes as u64)
            .ok_or_else(|| JelloError::Invalid("buffer size overflows".into()))?;
        let limits = self.device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        if bytes > max {
            return Err(JelloError::Gpu(format!(
                "buffer `{label}` needs {:.1} MiB; the device allows {:.1} MiB per storage binding",
                bytes as f64 / 1048576.0,
                max as f64 / 1048576.0
            )));
        }
        // Zero-sized bindings are invalid; 16 bytes is the smallest vec4 array.
        let size = bytes.max(16).next_multiple_of(4);
        let buffer = self.scoped(&format!("allocating `{label}`"), |s| {
            s.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::VERTEX
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        self.bufs.push(Some(GBuf {
            buffer,
            elem_bytes,
            len,
        }));
        Ok(BufferId(self.bufs.len() as u32 - 1))
    }
    fn free(&mut self, id: BufferId) {
        if let Some(slot) = self.bufs.get_mut(id.0 as usize) {
            if let Some(b) = slot.take() {
                self.bind_groups.retain(|(_, ids), _| !ids.contains(&id));
                b.buffer.destroy();
            }
        }
    }
    fn meta(&self, id: BufferId) -> Option<(u32, usize)> {
        self.get(id).ok().map(|b| (b.elem_bytes, b.len))
    }
    fn write_bytes(&mut self, id: BufferId, offset: u64, data: &[u8]) -> Result<()> {
        let b = self.get(id)?;
        self.scoped("writing a buffer", |s| {
            s.queue.write_buffer(&b.buffer, offset, data)
        })
    }
    fn read_bytes(&mut self, id: BufferId, range: Range<u64>) -> Result<Vec<u8>> {
        let b = self.get(id)?;
        let size = range.end - range.start;
        let (staging, index) = self.scoped("reading a buffer back", |s| {
            let staging = s.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("jello readback"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = s.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&b.buffer, range.start, &staging, 0, size);
            let index = s.queue.submit([enc.finish()]);
            (staging, index)
        })?;
        self.map_read(staging, index)
    }
    fn run(&mut self, steps: &[Step]) -> Result<()> {
        if steps.is_empty() {
            return Ok(());
        }
        let max_groups = self
            .device
            .limits()
            .max_compute_workgroups_per_dimension
            .max(1);
        // Pipelines, bind groups and the params block before encoding.
        let mut param_bytes: Vec<u8> = Vec::new();
        let mut grids = Vec::new();
        for s in steps {
            if let Step::Dispatch {
                kernel,
                bufs,
                params,
            } = s
            {
                self.ensure_pipeline(*kernel)?;
                self.ensure_bind_group(*kernel, bufs)?;
                let groups = kernel.desc().groups(params.n);
                let gx = groups.min(max_groups);
                let gy = groups.div_ceil(gx);
                if gy > max_groups {
                    return Err(JelloError::Gpu(format!(
                        "dispatch of `{}` over {} items exceeds the grid limit",
                        kernel.desc().name,
                        params.n
                    )));
                }
                let mut p = *params;
                p.row = gx;
                let off = param_bytes.len();
                param_bytes.resize(off + self.param_stride as usize, 0);
                param_bytes[off..off + 32].copy_from_slice(bytemuck::bytes_of(&p));
                grids.push((off as u32, gx, gy));
            }
        }
        if !param_bytes.is_empty() {
            self.ensure_params(param_bytes.len() as u64)?;
        }
        // The parameter blocks cross the bus with the submit (counted here: the CPU has none).
        let pb = param_bytes.len() as u64;
        self.counters.add(|c| c.param_bytes += pb);
        let timed = self.timing;
        let this = &*self;
        let (index, timestamps) = this.scoped("submitting a plan", |s| {
            if let Some((pb, _, _)) = &s.params_buf {
                if !param_bytes.is_empty() {
                    s.queue.write_buffer(pb, 0, &param_bytes);
                }
            }
            let mut enc = s
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("jello plan"),
                });
            // Kernel timing: each dispatch in its own pass with a timestamp at its start and end,
            // two per dispatch, in query sets of at most QUERIES_PER_SET.
            let n = if timed { grids.len() as u32 } else { 0 };
            let per_set = QUERIES_PER_SET / 2;
            let sets: Vec<wgpu::QuerySet> = (0..n.div_ceil(per_set))
                .map(|j| {
                    s.device.create_query_set(&wgpu::QuerySetDescriptor {
                        label: Some("jello kernel timestamps"),
                        ty: wgpu::QueryType::Timestamp,
                        count: 2 * (n - j * per_set).min(per_set),
                    })
                })
                .collect();
            let mut kernels = Vec::with_capacity(n as usize);
            let mut grid = grids.iter();
            let mut pass: Option<wgpu::ComputePass<'_>> = None;
            for st in steps {
                match st {
                    Step::Dispatch { kernel, bufs, .. } => {
                        let (off, gx, gy) = *grid.next().expect("one grid per dispatch");
                        if timed {
                            drop(pass.take());
                            let k = kernels.len() as u32;
                            let slot = 2 * (k % per_set);
                            pass = Some(
                                enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                                    label: Some("jello timed"),
                                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                                        query_set: &sets[(k / per_set) as usize],
                                        beginning_of_pass_write_index: Some(slot),
                                        end_of_pass_write_index: Some(slot + 1),
                                    }),
                                })
                                .forget_lifetime(),
                            );
                            kernels.push(*kernel);
                        }
                        let p = pass.get_or_insert_with(|| {
                            enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                                label: Some("jello"),
                                timestamp_writes: None,
                            })
                            .forget_lifetime()
                        });
                        let pipe = s.pipes[kernel.index()].as_ref().expect("created above");
                        p.set_pipeline(&pipe.pipeline);
                        p.set_bind_group(0, &s.bind_groups[&(*kernel, bufs.clone())], &[]);
                        p.set_bind_group(
                            1,
                            &s.params_buf.as_ref().expect("params allocated").1,
                            &[off],
                        );
                        p.dispatch_workgroups(gx, gy, 1);
                    }
                    Step::Copy {
                        src,
                        src_offset,
                        dst,
                        dst_offset,
                        bytes,
                    } => {
                        drop(pass.take());
                        if let (Ok(a), Ok(b)) = (s.get(*src), s.get(*dst)) {
                            enc.copy_buffer_to_buffer(
                                &a.buffer,
                                *src_offset,
                                &b.buffer,
                                *dst_offset,
                                *bytes,
                            );
                        }
                    }
                }
            }
            drop(pass);
            let timestamps = (n > 0).then(|| {
                let bytes = 16 * n as u64;
                let resolve = s.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("jello timestamps"),
                    size: bytes,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                let staging = s.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("jello timestamps readback"),
                    size: bytes,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                for (j, set) in sets.iter().enumerate() {
                    let first = j as u32 * per_set;
                    let count = 2 * (n - first).min(per_set);
                    enc.resolve_query_set(set, 0..count, &resolve, 16 * first as u64);
                }
                enc.copy_buffer_to_buffer(&resolve, 0, &staging, 0, bytes);
                (resolve, staging, kernels)
            });
            (s.queue.submit([enc.finish()]), timestamps)
        })?;
        if let Some((resolve, staging, kernels)) = timestamps {
            // One wait for the timestamps (instrumentation: not counted as a sync).
            let raw = self.map_read(staging, index)?;
            resolve.destroy();
            let period = self.queue.get_timestamp_period() as f64;
            let ticks: &[u64] = bytemuck::cast_slice(&raw);
            self.counters.add(|c| {
                for (k, t) in kernels.iter().zip(ticks.chunks_exact(2)) {
                    let ns = (t[1].saturating_sub(t[0]) as f64 * period).round() as u64;
                    c.add_time(*k, ns);
                }
            });
        }
        Ok(())
    }
    fn wait_idle(&mut self) -> Result<()> {
        self.wait(None)
    }
    fn set_kernel_timing(&mut self, on: bool) -> Result<()> {
        if on
            && !self
                .device
                .features()
                .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return Err(JelloError::Gpu(format!(
                "device {} lacks TIMESTAMP_QUERY: no per-kernel timing on it",
                self.info
            )));
        }
        self.timing = on;
        Ok(())
    }
}
