//! Build script: preprocesses, parses, validates and reflects every WGSL kernel in `shaders/`
//! with naga, so a broken shader fails `cargo build`, and generates from the reflection the
//! mechanical part of the kernel table (vello's pattern), included by `src/gpu/kernel/table.rs`
//! and `src/gpu/shaders.rs`:
//!
//! * `$OUT_DIR/kernels.rs` — per kernel (keyed by its `Kernel` variant, the file stem in
//!   CamelCase): the workgroup size and the storage bindings (name, read / read-write, element
//!   size) as `shader!(Variant)`; the typed call of the CPU twin in binding order as
//!   `twin_call!(Variant, path::to::twin)`, where each binding's Rust element type comes from
//!   its WGSL element type (so the compiler checks the twin's signature against the shader); and
//!   `const` assertions that each Rust layout type has the byte size naga gives the WGSL type
//!   it stands for.
//! * `$OUT_DIR/shader_sources.rs` — the kernel and snippet sources, embedded with `include_str!`
//!   from this checkout's `shaders/` (named through `CARGO_MANIFEST_DIR`, so a checkout never
//!   embeds another's sources even where several share a target directory).
//!
//! Every kernel must have one compute entry point `main`, its storage buffers at group 0,
//! bindings 0..n (n ≤ 8, wgpu's `Limits::default()`), the `Params` uniform at group 1 binding 0,
//! and at most 256 invocations per workgroup. The `#import` preprocessor is
//! `src/gpu/wgsl_import.rs`, shared with the runtime.

#[path = "src/gpu/wgsl_import.rs"]
mod wgsl_import;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// `wgpu::Limits::default().max_storage_buffers_per_shader_stage`.
const MAX_STORAGE_BUFFERS: usize = 8;
/// `wgpu::Limits::default().max_compute_invocations_per_workgroup`.
const MAX_INVOCATIONS: u32 = 256;
/// `wgpu::Limits::default().max_compute_workgroup_size_{x,y,z}`.
const MAX_WORKGROUP: [u32; 3] = [256, 256, 64];

/// WGSL struct name → its Rust twin in `src/gpu/layout.rs` (the one naming convention naga
/// cannot see: the WGSL side predates the `Gpu` prefix). A struct missing here fails the build.
const LAYOUT_STRUCTS: &[(&str, &str)] = &[
    ("Params", "Params"),
    ("ElemParams", "ElemParams"),
    ("Contact", "GpuContact"),
    ("VertexInfo", "GpuVertexInfo"),
    ("LocalSystem", "GpuLocalSystem"),
    ("Pair", "GpuPair"),
    ("FrictionPair", "GpuFrictionPair"),
];

/// One storage binding as naga reports it.
struct Binding {
    name: String,
    read_write: bool,
    /// The array's stride: the size of one element in a buffer.
    elem_bytes: u32,
    /// The element type as WGSL spells it, for messages.
    wgsl: String,
    /// The Rust type a CPU twin sees the element as.
    rust: String,
}

/// One kernel's interface.
struct Reflected {
    stem: String,
    workgroup_size: [u32; 3],
    bindings: Vec<Binding>,
    /// Size naga gives the `Params` uniform.
    params_bytes: u32,
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let shader_dir = root.join("shaders");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/gpu/wgsl_import.rs");
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-changed=shaders/shared");

