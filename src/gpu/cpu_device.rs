//! The CPU backend: buffers are word vectors, dispatches run the kernels' Rust twins.

use super::adapter::DeviceInfo;
use super::device::{BackendImpl, BufferId, CounterHandle, Scratch, Step};
use super::kernel::{Access, Bindings};
use crate::{JelloError, Result};
use std::ops::Range;

struct CpuBuf {
    words: Vec<u32>,
    elem_bytes: u32,
    len: usize,
}

/// CPU implementation of the device API (the kernels' twins, rayon-parallel).
pub struct CpuDevice {
    info: DeviceInfo,
    bufs: Vec<Option<CpuBuf>>,
    pub(crate) scratch: Scratch,
    pub(crate) counters: CounterHandle,
    /// Whether each twin call is timed ([`crate::gpu::Device::set_kernel_timing`]).
    timing: bool,
}

impl Default for CpuDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuDevice {
    /// A CPU device.
    pub fn new() -> Self {
        CpuDevice {
            info: DeviceInfo::cpu(),
            bufs: Vec::new(),
            scratch: Scratch::default(),
            counters: CounterHandle::default(),
            timing: false,
        }
    }
    fn get(&self, id: BufferId) -> Result<&CpuBuf> {
        self.bufs
            .get(id.0 as usize)
            .and_then(|b| b.as_ref())
            .ok_or_else(|| JelloError::Invalid(format!("buffer {id:?} does not exist")))
    }
}

impl BackendImpl for CpuDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn alloc(&mut self, _label: &str, elem_bytes: u32, len: usize) -> Result<BufferId> {
        debug_assert!(elem_bytes.is_multiple_of(4));
        let words = len
            .checked_mul(elem_bytes as usize / 4)
            .ok_or_else(|| JelloError::Invalid("buffer size overflows".into()))?;
        self.bufs.push(Some(CpuBuf {
            words: vec![0; words],
            elem_bytes,
            len,
        }));
        Ok(BufferId(self.bufs.len() as u32 - 1))
    }
    fn free(&mut self, id: BufferId) {
        if let Some(b) = self.bufs.get_mut(id.0 as usize) {
            *b = None;
        }
    }
    fn meta(&self, id: BufferId) -> Option<(u32, usize)> {
        self.get(id).ok().map(|b| (b.elem_bytes, b.len))
    }
    fn write_bytes(&mut self, id: BufferId, offset: u64, data: &[u8]) -> Result<()> {
        self.get(id)?;
        let b = self.bufs[id.0 as usize].as_mut().expect("checked");
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut b.words);
        bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn read_bytes(&mut self, id: BufferId, range: Range<u64>) -> Result<Vec<u8>> {
        let b = self.get(id)?;
        let bytes: &[u8] = bytemuck::cast_slice(&b.words);
        Ok(bytes[range.start as usize..range.end as usize].to_vec())
    }
    fn run(&mut self, steps: &[Step]) -> Result<()> {
        for s in steps {
            match s {
                Step::Copy {
                    src,
                    src_offset,
                    dst,
                    dst_offset,
                    bytes,
                } => {
                    let data = self.read_bytes(*src, *src_offset..src_offset + bytes)?;
                    self.write_bytes(*dst, *dst_offset, &data)?;
                }
                Step::Dispatch {
                    kernel,
                    bufs,
                    params,
                } => {
                    let desc = kernel.desc();
                    // Take the writable buffers out so the read-only ones can be borrowed alongside.
                    let mut taken: Vec<(usize, Vec<u32>)> = Vec::new();
                    for (bd, id) in desc.bindings.iter().zip(bufs) {
                        if bd.access == Access::ReadWrite {
                            let b = self.bufs[id.0 as usize].as_mut().expect("validated");
                            taken.push((id.0 as usize, std::mem::take(&mut b.words)));
                        }
                    }
                    let result = {
                        let mut bindings = Bindings::new();
                        let mut rw_iter = taken.iter_mut();
                        for (bd, id) in desc.bindings.iter().zip(bufs) {
                            if bd.access == Access::ReadWrite {
                                let (_, w) = rw_iter.next().expect("one per writable binding");
                                bindings.push_rw(w);
                            } else {
                                bindings.push_ro(
                                    &self.bufs[id.0 as usize].as_ref().expect("validated").words,
                                );
                            }
                        }
                        let t0 = self.timing.then(crate::clock::Instant::now);
                        let r = (desc.cpu)(params, &mut bindings);
                        if let Some(t0) = t0 {
                            let ns = t0.elapsed().as_nanos() as u64;
                            self.counters.add(|c| c.add_time(*kernel, ns));
                        }
                        r
                    };
                    for (i, w) in taken {
                        self.bufs[i].as_mut().expect("validated").words = w;
                    }
                    result.map_err(|e| match e {
                        JelloError::Invalid(m) => {
                            JelloError::Invalid(format!("kernel `{}`: {m}", desc.name))
                        }
                        other => other,
                    })?;
                }
            }
        }
        Ok(())
    }
    fn wait_idle(&mut self) -> Result<()> {
        Ok(())
    }
    fn set_kernel_timing(&mut self, on: bool) -> Result<()> {
        self.timing = on;
        Ok(())
    }
}
