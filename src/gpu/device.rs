//! The device API every solver is written against: typed buffers, dispatches of table kernels,
//! reductions and recorded plans, implemented by a wgpu backend ([`GpuDevice`]) and a CPU
//! backend ([`CpuDevice`], the kernels' Rust twins).

use super::abi::REDUCE_BLOCK;
use super::adapter::{Backend, DeviceInfo};
use super::cpu_device::CpuDevice;
use super::kernel::{self, Kernel};
use super::layout::Params;
use super::wgpu_device::GpuDevice;
use crate::{JelloError, Result};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// Opaque id of a device buffer (untyped; what `dispatch` takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub(crate) u32);

/// Typed handle to a device buffer of `len` elements of `T`. Copyable; freeing is explicit
/// ([`Device::free`]) or happens when the device is dropped.
pub struct Buf<T> {
    id: BufferId,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Buf<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Buf<T> {}
impl<T> std::fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buf({:?}, len {})", self.id, self.len)
    }
}

impl<T> Buf<T> {
    /// The untyped id, for `dispatch` buffer lists.
    pub fn id(&self) -> BufferId {
        self.id
    }
    /// Number of `T` elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Scalar reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Σ aᵢ.
    Sum,
    /// Σ aᵢbᵢ.
    Dot,
    /// max |aᵢ|.
    MaxAbs,
}

/// Work one kernel did, summed over its dispatches (see [`DeviceCounters::kernels`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCount {
    /// Dispatches of the kernel (reduction passes count one each).
    pub dispatches: u64,
    /// Bytes its bindings read, estimated as in [`DeviceCounters::kernel_read_bytes`].
    pub read_bytes: u64,
    /// Bytes its writable bindings wrote, estimated as in [`DeviceCounters::kernel_write_bytes`].
    pub write_bytes: u64,
    /// Dispatches timed while kernel timing was on ([`Device::set_kernel_timing`]).
    pub timed: u64,
    /// Their summed time, ns: on a GPU from timestamp queries around each dispatch, on the CPU
    /// backend the host's wall time of each twin call.
    pub time_ns: u64,
}

/// What a device did since it was created (or since [`Device::reset_counters`]): dispatches,
/// submits, host synchronisations and the bytes that crossed the bus or that the kernels moved.
/// Always on: counting costs a few integer additions per dispatch, write or read.
///
/// Host synchronisations are the points where the host waits for the device: every readback
/// ([`Device::read`], [`Device::read_range`], the scalar reductions [`Device::dot`] & co., which
/// read one float) and every [`Device::wait_idle`]. On the CPU backend nothing waits, but the
/// same calls are counted, so a solver's sync count is the same on both backends.
///
/// Kernel bytes are an estimate from the kernel table ([`super::kernel::KERNELS`]): for each
/// binding the elements its length rule says a dispatch over `n` items touches (`k·n` for
/// `PerItem(k)`, `k·n + 1` for CSR offsets, the partials for reduction outputs, the whole buffer
/// for `Any`, the data-dependent gathers), capped at the bound buffer's length, times the
/// element size. Every binding is counted as read once; a `ReadWrite` binding is also counted as
/// written once — the table does not distinguish write-only outputs, so a pure output is
/// counted as read and written (an upper bound). Gathers through `Any` bindings count the whole
/// buffer once (what a cache that holds it would move; a kernel re-reading through a cache
/// that does not moves more).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Kernel dispatches (each reduction pass is one).
    pub dispatches: u64,
    /// Device-side buffer copies recorded in plans.
    pub copies: u64,
    /// Plans submitted with at least one step (one queue submission each on the GPU).
    pub submits: u64,
    /// Host synchronisations: readbacks and `wait_idle` calls.
    pub syncs: u64,
    /// Bytes written host → device ([`Device::write`], [`Device::upload`]).
    pub upload_bytes: u64,
    /// Bytes read device → host (readbacks).
    pub readback_bytes: u64,
    /// Bytes the kernels' bindings read (estimate; see the type's docs).
    pub kernel_read_bytes: u64,
    /// Bytes the kernels' writable bindings wrote (estimate; see the type's docs).
    pub kernel_write_bytes: u64,
    /// Bytes moved by device-side copies (each byte read once and written once: 2× the size).
    pub copy_bytes: u64,
    /// Bytes of the per-dispatch parameter blocks uploaded with each submit (wgpu backend only:
    /// one uniform block per dispatch at the adapter's offset alignment; zero on the CPU).
    pub param_bytes: u64,
    /// Per kernel, indexed by [`Kernel::index`] (grown on demand; kernels never dispatched are
    /// zero or absent).
    pub kernels: Vec<KernelCount>,
}

