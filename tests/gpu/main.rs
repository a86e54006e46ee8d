//! GPU integration tests (kernels against their CPU twins, device solvers against the f64
//! ones, the surface renderer): one module per former `tests/<name>.rs`. `.ci/run` runs this
//! crate on Vulkan (lavapipe) and again on GL (llvmpipe); a test FAILS when no adapter is found.
//! One module: `WGPU_BACKEND=vulkan cargo test --test gpu <name>::`.
//!
//! One binary instead of one per file: each integration-test binary links the whole
//! library, and on a 2-core machine the links dominated the suite's build.

#[path = "../common/mod.rs"]
mod common;
#[path = "../contact_common/mod.rs"]
mod contact_common;

mod gpu_admm;
mod gpu_broad;
mod gpu_ccd;
mod gpu_compare;
mod gpu_compare_jgs2;
mod gpu_contact_kernels;
mod gpu_counts;
mod gpu_dot;
mod gpu_invariants;
mod gpu_jgs2;
mod gpu_jgs2_ipc;
mod gpu_kernels;
mod gpu_multilevel;
mod gpu_qn;
mod gpu_surface;
mod gpu_timing;
mod render_gpu;
mod run_png;
