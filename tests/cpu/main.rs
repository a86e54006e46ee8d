//! CPU integration tests: one module per former `tests/<name>.rs` (run one with
//! `cargo test --test cpu <name>::`). Some also check the GPU path in passing (setup choosing
//! the adapter, a GPU resume); those run on the Vulkan pass of `.ci/run` only.
//!
//! One binary instead of one per file: each integration-test binary links the whole
//! library, and on a 2-core machine the links dominated the suite's build.

#[path = "../common/mod.rs"]
mod common;
#[path = "../contact_common/mod.rs"]
mod contact_common;

mod adjoint;
mod admm;
mod admm_anderson;
mod admm_contact;
mod admm_strain;
mod backend_pcg;
mod bdf2;
mod contact_broad;
mod contact_ccd;
mod contact_crossings;
mod contact_distance;
mod contact_friction;
mod contact_intersect;
mod contact_ipc;
mod contact_obstacle_files;
mod contact_obstacles;
mod contact_scenes;
mod dot;
mod dot_tss;
mod fuzz_inputs;
mod invariants;
mod jgs2;
mod jgs2_cache;
mod jgs2_ipc;
mod jgs2_pcg;
mod lbfgs_ipc;
mod material;
mod mesh_generate;
mod mesh_hostile;
mod mesh_output;
mod mesh_readers;
mod mesh_topology;
mod mesh_validation;
mod multilevel;
mod newton;
mod newton_filter;
mod pd;
mod pin_carry;
mod plot;
mod potential;
mod qn;
mod render_cpu;
mod resume;
mod scene_validation;
mod scenes_cantilever;
mod scenes_drop;
mod scenes_jgs2;
mod scenes_momentum;
mod scenes_stiff_soft;
mod scenes_tss;
mod scenes_twist;
mod sim_pin_targets;
mod solver_auto;
mod solver_work;
mod statics;