impl DeviceCounters {
    /// Bytes the kernels and copies moved on the device (reads + writes).
    pub fn device_bytes(&self) -> u64 {
        self.kernel_read_bytes + self.kernel_write_bytes + self.copy_bytes
    }
    /// Bytes that crossed the bus (uploads, parameter blocks and readbacks).
    pub fn bus_bytes(&self) -> u64 {
        self.upload_bytes + self.param_bytes + self.readback_bytes
    }
    /// `self − earlier`: what happened between two snapshots (`earlier` taken first).
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        let kernels = (0..self.kernels.len())
            .map(|i| {
                let a = self.kernels[i];
                let b = earlier.kernels.get(i).copied().unwrap_or_default();
                KernelCount {
                    dispatches: a.dispatches - b.dispatches,
                    read_bytes: a.read_bytes - b.read_bytes,
                    write_bytes: a.write_bytes - b.write_bytes,
                    timed: a.timed - b.timed,
                    time_ns: a.time_ns - b.time_ns,
                }
            })
            .collect();
        DeviceCounters {
            dispatches: self.dispatches - earlier.dispatches,
            copies: self.copies - earlier.copies,
            submits: self.submits - earlier.submits,
            syncs: self.syncs - earlier.syncs,
            upload_bytes: self.upload_bytes - earlier.upload_bytes,
            readback_bytes: self.readback_bytes - earlier.readback_bytes,
            kernel_read_bytes: self.kernel_read_bytes - earlier.kernel_read_bytes,
            kernel_write_bytes: self.kernel_write_bytes - earlier.kernel_write_bytes,
            copy_bytes: self.copy_bytes - earlier.copy_bytes,
            param_bytes: self.param_bytes - earlier.param_bytes,
            kernels,
        }
    }
    /// The kernels that were dispatched, with their counts, in table order.
    pub fn kernel_counts(&self) -> impl Iterator<Item = (Kernel, KernelCount)> + '_ {
        self.kernels
            .iter()
            .enumerate()
            .filter(|(_, c)| c.dispatches > 0)
            .filter_map(|(i, c)| Kernel::ALL.get(i).map(|k| (*k, *c)))
    }
    /// `kernel`'s entry, grown on demand.
    fn kernel_mut(&mut self, kernel: Kernel) -> &mut KernelCount {
        let i = kernel.index();
        if self.kernels.len() <= i {
            self.kernels.resize(i + 1, KernelCount::default());
        }
        &mut self.kernels[i]
    }
    /// Adds one timed dispatch of `kernel` that took `ns` nanoseconds.
    pub(crate) fn add_time(&mut self, kernel: Kernel, ns: u64) {
        let k = self.kernel_mut(kernel);
        k.timed += 1;
        k.time_ns += ns;
    }
    fn count_dispatch(&mut self, kernel: Kernel, read: u64, write: u64) {
        self.dispatches += 1;
        self.kernel_read_bytes += read;
        self.kernel_write_bytes += write;
        let k = self.kernel_mut(kernel);
        k.dispatches += 1;
        k.read_bytes += read;
        k.write_bytes += write;
    }
}

/// A shared handle on a device's counters ([`Device::counter_handle`]): taken before the device
/// is handed to a solver that owns it, it still reads the counters while the solver runs.
#[derive(Clone, Debug, Default)]
pub struct CounterHandle(Arc<Mutex<DeviceCounters>>);

impl CounterHandle {
    /// A snapshot of the counters now.
    pub fn snapshot(&self) -> DeviceCounters {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }
    /// Zeroes the counters.
    pub fn reset(&self) {
        if let Ok(mut c) = self.0.lock() {
            *c = DeviceCounters::default();
        }
    }
    /// Applies `f` to the counters (one uncontended lock: what keeps counting always on).
    pub(crate) fn add(&self, f: impl FnOnce(&mut DeviceCounters)) {
        if let Ok(mut c) = self.0.lock() {
            f(&mut c);
        }
    }
}

