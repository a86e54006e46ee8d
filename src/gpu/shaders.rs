//! The WGSL kernels, embedded with `include_str!` and preprocessed at first use.
//!
//! Preprocessing is one directive: a line `#import name` is replaced by
//! `shaders/shared/name.wgsl` (each snippet once per kernel; snippets may import others).
//! `build.rs` runs the same preprocessing and validates every kernel with naga, so a broken
//! shader fails `cargo build`. The sources are embedded from the source tree rather than from
//! `OUT_DIR` so that several checkouts sharing one cargo target directory can never pick up
//! each other's generated files.

use std::collections::HashSet;
use std::sync::LazyLock;

/// Kernel files (`shaders/<name>.wgsl`), sorted by name.
static FILES: &[(&str, &str)] = &[
    // ---- ADMM-PD ----
    (
        "admm_gather",
        include_str!("../../shaders/admm_gather.wgsl"),
    ),
    ("admm_local", include_str!("../../shaders/admm_local.wgsl")),
    (
        "admm_primal",
        include_str!("../../shaders/admm_primal.wgsl"),
    ),
    ("axpy", include_str!("../../shaders/axpy.wgsl")),
    (
        "deformation_gradient",
        include_str!("../../shaders/deformation_gradient.wgsl"),
    ),
    // ---- device backend of the generic solver loops ----
    (
        "dev_combine",
        include_str!("../../shaders/dev_combine.wgsl"),
    ),
    ("dev_dots", include_str!("../../shaders/dev_dots.wgsl")),
    (
        "dev_curvature",
        include_str!("../../shaders/dev_curvature.wgsl"),
    ),
    (
        "dev_element_energy",
        include_str!("../../shaders/dev_element_energy.wgsl"),
    ),
    (
        "dev_rounding",
        include_str!("../../shaders/dev_rounding.wgsl"),
    ),
    (
        "dev_step_bound",
        include_str!("../../shaders/dev_step_bound.wgsl"),
    ),
    ("dev_trial", include_str!("../../shaders/dev_trial.wgsl")),
    (
        "dev_vertex_energy",
        include_str!("../../shaders/dev_vertex_energy.wgsl"),
    ),
    (
        "dev_vertex_gradient",
        include_str!("../../shaders/dev_vertex_gradient.wgsl"),
    ),
    ("elastic", include_str!("../../shaders/elastic.wgsl")),
    (
        "elastic_list",
        include_str!("../../shaders/elastic_list.wgsl"),
    ),
    (
        "gather_gradient",
        include_str!("../../shaders/gather_gradient.wgsl"),
    ),
    (
        "gather_hessian_diag",
        include_str!("../../shaders/gather_hessian_diag.wgsl"),
    ),
    ("hess_vec", include_str!("../../shaders/hess_vec.wgsl")),
    ("inertia", include_str!("../../shaders/inertia.wgsl")),
    // ---- IPC contact pairs ----
    (
        "ipc_friction",
        include_str!("../../shaders/ipc_friction.wgsl"),
    ),
    ("ipc_gather", include_str!("../../shaders/ipc_gather.wgsl")),
    ("ipc_pairs", include_str!("../../shaders/ipc_pairs.wgsl")),
    ("jgs2_apply", include_str!("../../shaders/jgs2_apply.wgsl")),
    (
        "jgs2_combine",
        include_str!("../../shaders/jgs2_combine.wgsl"),
    ),
    ("jgs2_dots", include_str!("../../shaders/jgs2_dots.wgsl")),
    (
        "jgs2_hm_backward",
        include_str!("../../shaders/jgs2_hm_backward.wgsl"),
    ),
    (
        "jgs2_hm_coupling",
        include_str!("../../shaders/jgs2_hm_coupling.wgsl"),
    ),
    (
        "jgs2_hm_forward",
        include_str!("../../shaders/jgs2_hm_forward.wgsl"),
    ),
    (
        "jgs2_face_bound",
        include_str!("../../shaders/jgs2_face_bound.wgsl"),
    ),
    (
        "jgs2_face_terms",
        include_str!("../../shaders/jgs2_face_terms.wgsl"),
    ),
    (
        "jgs2_rotation",
        include_str!("../../shaders/jgs2_rotation.wgsl"),
    ),
    (
        "jgs2_system",
        include_str!("../../shaders/jgs2_system.wgsl"),
    ),
    (
        "jgs2_tree_sum",
        include_str!("../../shaders/jgs2_tree_sum.wgsl"),
    ),
    ("jgs2_trial", include_str!("../../shaders/jgs2_trial.wgsl")),
    (
        "jgs2_vertex_terms",
        include_str!("../../shaders/jgs2_vertex_terms.wgsl"),
    ),
    // ---- multilevel solver ----
    (
        "ml_block_apply",
        include_str!("../../shaders/ml_block_apply.wgsl"),
    ),
    ("ml_bsr_hv", include_str!("../../shaders/ml_bsr_hv.wgsl")),
    (
        "ml_element_hv",
        include_str!("../../shaders/ml_element_hv.wgsl"),
    ),
    ("ml_lift", include_str!("../../shaders/ml_lift.wgsl")),
    (
        "ml_restrict",
        include_str!("../../shaders/ml_restrict.wgsl"),
    ),
    ("reduce_dot", include_str!("../../shaders/reduce_dot.wgsl")),
    (
        "reduce_max_abs",
        include_str!("../../shaders/reduce_max_abs.wgsl"),
    ),
    ("reduce_sum", include_str!("../../shaders/reduce_sum.wgsl")),
    ("scale", include_str!("../../shaders/scale.wgsl")),
    ("svd3", include_str!("../../shaders/svd3.wgsl")),
    ("vbd_system", include_str!("../../shaders/vbd_system.wgsl")),
    (
        "vertex_solve",
        include_str!("../../shaders/vertex_solve.wgsl"),
    ),
];

