//! The GPU-vs-twin kernel harness shared by `gpu_kernels.rs` and `gpu_jgs2.rs`: upload buffers,
//! dispatch one kernel on a device, read every buffer back as f32 words.

use jello::gpu::{
    Buf, BufferId, Device, ElemParams, GpuContact, GpuFrictionPair, GpuLocalSystem, GpuMat3,
    GpuPair, GpuVec4, GpuVertexInfo, Kernel, Params,
};

/// Input or output buffer contents for [`run_on`] (outputs are given NaN-filled, so unwritten
/// entries show).
#[derive(Clone)]
pub enum Data {
    F(Vec<f32>),
    U(Vec<u32>),
    V(Vec<GpuVec4>),
    T(Vec<[u32; 4]>),
    M(Vec<GpuMat3>),
    E(Vec<ElemParams>),
    C(Vec<GpuContact>),
    I(Vec<GpuVertexInfo>),
    S(Vec<GpuLocalSystem>),
    P(Vec<GpuPair>),
    FP(Vec<GpuFrictionPair>),
}

impl Data {
    /// Words that WGSL never writes (mat3x3 column padding), masked before comparing.
    fn padding(&self, word: usize) -> bool {
        match self {
            Data::M(_) => word % 4 == 3,
            Data::S(_) => matches!(word % 32, 3 | 7 | 11 | 19 | 23 | 27),
            _ => false,
        }
    }
}

/// Reads one uploaded buffer back as f32 words.
type Reader = Box<dyn Fn(&mut Device) -> Vec<f32>>;

/// Uploads `data` on `dev`, dispatches `kernel` over `n` items, reads every buffer back as f32
/// words (u32 data bit-cast, padding words zeroed, contact kinds as small numbers).
pub fn run_on(
    dev: &mut Device,
    kernel: Kernel,
    data: &[Data],
    params: Params,
    n: u32,
) -> Vec<Vec<f32>> {
    fn up<T: bytemuck::Pod>(dev: &mut Device, v: &[T]) -> (BufferId, Reader) {
        let b: Buf<T> = dev.upload("test", v).unwrap();
        (
            b.id(),
            Box::new(move |d: &mut Device| bytemuck::cast_slice(&d.read(&b).unwrap()).to_vec()),
        )
    }
    let handles: Vec<_> = data
        .iter()
        .map(|d| match d {
            Data::F(v) => up(dev, v),
            Data::U(v) => up(dev, v),
            Data::V(v) => up(dev, v),
            Data::T(v) => up(dev, v),
            Data::M(v) => up(dev, v),
            Data::E(v) => up(dev, v),
            Data::C(v) => up(dev, v),
            Data::I(v) => up(dev, v),
            Data::S(v) => up(dev, v),
            Data::P(v) => up(dev, v),
            Data::FP(v) => up(dev, v),
        })
        .collect();
    let ids: Vec<_> = handles.iter().map(|h| h.0).collect();
    dev.dispatch(kernel, &ids, params, n).unwrap();
    handles
        .iter()
        .zip(data)
        .map(|(h, d)| {
            let mut v = (h.1)(dev);
            for (i, x) in v.iter_mut().enumerate() {
                if d.padding(i) {
                    *x = 0.0;
                }
                if matches!(d, Data::C(_)) && i % 8 == 7 {
                    // The kind's bits (NONE is a NaN pattern) as a small number; poison stays NaN.
                    *x = match x.to_bits() {
                        k @ 0..=2 => k as f32,
                        GpuContact::NONE => -1.0,
                        _ => f32::NAN,
                    };
                }
            }
            v
        })
        .collect()
}

/// Runs the kernel on the CPU twins and (when an adapter exists) on the GPU; see
/// [`super::gpu_device`] for what happens without one.
pub fn run_both(
    kernel: Kernel,
    data: &[Data],
    params: Params,
    n: u32,
) -> (Vec<Vec<f32>>, Option<Vec<Vec<f32>>>) {
    let cpu = run_on(&mut Device::cpu(), kernel, data, params, n);
    let gpu = super::gpu_device().map(|mut d| run_on(&mut d, kernel, data, params, n));
    (cpu, gpu)
}

/// NaN-poisoned outputs.
pub fn nan_f(n: usize) -> Data {
    Data::F(vec![f32::NAN; n])
}
pub fn nan_v4(n: usize) -> Data {
    Data::V(vec![[f32::NAN; 4]; n])
}
fn nan_mat3() -> GpuMat3 {
    GpuMat3 {
        cols: [[f32::NAN; 4]; 3],
    }
}
pub fn nan_m(n: usize) -> Data {
    Data::M(vec![nan_mat3(); n])
}
pub fn nan_s(n: usize) -> Data {
    let m = nan_mat3();
    Data::S(vec![
        GpuLocalSystem {
            a: m,
            r: [f32::NAN; 4],
            a_fallback: m,
            r_fallback: [f32::NAN; 4],
        };
        n
    ])
}