/// Elements a binding with length rule `len` touches in a dispatch over `n` items (`u0` the
/// dispatch's flags), at most `buf_len`.
fn touched(len: kernel::Len, n: u32, u0: u32, buf_len: usize) -> u64 {
    let n = n as u64;
    let want = match len {
        kernel::Len::Any => buf_len as u64,
        kernel::Len::PerItem(k) => k as u64 * n,
        kernel::Len::PerItemPlusOne(k) => k as u64 * n + 1,
        kernel::Len::PerItemIf(k, flag) => {
            if u0 & flag != 0 {
                k as u64 * n
            } else {
                0
            }
        }
        kernel::Len::Partials => n.div_ceil(REDUCE_BLOCK as u64).max(1),
    };
    want.min(buf_len as u64)
}

#[derive(Clone, Debug)]
enum Op {
    Dispatch {
        kernel: Kernel,
        bufs: Vec<BufferId>,
        params: Params,
        n: u32,
    },
    Reduce {
        op: ReduceOp,
        a: BufferId,
        b: Option<BufferId>,
        n: u32,
        out: BufferId,
        index: u32,
    },
    Copy {
        src: BufferId,
        src_offset: u64,
        dst: BufferId,
        dst_offset: u64,
        bytes: u64,
    },
}

/// A recorded sequence of dispatches, reductions and copies, executed in order by one
/// [`Device::submit`] (one queue submission on the GPU, so a solver iteration costs one submit).
/// A plan holds only ids and parameters, so it can be built once and submitted many times;
/// buffer contents change between submits through [`Device::write`].
#[derive(Clone, Debug, Default)]
pub struct Plan {
    ops: Vec<Op>,
}

impl Plan {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of recorded operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// Records `kernel` over `n` items with `bufs` in binding order and `params` (`n`/`row` are
    /// filled in at submit).
    pub fn dispatch(
        &mut self,
        kernel: Kernel,
        bufs: &[BufferId],
        params: Params,
        n: u32,
    ) -> &mut Self {
        self.ops.push(Op::Dispatch {
            kernel,
            bufs: bufs.to_vec(),
            params,
            n,
        });
        self
    }
    /// Records `out[index] = Σ a[0..n]` (tree reduction passes, no atomics).
    pub fn sum(&mut self, a: &Buf<f32>, n: u32, out: &Buf<f32>, index: u32) -> &mut Self {
        self.reduce(ReduceOp::Sum, a.id(), None, n, out.id(), index)
    }
    /// Records `out[index] = Σ a[i]·b[i]` over `0..n`.
    pub fn dot(
        &mut self,
        a: &Buf<f32>,
        b: &Buf<f32>,
        n: u32,
        out: &Buf<f32>,
        index: u32,
    ) -> &mut Self {
        self.reduce(ReduceOp::Dot, a.id(), Some(b.id()), n, out.id(), index)
    }
    /// Records `out[index] = max |a[i]|` over `0..n`.
    pub fn max_abs(&mut self, a: &Buf<f32>, n: u32, out: &Buf<f32>, index: u32) -> &mut Self {
        self.reduce(ReduceOp::MaxAbs, a.id(), None, n, out.id(), index)
    }
    fn reduce(
        &mut self,
        op: ReduceOp,
        a: BufferId,
        b: Option<BufferId>,
        n: u32,
        out: BufferId,
        index: u32,
    ) -> &mut Self {
        self.ops.push(Op::Reduce {
            op,
            a,
            b,
            n,
            out,
            index,
        });
        self
    }
    /// Records a copy of `len` elements from `src[src_start..]` to `dst[dst_start..]`.
    pub fn copy<T: Pod>(
        &mut self,
        src: &Buf<T>,
        src_start: usize,
        dst: &Buf<T>,
        dst_start: usize,
        len: usize,
    ) -> &mut Self {
        let s = size_of::<T>() as u64;
        self.ops.push(Op::Copy {
            src: src.id(),
            src_offset: src_start as u64 * s,
            dst: dst.id(),
            dst_offset: dst_start as u64 * s,
            bytes: len as u64 * s,
        });
        self
    }
}

/// One resolved step of a plan (reductions expanded into passes).
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Dispatch {
        kernel: Kernel,
        bufs: Vec<BufferId>,
        params: Params,
    },
    Copy {
        src: BufferId,
        src_offset: u64,
        dst: BufferId,
        dst_offset: u64,
        bytes: u64,
    },
}