/// Shared snippets (`shaders/shared/<name>.wgsl`).
static SHARED: &[(&str, &str)] = &[
    (
        "admm_prox",
        include_str!("../../shaders/shared/admm_prox.wgsl"),
    ),
    (
        "elastic_element",
        include_str!("../../shaders/shared/elastic_element.wgsl"),
    ),
    (
        "hess_block",
        include_str!("../../shaders/shared/hess_block.wgsl"),
    ),
    (
        "ipc_pair",
        include_str!("../../shaders/shared/ipc_pair.wgsl"),
    ),
    ("hmatrix", include_str!("../../shaders/shared/hmatrix.wgsl")),
    ("jgs2", include_str!("../../shaders/shared/jgs2.wgsl")),
    ("linalg", include_str!("../../shaders/shared/linalg.wgsl")),
    ("mat3", include_str!("../../shaders/shared/mat3.wgsl")),
    (
        "material",
        include_str!("../../shaders/shared/material.wgsl"),
    ),
    (
        "obstacle",
        include_str!("../../shaders/shared/obstacle.wgsl"),
    ),
    ("params", include_str!("../../shaders/shared/params.wgsl")),
    ("surface", include_str!("../../shaders/shared/surface.wgsl")),
    ("sym12", include_str!("../../shaders/shared/sym12.wgsl")),
    // ---- device backend ----
    (
        "wg_reduce",
        include_str!("../../shaders/shared/wg_reduce.wgsl"),
    ),
];

static PREPROCESSED: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(name, src)| (*name, preprocess(src, &mut HashSet::new())))
        .collect()
});

fn preprocess(src: &str, seen: &mut HashSet<String>) -> String {
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("#import") {
            let name = rest.trim();
            if seen.insert(name.to_string()) {
                // build.rs has already rejected unknown snippet names.
                if let Some((_, s)) = SHARED.iter().find(|(n, _)| *n == name) {
                    out.push_str(&preprocess(s, seen));
                }
            }
            out.push('\n');
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Names of all embedded kernels (file stems in `shaders/`).
pub fn names() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(n, _)| *n)
}

/// The preprocessed WGSL of kernel `name`.
pub fn source(name: &str) -> Option<&'static str> {
    PREPROCESSED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s.as_str())
}

/// How a shader accesses one of its bindings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindingKind {
    /// `var<uniform>`.
    Uniform,
    /// `var<storage, read>`.
    StorageRead,
    /// `var<storage, read_write>`.
    StorageReadWrite,
}

/// One resource binding as declared by a shader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShaderBinding {
    /// Bind group (0 = storage buffers, 1 = params).
    pub group: u32,
    /// Binding index.
    pub binding: u32,
    /// Access.
    pub kind: BindingKind,
}

/// A shader's interface as naga sees it.
#[derive(Clone, Debug)]
pub struct Reflection {
    /// Compute entry point name.
    pub entry: String,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Bindings sorted by (group, binding).
    pub bindings: Vec<ShaderBinding>,
}

/// Parses and validates kernel `name` with naga and reflects its interface.
pub fn reflect(name: &str) -> Result<Reflection, String> {
    use wgpu::naga;
    let src = source(name).ok_or_else(|| format!("no shader `{name}`"))?;
    let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(src))?;
    let ep = module
        .entry_points
        .iter()
        .find(|e| e.stage == naga::ShaderStage::Compute)
        .ok_or_else(|| format!("{name}: no compute entry point"))?;
    let mut bindings = Vec::new();
    for (_, gv) in module.global_variables.iter() {
        let Some(rb) = &gv.binding else { continue };
        let kind = match gv.space {
            naga::AddressSpace::Uniform => BindingKind::Uniform,
            naga::AddressSpace::Storage { access }
                if access.contains(naga::StorageAccess::STORE) =>
            {
                BindingKind::StorageReadWrite
            }
            naga::AddressSpace::Storage { .. } => BindingKind::StorageRead,
            _ => {
                return Err(format!(
                    "{name}: unsupported resource at binding {}",
                    rb.binding
                ))
            }
        };
        bindings.push(ShaderBinding {
            group: rb.group,
            binding: rb.binding,
            kind,
        });
    }
    bindings.sort_by_key(|b| (b.group, b.binding));
    Ok(Reflection {
        entry: ep.name.clone(),
        workgroup_size: ep.workgroup_size,
        bindings,
    })
}