    let stems = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
            .filter_map(|p| p.file_stem()?.to_str().map(String::from))
            .collect();
        v.sort();
        v
    };
    let kernels = stems(&shader_dir);
    let snippet_names = stems(&shader_dir.join("shared"));
    let mut snippets = BTreeMap::new();
    for name in &snippet_names {
        let rel = wgsl_import::snippet_path(name);
        println!("cargo:rerun-if-changed={rel}");
        let text = fs::read_to_string(root.join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        snippets.insert(name.clone(), text);
    }

    let mut failures = Vec::new();
    let mut reflected = Vec::new();
    for stem in &kernels {
        let rel = format!("shaders/{stem}.wgsl");
        println!("cargo:rerun-if-changed={rel}");
        match check(&root, &rel, stem, &snippets) {
            Ok(r) => reflected.push(r),
            Err(e) => failures.push(e),
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("{f}");
        }
        panic!(
            "{} WGSL shader(s) failed validation:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    write_if_changed(&out_dir.join("kernels.rs"), &kernel_table(&reflected));
    write_if_changed(
        &out_dir.join("shader_sources.rs"),
        &shader_sources(&kernels, &snippet_names),
    );
}

/// Preprocesses, validates and reflects one kernel; errors name the file.
fn check(
    root: &Path,
    rel: &str,
    stem: &str,
    snippets: &BTreeMap<String, String>,
) -> Result<Reflected, String> {
    let text = fs::read_to_string(root.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
    let lookup = |name: &str| snippets.get(name).map(String::as_str);
    let src = wgsl_import::preprocess(rel, &text, &lookup).map_err(|e| e.to_string())?;
    let module =
        naga::front::wgsl::parse_str(&src).map_err(|e| e.emit_to_string_with_path(&src, rel))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string_with_path(&src, rel))?;
    reflect(&module, stem).map_err(|e| format!("{rel}: {e}"))
}

/// Reads a validated kernel's interface and checks it against the engine's conventions and
/// wgpu's default limits.
fn reflect(module: &naga::Module, stem: &str) -> Result<Reflected, String> {
    let computes: Vec<_> = module
        .entry_points
        .iter()
        .filter(|ep| ep.stage == naga::ShaderStage::Compute)
        .collect();
    let [ep] = computes[..] else {
        return Err(format!(
            "expected one compute entry point, found {}",
            computes.len()
        ));
    };
    if ep.name != "main" {
        return Err(format!(
            "the compute entry point is `{}`, expected `main`",
            ep.name
        ));
    }
    if ep.workgroup_size_overrides.is_some() {
        return Err("@workgroup_size must be constant (no overrides)".into());
    }
    let wg = ep.workgroup_size;
    let invocations: u32 = wg.iter().product();
    if invocations > MAX_INVOCATIONS || wg.iter().zip(MAX_WORKGROUP).any(|(&w, m)| w > m) {
        return Err(format!(
            "@workgroup_size{wg:?} exceeds wgpu's default limits: at most \
             {MAX_INVOCATIONS} invocations per workgroup, {MAX_WORKGROUP:?} per dimension"
        ));
    }

    let mut storage = Vec::new();
    let mut params_bytes = None;
    for (_, gv) in module.global_variables.iter() {
        let Some(rb) = &gv.binding else { continue };
        let name = gv.name.clone().unwrap_or_default();
        let at = format!("@group({}) @binding({}) `{name}`", rb.group, rb.binding);
        match (rb.group, gv.space) {
            (0, naga::AddressSpace::Storage { access }) => {
                let naga::TypeInner::Array {
                    base,
                    size: naga::ArraySize::Dynamic,
                    stride,
                } = module.types[gv.ty].inner
                else {
                    return Err(format!(
                        "{at}: a storage binding must be a runtime-sized array"
                    ));
                };
                let (wgsl, rust) = element_type(module, base).map_err(|e| format!("{at}: {e}"))?;
                storage.push((
                    rb.binding,
                    Binding {
                        name,
                        read_write: access.contains(naga::StorageAccess::STORE),
                        elem_bytes: stride,
                        wgsl,
                        rust,
                    },
                ));
            }
            (1, naga::AddressSpace::Uniform) if rb.binding == 0 => {
                let ty = &module.types[gv.ty];
                match (&ty.name, &ty.inner) {
                    (Some(n), naga::TypeInner::Struct { span, .. }) if n == "Params" => {
                        params_bytes = Some(*span)
                    }
                    _ => return Err(format!("{at}: the uniform must be `Params`")),
                }
            }
            _ => {
                return Err(format!(
                    "{at}: storage buffers are group 0, the `Params` uniform group 1 binding 0"
                ))
            }
        }
    }
    storage.sort_by_key(|(b, _)| *b);
    for (i, (b, bd)) in storage.iter().enumerate() {
        if *b != i as u32 {
            return Err(format!(
                "storage bindings must be numbered 0..n: `{}` is @binding({b}), expected {i}",
                bd.name
            ));
        }
    }
    if storage.len() > MAX_STORAGE_BUFFERS {
        return Err(format!(
            "{} storage buffers; wgpu's default limit is {MAX_STORAGE_BUFFERS} per stage",
            storage.len()
        ));
    }
    let params_bytes =
        params_bytes.ok_or("no `Params` uniform at @group(1) @binding(0) (`#import params`)")?;
    Ok(Reflected {
        stem: stem.to_string(),
        workgroup_size: wg,
        bindings: storage.into_iter().map(|(_, b)| b).collect(),
        params_bytes,
    })
}

/// A storage array's element type: (WGSL spelling, Rust type in the engine).
fn element_type(
    module: &naga::Module,
    ty: naga::Handle<naga::Type>,
) -> Result<(String, String), String> {
    use naga::{Scalar, TypeInner, VectorSize};
    let scalar = |s: Scalar| match s {
        Scalar::F32 => Some("f32"),
        Scalar::U32 => Some("u32"),
        Scalar::I32 => Some("i32"),
        _ => None,
    };
    let t = &module.types[ty];
    let found = match &t.inner {
        TypeInner::Scalar(s) => scalar(*s).map(|s| (s.to_string(), s.to_string())),
        TypeInner::Vector {
            size: VectorSize::Quad,
            scalar: s,
        } => scalar(*s).map(|s| {
            let rust = if s == "f32" {
                "crate::gpu::layout::GpuVec4".to_string()
            } else {
                format!("[{s}; 4]")
            };
            (format!("vec4<{s}>"), rust)
        }),
        TypeInner::Matrix {
            columns: VectorSize::Tri,
            rows: VectorSize::Tri,
            scalar: Scalar::F32,
        } => Some((
            "mat3x3<f32>".to_string(),
            "crate::gpu::layout::GpuMat3".to_string(),
        )),
        // Integer atomics (the broad phase's counters and bucket heads): the twin sees plain
        // words and emulates the atomic operations.
        TypeInner::Atomic(s) => scalar(*s)
            .filter(|s| *s != "f32")
            .map(|s| (format!("atomic<{s}>"), s.to_string())),
        TypeInner::Struct { .. } => t.name.as_deref().and_then(|n| {
            LAYOUT_STRUCTS
                .iter()
                .find(|(w, _)| *w == n)
                .map(|(w, r)| (w.to_string(), format!("crate::gpu::layout::{r}")))
        }),
        _ => None,
    };
    found.ok_or_else(|| {
        format!(
            "element type `{}` has no Rust layout type (see LAYOUT_STRUCTS in build.rs)",
            t.name.as_deref().unwrap_or("?")
        )
    })
}

/// `jgs2_hm_forward` → `Jgs2HmForward`.
fn variant(stem: &str) -> String {
    stem.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn kernel_table(kernels: &[Reflected]) -> String {
    let mut s = String::from(
        "// Generated by build.rs from naga's reflection of shaders/*.wgsl; do not edit.\n\
         // Expects `Access`, `ReflectedShader`, `ReflectedBinding` in scope.\n\n",
    );
    let _ = writeln!(s, "/// Number of kernels in shaders/.");
    let _ = writeln!(s, "const SHADER_COUNT: usize = {};\n", kernels.len());

    s.push_str("/// A kernel's reflected interface, by `Kernel` variant.\nmacro_rules! shader {\n");
    for k in kernels {
        let _ = writeln!(
            s,
            "    ({}) => {{ ReflectedShader {{ file: {:?}, workgroup_size: {:?}, bindings: [",
            variant(&k.stem),
            k.stem,
            k.workgroup_size
        );
        for b in &k.bindings {
            let _ = writeln!(
                s,
                "        ReflectedBinding {{ name: {:?}, access: Access::{}, elem_bytes: {} }},",
                b.name,
                if b.read_write { "ReadWrite" } else { "Read" },
                b.elem_bytes
            );
        }
        s.push_str("    ] } };\n");
    }
    s.push_str(
        "    ($other:ident) => { compile_error!(concat!(\"no shaders/*.wgsl for kernel `\", \
         stringify!($other), \"` (the file stem is the variant in snake_case)\")) };\n}\n\n",
    );

    s.push_str(
        "/// A kernel's CPU twin called on the bound buffers, typed from the WGSL.\n\
         macro_rules! twin_call {\n",
    );
    for k in kernels {
        let args: Vec<String> = k
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let m = if b.read_write { "rw" } else { "ro" };
                format!("b.{m}::<{}>({i})", b.rust)
            })
            .collect();
        let _ = writeln!(
            s,
            "    ({}, $twin:path) => {{ |p, b| $twin(p, {}) }};",
            variant(&k.stem),
            args.join(", ")
        );
    }
    s.push_str("}\n\n");

    // Each (Rust type, WGSL size) once; the message names the first binding that uses it.
    let mut sizes: BTreeMap<(String, u32), String> = BTreeMap::new();
    for k in kernels {
        sizes
            .entry(("crate::gpu::layout::Params".into(), k.params_bytes))
            .or_insert_with(|| format!("shaders/{}.wgsl's `Params` uniform", k.stem));
        for b in &k.bindings {
            sizes
                .entry((b.rust.clone(), b.elem_bytes))
                .or_insert_with(|| {
                    format!(
                        "shaders/{}.wgsl binding `{}` (array<{}>)",
                        k.stem, b.name, b.wgsl
                    )
                });
        }
    }
    s.push_str("// Rust layout types against the sizes naga gives their WGSL types.\n");
    for ((rust, bytes), used) in &sizes {
        let _ = writeln!(
            s,
            "const _: () = assert!(::core::mem::size_of::<{rust}>() == {bytes}, \
             \"{rust} does not have the {bytes} B naga gives {used}\");"
        );
    }
    s
}

fn shader_sources(kernels: &[String], snippets: &[String]) -> String {
    let entry = |rel: String, name: &str| {
        format!(
            "    ({name:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/{rel}\"))),\n"
        )
    };
    let mut s = String::from(
        "// Generated by build.rs from the file names in shaders/; do not edit.\n\n\
         /// Kernel files (`shaders/<name>.wgsl`), sorted by name.\n\
         static FILES: &[(&str, &str)] = &[\n",
    );
    for k in kernels {
        s.push_str(&entry(format!("shaders/{k}.wgsl"), k));
    }
    s.push_str("];\n\n/// Shared snippets (`shaders/shared/<name>.wgsl`), sorted by name.\n");
    s.push_str("static SHARED: &[(&str, &str)] = &[\n");
    for n in snippets {
        s.push_str(&entry(wgsl_import::snippet_path(n), n));
    }
    s.push_str("];\n");
    s
}

/// Writes only on change, so an unchanged table does not recompile the crate.
fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