/// What both backends implement; [`Device`] adds typing, plans and reductions on top.
pub(crate) trait BackendImpl {
    fn info(&self) -> &DeviceInfo;
    fn alloc(&mut self, label: &str, elem_bytes: u32, len: usize) -> Result<BufferId>;
    fn free(&mut self, id: BufferId);
    /// (element size in bytes, length in elements).
    fn meta(&self, id: BufferId) -> Option<(u32, usize)>;
    fn write_bytes(&mut self, id: BufferId, offset: u64, data: &[u8]) -> Result<()>;
    fn read_bytes(&mut self, id: BufferId, range: Range<u64>) -> Result<Vec<u8>>;
    fn run(&mut self, steps: &[Step]) -> Result<()>;
    fn wait_idle(&mut self) -> Result<()>;
    /// Turns per-dispatch timing on or off ([`Device::set_kernel_timing`]).
    fn set_kernel_timing(&mut self, on: bool) -> Result<()>;
}

/// A compute device: the wgpu backend or the CPU backend behind one API.
pub enum Device {
    /// wgpu (f32 WGSL kernels).
    Gpu(GpuDevice),
    /// The kernels' CPU twins.
    Cpu(CpuDevice),
}

/// Scratch buffers for multi-pass reductions (ping-pong), grown on demand.
#[derive(Default)]
pub(crate) struct Scratch {
    bufs: Option<(BufferId, BufferId, usize)>,
}

impl Device {
    /// Creates a device for `backend`: `Cpu` → CPU twins; `Gpu` → a headless wgpu device on the
    /// adapter chosen by env `WGPU_BACKEND` / `WGPU_ADAPTER_NAME` (else the best one; software
    /// adapters accepted), or an error; `Auto` → GPU when a hardware adapter exists, else CPU
    /// (see [`Backend::resolve`]).
    pub fn new(backend: Backend) -> Result<Self> {
        match backend {
            Backend::Cpu => Ok(Device::cpu()),
            Backend::Gpu => Ok(Device::Gpu(GpuDevice::new_headless()?)),
            Backend::Auto => match backend.resolve() {
                Ok(c) if c.backend == Backend::Gpu => match GpuDevice::new_headless() {
                    Ok(g) => Ok(Device::Gpu(g)),
                    Err(e) => {
                        log::info!("no usable GPU adapter ({e}); using the CPU backend");
                        Ok(Device::cpu())
                    }
                },
                Ok(c) => {
                    log::info!("{c}");
                    Ok(Device::cpu())
                }
                Err(e) => {
                    log::info!("{e}; using the CPU backend");
                    Ok(Device::cpu())
                }
            },
        }
    }
    /// The CPU backend.
    pub fn cpu() -> Self {
        Device::Cpu(CpuDevice::new())
    }
    /// Adopts a host application's device and queue (see [`GpuDevice::from_wgpu`] for what the
    /// device must support). The engine keeps clones of the handles and never destroys the device.
    pub fn from_wgpu(device: wgpu::Device, queue: wgpu::Queue) -> Result<Self> {
        Ok(Device::Gpu(GpuDevice::from_wgpu(device, queue)?))
    }
    fn imp(&self) -> &dyn BackendImpl {
        match self {
            Device::Gpu(g) => g,
            Device::Cpu(c) => c,
        }
    }
    fn imp_mut(&mut self) -> &mut dyn BackendImpl {
        match self {
            Device::Gpu(g) => g,
            Device::Cpu(c) => c,
        }
    }
    /// The handle on this device's counters (shared: it keeps reading them after the device
    /// moves into a solver).
    pub fn counter_handle(&self) -> CounterHandle {
        match self {
            Device::Gpu(g) => g.counters.clone(),
            Device::Cpu(c) => c.counters.clone(),
        }
    }
    /// A snapshot of what this device did since it was created or last reset (see
    /// [`DeviceCounters`]); take two and [`DeviceCounters::since`] for an interval.
    pub fn counters(&self) -> DeviceCounters {
        self.counter_handle().snapshot()
    }
    /// Times every dispatch from now on (`on`) or stops: each kernel's summed time lands in
    /// [`KernelCount::time_ns`] of the counters. On a GPU it needs the adapter's optional
    /// `TIMESTAMP_QUERY` feature (an own device requests it when the adapter has it; an
    /// adopted device has it if its host requested it) and errs without it. Timing changes how
    /// work is submitted — each dispatch in its own compute pass with a timestamp at its start
    /// and end, and after each plan one wait for the timestamps (not counted in
    /// [`DeviceCounters::syncs`]) — so measure time and counts in separate runs, and read the
    /// split, not the sum, as the kernels' cost. On the CPU backend it is the wall time of each
    /// twin call.
    pub fn set_kernel_timing(&mut self, on: bool) -> Result<()> {
        self.imp_mut().set_kernel_timing(on)
    }
    /// Zeroes the counters.
    pub fn reset_counters(&mut self) {
        self.counter_handle().reset();
    }
    fn scratch(&mut self) -> &mut Scratch {
        match self {
            Device::Gpu(g) => &mut g.scratch,
            Device::Cpu(c) => &mut c.scratch,
        }
    }
    /// Which adapter (or the CPU) runs this device's work.
    pub fn info(&self) -> &DeviceInfo {
        self.imp().info()
    }
    /// True for the wgpu backend.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Device::Gpu(_))
    }
    /// The wgpu backend, if that is what this is.
    pub fn as_gpu(&self) -> Option<&GpuDevice> {
        match self {
            Device::Gpu(g) => Some(g),
            Device::Cpu(_) => None,
        }
    }
    /// The wgpu backend, mutably (e.g. to set the readback timeout).
    pub fn as_gpu_mut(&mut self) -> Option<&mut GpuDevice> {
        match self {
            Device::Gpu(g) => Some(g),
            Device::Cpu(_) => None,
        }
    }
    /// A zero-filled buffer of `len` elements.
    pub fn alloc<T: Pod>(&mut self, label: &str, len: usize) -> Result<Buf<T>> {
        let id = self.imp_mut().alloc(label, size_of::<T>() as u32, len)?;
        Ok(Buf {
            id,
            len,
            _t: PhantomData,
        })
    }
    /// A buffer holding `data`.
    pub fn upload<T: Pod>(&mut self, label: &str, data: &[T]) -> Result<Buf<T>> {
        let b = self.alloc::<T>(label, data.len())?;
        self.write(&b, 0, data)?;
        Ok(b)
    }
    /// Frees a buffer (later use of its handle is an error).
    pub fn free<T>(&mut self, buf: Buf<T>) {
        self.imp_mut().free(buf.id);
    }
    /// Replaces `buf` by a buffer of `len` elements when it holds fewer (its contents are not
    /// kept; a plan recorded with the old one is stale); true when it did.
    pub fn grow<T: Pod>(&mut self, buf: &mut Buf<T>, label: &str, len: usize) -> Result<bool> {
        if buf.len >= len {
            return Ok(false);
        }
        let new = self.alloc(label, len)?;
        self.free(std::mem::replace(buf, new));
        Ok(true)
    }
    /// Writes `data` at element `start`. Ordered after every earlier submit and before every later one.
    pub fn write<T: Pod>(&mut self, buf: &Buf<T>, start: usize, data: &[T]) -> Result<()> {
        if start + data.len() > buf.len {
            return Err(JelloError::Invalid(format!(
                "write of {} elements at {start} overflows a buffer of {}",
                data.len(),
                buf.len
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        self.imp_mut().write_bytes(
            buf.id,
            (start * size_of::<T>()) as u64,
            bytemuck::cast_slice(data),
        )?;
        let n = size_of_val(data) as u64;
        self.counter_handle().add(|c| c.upload_bytes += n);
        Ok(())
    }
    /// Reads the whole buffer back (waits for the GPU, with a timeout).
    pub fn read<T: Pod>(&mut self, buf: &Buf<T>) -> Result<Vec<T>> {
        self.read_range(buf, 0..buf.len)
    }
    /// Reads elements `range` back.
    pub fn read_range<T: Pod>(&mut self, buf: &Buf<T>, range: Range<usize>) -> Result<Vec<T>> {
        if range.start > range.end || range.end > buf.len {
            return Err(JelloError::Invalid(format!(
                "read of {range:?} outside a buffer of {}",
                buf.len
            )));
        }
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let s = size_of::<T>() as u64;
        let bytes = self
            .imp_mut()
            .read_bytes(buf.id, range.start as u64 * s..range.end as u64 * s)?;
        let n = bytes.len() as u64;
        self.counter_handle().add(|c| {
            c.syncs += 1;
            c.readback_bytes += n;
        });
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
    /// Runs one kernel now (a one-dispatch plan).
    pub fn dispatch(
        &mut self,
        kernel: Kernel,
        bufs: &[BufferId],
        params: Params,
        n: u32,
    ) -> Result<()> {
        let mut p = Plan::new();
        p.dispatch(kernel, bufs, params, n);
        self.submit(&p)
    }
    /// Executes a plan: one queue submission on the GPU, the twins in order on the CPU.
    /// Returns without waiting for the GPU; reads wait.
    pub fn submit(&mut self, plan: &Plan) -> Result<()> {
        let steps = self.resolve(plan)?;
        self.imp_mut().run(&steps)?;
        self.count(&steps);
        Ok(())
    }
    /// Waits until all submitted work has finished (timeout → error).
    pub fn wait_idle(&mut self) -> Result<()> {
        self.imp_mut().wait_idle()?;
        self.counter_handle().add(|c| c.syncs += 1);
        Ok(())
    }
    /// Adds a submitted plan's steps to the counters.
    fn count(&mut self, steps: &[Step]) {
        if steps.is_empty() {
            return;
        }
        let mut per = Vec::with_capacity(steps.len());
        let (mut copies, mut copy_bytes) = (0, 0);
        for s in steps {
            match s {
                Step::Dispatch {
                    kernel,
                    bufs,
                    params,
                } => {
                    let (mut read, mut write) = (0, 0);
                    for (bd, id) in kernel.desc().bindings.iter().zip(bufs) {
                        let len = self.imp().meta(*id).map_or(0, |(_, l)| l);
                        let b = touched(bd.len, params.n, params.u0, len) * bd.elem_bytes as u64;
                        read += b;
                        if bd.access == kernel::Access::ReadWrite {
                            write += b;
                        }
                    }
                    per.push((*kernel, read, write));
                }
                Step::Copy { bytes, .. } => {
                    copies += 1;
                    copy_bytes += 2 * bytes;
                }
            }
        }
        self.counter_handle().add(|c| {
            c.submits += 1;
            c.copies += copies;
            c.copy_bytes += copy_bytes;
            for (kernel, read, write) in per {
                c.count_dispatch(kernel, read, write);
            }
        });
    }
    /// Σ a[0..n], as f32 computed on the device.
    pub fn sum(&mut self, a: &Buf<f32>, n: u32) -> Result<f32> {
        self.scalar(|p, out| {
            p.sum(a, n, out, 0);
        })
    }
    /// `Σ a[i]·b[i]` over `0..n`.
    pub fn dot(&mut self, a: &Buf<f32>, b: &Buf<f32>, n: u32) -> Result<f32> {
        self.scalar(|p, out| {
            p.dot(a, b, n, out, 0);
        })
    }
    /// Euclidean norm `√(Σ a[i]²)` over 0..n (the dot reduction, square root on the host).
    pub fn norm(&mut self, a: &Buf<f32>, n: u32) -> Result<f32> {
        Ok(self.dot(a, a, n)?.max(0.0).sqrt())
    }
    /// `max |a[i]|` over `0..n`.
    pub fn max_abs(&mut self, a: &Buf<f32>, n: u32) -> Result<f32> {
        self.scalar(|p, out| {
            p.max_abs(a, n, out, 0);
        })
    }
    fn scalar(&mut self, record: impl FnOnce(&mut Plan, &Buf<f32>)) -> Result<f32> {
        let out = self.alloc::<f32>("reduction result", 1)?;
        let mut p = Plan::new();
        record(&mut p, &out);
        let r = self.submit(&p).and_then(|_| self.read(&out));
        self.free(out);
        Ok(r?[0])
    }

    fn meta(&self, id: BufferId) -> Result<(u32, usize)> {
        self.imp()
            .meta(id)
            .ok_or_else(|| JelloError::Invalid(format!("buffer {id:?} does not exist (freed?)")))
    }

    fn ensure_scratch(&mut self, len: usize) -> Result<(BufferId, BufferId)> {
        if let Some((a, b, cap)) = self.scratch().bufs {
            if cap >= len {
                return Ok((a, b));
            }
            self.imp_mut().free(a);
            self.imp_mut().free(b);
            self.scratch().bufs = None;
        }
        let cap = len.next_power_of_two().max(64);
        let a = self.imp_mut().alloc("reduction scratch A", 4, cap)?;
        let b = self.imp_mut().alloc("reduction scratch B", 4, cap)?;
        self.scratch().bufs = Some((a, b, cap));
        Ok((a, b))
    }

    /// Expands reductions, fills `n`, and validates every dispatch against the kernel table.
    fn resolve(&mut self, plan: &Plan) -> Result<Vec<Step>> {
        let need = plan
            .ops
            .iter()
            .map(|op| match op {
                Op::Reduce { n, .. } => (*n as usize).div_ceil(REDUCE_BLOCK),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let scratch = if need > 1 {
            Some(self.ensure_scratch(need)?)
        } else {
            None
        };
        let mut steps = Vec::with_capacity(plan.ops.len());
        let push = |steps: &mut Vec<Step>,
                    kernel: Kernel,
                    bufs: Vec<BufferId>,
                    mut params: Params,
                    n: u32| {
            params.n = n;
            steps.push(Step::Dispatch {
                kernel,
                bufs,
                params,
            });
        };
        for op in &plan.ops {
            match op {
                Op::Dispatch {
                    kernel,
                    bufs,
                    params,
                    n,
                } => push(&mut steps, *kernel, bufs.clone(), *params, *n),
                Op::Copy {
                    src,
                    src_offset,
                    dst,
                    dst_offset,
                    bytes,
                } => {
                    let (se, sl) = self.meta(*src)?;
                    let (de, dl) = self.meta(*dst)?;
                    if src_offset + bytes > se as u64 * sl as u64
                        || dst_offset + bytes > de as u64 * dl as u64
                    {
                        return Err(JelloError::Invalid("plan copy outside a buffer".into()));
                    }
                    steps.push(Step::Copy {
                        src: *src,
                        src_offset: *src_offset,
                        dst: *dst,
                        dst_offset: *dst_offset,
                        bytes: *bytes,
                    });
                }
                Op::Reduce {
                    op,
                    a,
                    b,
                    n,
                    out,
                    index,
                } => {
                    let (first, rest) = match op {
                        ReduceOp::Sum => (Kernel::ReduceSum, Kernel::ReduceSum),
                        ReduceOp::Dot => (Kernel::ReduceDot, Kernel::ReduceSum),
                        ReduceOp::MaxAbs => (Kernel::ReduceMaxAbs, Kernel::ReduceMaxAbs),
                    };
                    let mut inputs = vec![*a];
                    inputs.extend(b.iter().copied());
                    let mut len = *n as usize;
                    let mut kernel = first;
                    let mut src_bufs = inputs;
                    let (mut s0, mut s1) = scratch.unwrap_or((*out, *out));
                    loop {
                        let groups = len.div_ceil(REDUCE_BLOCK).max(1);
                        if groups == 1 {
                            let mut bufs = src_bufs.clone();
                            bufs.push(*out);
                            push(
                                &mut steps,
                                kernel,
                                bufs,
                                Params::new().u0(*index),
                                len as u32,
                            );
                            break;
                        }
                        let mut bufs = src_bufs.clone();
                        bufs.push(s0);
                        push(&mut steps, kernel, bufs, Params::new(), len as u32);
                        src_bufs = vec![s0];
                        std::mem::swap(&mut s0, &mut s1);
                        len = groups;
                        kernel = rest;
                    }
                }
            }
        }
        for s in &steps {
            if let Step::Dispatch {
                kernel,
                bufs,
                params,
            } = s
            {
                let metas = bufs
                    .iter()
                    .map(|id| self.meta(*id))
                    .collect::<Result<Vec<_>>>()?;
                kernel::validate(kernel.desc(), params, &metas)?;
                for (i, (bd, id)) in kernel.desc().bindings.iter().zip(bufs).enumerate() {
                    let aliased = bufs[..i].iter().zip(kernel.desc().bindings).any(|(o, od)| {
                        o == id
                            && (bd.access == kernel::Access::ReadWrite
                                || od.access == kernel::Access::ReadWrite)
                    });
                    if aliased {
                        return Err(JelloError::Invalid(format!(
                            "kernel `{}`: buffer {id:?} bound twice with a writable binding",
                            kernel.desc().name
                        )));
                    }
                }
            }
        }
        Ok(steps)
    }
}
