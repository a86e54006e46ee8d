//! Structure-aware fuzzing of every mesh reader and of the scene parser (parse + build), with
//! proptest: each case takes a valid seed file (tests/data/mesh, assets/scenes, files written
//! here by jello's own writers) and applies a few mutations — bit flips, truncation, a number
//! replaced by a huge, negative, NaN or overflowing value, a token or line duplicated, deleted
//! or swapped, a keyword or odd byte inserted, a binary integer overwritten. Each case must:
//!
//! - not panic (a panic fails the case, and proptest shrinks it to a minimal mutation list);
//! - finish within a per-case time bound (`JELLO_FUZZ_CASE_SECONDS`, default 10 s);
//! - stay within bounded memory: the cases run in a child process under `ulimit -v`
//!   (`JELLO_FUZZ_MEM_MB`, default 512; the worker itself peaks near 6 MiB), so an allocation sized by a lying count aborts the
//!   child and fails the test naming the input; the child also reports its peak RSS;
//! - return either a valid mesh (indices in range, finite, positively oriented) or a one-line
//!   error naming the file.
//!
//! The parent test `fuzz_inputs` runs the worker with a watchdog: a hang is killed and the
//! input being processed is named (the worker writes each input to a file before running it).
//!
//! Short run (in the suite): `JELLO_FUZZ_CASES` cases per target, default 2000 (well under a second).
//! Longer run, e.g. ten minutes per target (add `--release` for more cases per second):
//!
//! ```text
//! JELLO_FUZZ_SECONDS=600 cargo test --test cpu fuzz_inputs::fuzz_inputs -- --nocapture
//! ```
//!
//! `JELLO_FUZZ_TARGETS=gmsh_ascii,scene` restricts the targets; `JELLO_TEST_SEED` replays a run
//! (the seed is printed). Inputs that once failed live in tests/data/fuzz and are replayed by
//! `fuzz_regressions`.

use jello::mesh::{parse_mesh, parse_tetgen, write_gmsh, write_tetgen, GmshFormat, LoadedMesh};
use jello::scene::Scene;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One fuzzing target: a reader (or the scene) and its seed inputs.
struct Target {
    name: &'static str,
    kind: Kind,
    seeds: Vec<Seed>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A single-file mesh, parsed by extension from memory.
    Mesh,
    /// A TetGen pair: the mutations go to the `.node` or the `.ele` file.
    TetGen,
    /// A scene file, loaded from disk and built.
    Scene,
    /// A triangle mesh for obstacles (OBJ, PLY, STL), parsed by extension from memory.
    Triangles,
}

#[derive(Clone)]
struct Seed {
    /// File name (extension picks the reader; the scene's name in messages).
    name: String,
    bytes: Vec<u8>,
    /// The `.ele` of a TetGen pair.
    ele: Vec<u8>,
}

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn fixture(name: &str) -> Seed {
    Seed {
        name: name.to_string(),
        bytes: std::fs::read(repo("tests/data/mesh").join(name)).unwrap(),
        ele: Vec::new(),
    }
}

/// Where per-case files go: /dev/shm when there is one. Rewriting a file per case on a disk
/// file system (ext4 flushes a truncated-and-rewritten file on close) made the run wait on I/O
/// for ~80% of its wall time.
fn scratch_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The work directory of this process (scene seeds and the meshes they name live here).
fn work_dir() -> PathBuf {
    let d = scratch_root().join(format!("jello_fuzz_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small mesh written in `format` by jello's own writer.
fn written_gmsh(format: GmshFormat, name: &str) -> Seed {
    let m = jello::mesh::box_grid([0.0; 3], [1.0, 0.5, 0.5], [2, 1, 1]);
    let p = work_dir().join(name);
    write_gmsh(&p, &m, format).unwrap();
    Seed {
        name: name.to_string(),
        bytes: std::fs::read(&p).unwrap(),
        ele: Vec::new(),
    }
}

/// A scene using every section, and a mesh file beside it.
const KITCHEN_SINK: &str = r#"[simulation]
h = 0.005
steps = 3
gravity = [0.0, -9.81, 0.0]

[solver]
name = "jgs2"
stop = "dx"
tolerance = 1e-6
dx_tolerance = 1e-3
max_iterations = 20
variant = "gs"
far_tolerance = 0.05
far_order = 0

[output]
every = 2
vtu = false
obj = true
png = false
png_size = [64, 48]

[contact]
dhat = 0.001
kappa = 2.0

[[objects]]
name = "bar"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [1.0, 0.1, 0.1], cells = [6, 2, 2] }
transform = { fit = 0.8, scale = 1.5, rotate = { axis = [0.0, 1.0, 0.0], degrees = 10.0 }, translate = [0.0, 0.5, 0.0] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e6, poisson_ratio = 0.3, density = 1000.0 }
velocity = [0.1, 0.0, 0.0]
angular_velocity = { axis = [0.0, 0.0, 1.0], omega = 0.5 }

[[objects.regions]]
region = { slab = { normal = [1.0, 0.0, 0.0], offset = 0.4, thickness = 0.2 } }
material = { model = "arap", mu = 1e5, lambda = 2e5, density = 500.0 }

[[objects.regions]]
region = { box = { min = [-1.0, -1.0, -1.0], max = [0.2, 2.0, 2.0] } }
material = { model = "linear", youngs_modulus = 1e7, poisson_ratio = 0.2, density = 2000.0 }

[[objects]]
name = "blob"
mesh = { file = "seed_tets.mesh" }
transform = { scale = 0.2, translate = [3.0, 1.0, 0.0] }
material = { model = "fixed_corotated", youngs_modulus = 1e5, poisson_ratio = 0.45, density = 800.0 }

[[pins]]
object = "bar"
region = { box = { min = [-10.0, -10.0, -10.0], max = [0.05, 10.0, 10.0] } }
script = { type = "rotate", center = [0.0, 0.5, 0.05], axis = [1.0, 0.0, 0.0], omega = 1.0 }

[[pins]]
object = "blob"
region = { slab = { normal = [0.0, 1.0, 0.0], offset = 1.0, thickness = 0.01 } }
script = { type = "translate", velocity = [0.0, 0.1, 0.0] }

[[forces]]
object = "bar"
region = { box = { min = [0.5, -10.0, -10.0], max = [10.0, 10.0, 10.0] } }
force = [0.0, -5.0, 0.0]
start = 0.0
end = 0.01

[[obstacles]]
type = "ground"
height = -0.5

[[obstacles]]
type = "half_space"
normal = [1.0, 0.0, 0.0]
offset = -2.0

[[obstacles]]
type = "box"
min = [10.0, 0.0, 0.0]
max = [11.0, 1.0, 1.0]

[[obstacles]]
type = "sphere"
center = [0.0, 10.0, 0.0]
radius = 1.0
"#;

fn targets() -> Vec<Target> {
    let t = |name, kind, seeds| Target { name, kind, seeds };
    let dir = work_dir();
    std::fs::copy(
        repo("tests/data/mesh/two_tets.mesh"),
        dir.join("seed_tets.mesh"),
    )
    .unwrap();
    let scene = |p: &str| Seed {
        name: Path::new(p).file_name().unwrap().to_string_lossy().into(),
        bytes: std::fs::read(repo(p)).unwrap(),
        ele: Vec::new(),
    };
    let tetgen_box = {
        let m = jello::mesh::box_grid([0.0; 3], [1.0; 3], [2, 1, 1]);
        let p = dir.join("seed_box.node");
        write_tetgen(&p, &m).unwrap();
        Seed {
            name: "seed_box.node".into(),
            bytes: std::fs::read(&p).unwrap(),
            ele: std::fs::read(p.with_extension("ele")).unwrap(),
        }
    };
    let tetgen_fixture = Seed {
        name: "two_tets_1based.node".into(),
        bytes: std::fs::read(repo("tests/data/mesh/two_tets_1based.node")).unwrap(),
        ele: std::fs::read(repo("tests/data/mesh/two_tets_1based.ele")).unwrap(),
    };
    vec![
        t(
            "gmsh_ascii",
            Kind::Mesh,
            vec![
                fixture("two_tets_v22.msh"),
                fixture("two_tets_v40.msh"),
                fixture("two_tets_v41.msh"),
                fixture("gmsh_box_v40_ascii.msh"),
                written_gmsh(GmshFormat::V22Ascii, "w22.msh"),
                written_gmsh(GmshFormat::V41Ascii, "w41.msh"),
            ],
        ),
        t(
            "gmsh_binary",
            Kind::Mesh,
            vec![
                fixture("gmsh_box_v22_bin.msh"),
                fixture("gmsh_box_v41_bin.msh"),
                written_gmsh(GmshFormat::V22Binary, "w22b.msh"),
                written_gmsh(GmshFormat::V41Binary, "w41b.msh"),
            ],
        ),
        t("tetgen", Kind::TetGen, vec![tetgen_fixture, tetgen_box]),
        t(
            "medit",
            Kind::Mesh,
            vec![fixture("two_tets.mesh"), fixture("meshio_box.mesh")],
        ),
        t(
            "vtk_ascii",
            Kind::Mesh,
            vec![
                fixture("two_tets_classic.vtk"),
                fixture("two_tets_field_metadata.vtk"),
                fixture("two_tets_v51.vtk"),
            ],
        ),
        t(
            "vtk_binary",
            Kind::Mesh,
            vec![fixture("meshio_box_bin.vtk")],
        ),
        t("triangles", Kind::Triangles, triangle_seeds(&dir)),
        t(
            "scene",
            Kind::Scene,
            vec![
                scene("assets/scenes/cantilever.toml"),
                scene("assets/scenes/drop.toml"),
                scene("assets/scenes/stiff_soft.toml"),
                scene("assets/scenes/twist.toml"),
                scene("tests/data/scenes/spin.toml"),
                Seed {
                    name: "kitchen_sink.toml".into(),
                    bytes: KITCHEN_SINK.as_bytes().to_vec(),
                    ele: Vec::new(),
                },
            ],
        ),
    ]
}

/// Triangle-mesh seeds: a box surface through the OBJ and ASCII PLY writers, and a tet's four
/// faces as binary little-endian PLY, binary STL and ASCII STL built here.
fn triangle_seeds(dir: &Path) -> Vec<Seed> {
    let seed = |name: &str, bytes: Vec<u8>| Seed {
        name: name.into(),
        bytes,
        ele: Vec::new(),
    };
    let m = jello::mesh::box_grid([0.0; 3], [1.0; 3], [2, 1, 1]);
    let s = jello::mesh::surface(&m);
    let obj = dir.join("seed_surface.obj");
    let ply = dir.join("seed_surface.ply");
    jello::mesh::write_obj(&obj, &m.positions, &s).unwrap();
    jello::mesh::write_ply(&ply, &m.positions, &s).unwrap();
    let p: [[f32; 3]; 4] = [[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let tris: [[usize; 3]; 4] = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]];
    let mut bply = b"ply\nformat binary_little_endian 1.0\nelement vertex 4\nproperty float x\n\
        property float y\nproperty float z\nelement face 4\nproperty list uchar int vertex_indices\n\
        end_header\n"
        .to_vec();
    for q in p {
        bply.extend(q.iter().flat_map(|c| c.to_le_bytes()));
    }
    let mut bstl = vec![0u8; 80];
    bstl.extend(4u32.to_le_bytes());
    let mut astl = String::from("solid tet\n");
    for t in tris {
        bply.push(3);
        bply.extend(t.iter().flat_map(|&v| (v as i32).to_le_bytes()));
        bstl.extend([0u8; 12]);
        astl += "facet normal 0 0 0\nouter loop\n";
        for v in t {
            bstl.extend(p[v].iter().flat_map(|c| c.to_le_bytes()));
            astl += &format!("vertex {} {} {}\n", p[v][0], p[v][1], p[v][2]);
        }
        bstl.extend([0u8; 2]);
        astl += "endloop\nendfacet\n";
    }
    astl += "endsolid tet\n";
    vec![
        seed("seed_surface.obj", std::fs::read(obj).unwrap()),
        seed("seed_surface.ply", std::fs::read(ply).unwrap()),
        seed("seed_tet_bin.ply", bply),
        seed("seed_tet_bin.stl", bstl),
        seed("seed_tet.stl", astl.into_bytes()),
    ]
}

// ------------------------------------------------------------------------------ mutations

/// Replacement numbers: overflowing, negative, non-finite, tiny, huge, malformed.
const NUMBERS: [&str; 24] = [
    "0",
    "-1",
    "1",
    "2",
    "-0",
    "0.0",
    "4294967295",
    "4294967296",
    "2147483648",
    "9223372036854775807",
    "18446744073709551615",
    "99999999999999999999999",
    "1e308",
    "-1e308",
    "1e400",
    "1e-320",
    "1e-300",
    "1e30",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "0x10",
    "1.5.2",
];

/// Inserted snippets: separators, section keywords of every format, odd bytes.
const INSERTS: [&[u8]; 22] = [
    b"\n",
    b" ",
    b"\r\n",
    b"\0",
    b"\xEF\xBB\xBF",
    b"\xff\xfe",
    b"#",
    b"$",
    b"$Nodes\n",
    b"$EndElements\n",
    b"$Elements\n1\n",
    b"POINTS 3 float\n",
    b"CELLS 1 5\n",
    b"CELL_TYPES 1\n12\n",
    b"OFFSETS vtktypeint64\n",
    b"Tetrahedra\n",
    b"Hexahedra\n1\n",
    b"[[pins]]\n",
    b"[[objects]]\n",
    b"[simulation]\n",
    b" = ",
    b"\"",
];

#[derive(Clone, Debug)]
enum Op {
    Flip {
        at: usize,
        bit: u8,
    },
    Truncate {
        at: usize,
    },
    Number {
        nth: usize,
        with: usize,
    },
    DupToken {
        nth: usize,
        times: u8,
    },
    DelToken {
        nth: usize,
    },
    Insert {
        at: usize,
        what: usize,
    },
    DupLine {
        nth: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    /// Overwrite 4 or 8 bytes with an interesting integer (binary counts and tags).
    BinInt {
        at: usize,
        what: usize,
        wide: bool,
    },
    /// For TetGen: the mutations after this go to the `.ele` file.
    ToEle,
}

const INTS: [i64; 10] = [
    0,
    -1,
    1,
    i32::MAX as i64,
    i32::MIN as i64,
    u32::MAX as i64,
    i64::MAX,
    i64::MIN,
    1 << 40,
    100_000_001,
];

fn op() -> impl Strategy<Value = Op> {
    let at = 0usize..1 << 20;
    prop_oneof![
        (at.clone(), 0u8..8).prop_map(|(at, bit)| Op::Flip { at, bit }),
        at.clone().prop_map(|at| Op::Truncate { at }),
        (0usize..4096, 0..NUMBERS.len()).prop_map(|(nth, with)| Op::Number { nth, with }),
        (0usize..4096, 1u8..4).prop_map(|(nth, times)| Op::DupToken { nth, times }),
        (0usize..4096).prop_map(|nth| Op::DelToken { nth }),
        (at.clone(), 0..INSERTS.len()).prop_map(|(at, what)| Op::Insert { at, what }),
        (0usize..4096).prop_map(|nth| Op::DupLine { nth }),
        (0usize..4096, 0usize..4096).prop_map(|(a, b)| Op::SwapLines { a, b }),
        (at, 0..INTS.len(), any::<bool>()).prop_map(|(at, what, wide)| Op::BinInt {
            at,
            what,
            wide
        }),
        Just(Op::ToEle),
    ]
}

/// Byte ranges of whitespace-separated tokens.
fn tokens(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let s = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push((s, i));
    }
    out
}

/// Byte ranges of numbers (runs of digits, signs, dots and exponents holding a digit).
fn numbers(b: &[u8]) -> Vec<(usize, usize)> {
    let num = |c: u8| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E');
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_digit() || ((b[i] == b'-' || b[i] == b'.') && i + 1 < b.len())) {
            i += 1;
            continue;
        }
        let s = i;
        while i < b.len() && num(b[i]) {
            i += 1;
        }
        if i == s {
            i += 1;
        } else if b[s..i].iter().any(|c| c.is_ascii_digit()) {
            out.push((s, i));
        }
    }
    out
}

fn lines(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut s = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' {
            out.push((s, i + 1));
            s = i + 1;
        }
    }
    if s < b.len() {
        out.push((s, b.len()));
    }
    out
}

fn splice(b: &mut Vec<u8>, (s, e): (usize, usize), with: &[u8]) {
    b.splice(s..e, with.iter().copied());
}

/// Applies one mutation (a no-op where it does not fit, e.g. on an empty file).
fn apply(op: &Op, b: &mut Vec<u8>) {
    let pick = |v: &[(usize, usize)], n: usize| (!v.is_empty()).then(|| v[n % v.len()]);
    match *op {
        Op::Flip { at, bit } if !b.is_empty() => {
            let i = at % b.len();
            b[i] ^= 1 << bit;
        }
        Op::Truncate { at } if !b.is_empty() => b.truncate(at % b.len()),
        Op::Number { nth, with } => {
            if let Some(r) = pick(&numbers(b), nth) {
                splice(b, r, NUMBERS[with].as_bytes());
            }
        }
        Op::DupToken { nth, times } => {
            if let Some((s, e)) = pick(&tokens(b), nth) {
                let mut t = b[s..e].to_vec();
                t.push(b' ');
                let rep = t.repeat(times as usize);
                b.splice(s..s, rep);
            }
        }
        Op::DelToken { nth } => {
            if let Some(r) = pick(&tokens(b), nth) {
                splice(b, r, b"");
            }
        }
        Op::Insert { at, what } => {
            let i = at % (b.len() + 1);
            b.splice(i..i, INSERTS[what].iter().copied());
        }
        Op::DupLine { nth } => {
            if let Some((s, e)) = pick(&lines(b), nth) {
                let l = b[s..e].to_vec();
                b.splice(e..e, l);
            }
        }
        Op::SwapLines { a, b: c } => {
            let ls = lines(b);
            if let (Some(x), Some(y)) = (pick(&ls, a), pick(&ls, c)) {
                let (x, y) = if x.0 <= y.0 { (x, y) } else { (y, x) };
                if x.1 <= y.0 {
                    let (lx, ly) = (b[x.0..x.1].to_vec(), b[y.0..y.1].to_vec());
                    splice(b, y, &lx);
                    splice(b, x, &ly);
                }
            }
        }
        Op::BinInt { at, what, wide } if !b.is_empty() => {
            let v = INTS[what];
            let bytes: Vec<u8> = if wide {
                v.to_le_bytes().to_vec()
            } else {
                (v as i32).to_le_bytes().to_vec()
            };
            let i = at % b.len();
            let n = bytes.len().min(b.len() - i);
            b[i..i + n].copy_from_slice(&bytes[..n]);
        }
        _ => {}
    }
}

/// A mutated input: the seed's bytes (and `.ele`) after the ops.
fn mutate(seed: &Seed, ops: &[Op]) -> (Vec<u8>, Vec<u8>) {
    let (mut a, mut e) = (seed.bytes.clone(), seed.ele.clone());
    let mut to_ele = false;
    for op in ops {
        if matches!(op, Op::ToEle) {
            to_ele = !seed.ele.is_empty();
            continue;
        }
        apply(op, if to_ele { &mut e } else { &mut a });
    }
    (a, e)
}

// ------------------------------------------------------------------------------ checks

/// Generator cells a scene case may build in the fuzz run: valid but larger scenes are parsed
/// and checked up to the build, which is skipped (building 12M tets is not a reader bug).
const BUILD_BUDGET_CELLS: usize = 4_000;

fn one_line(e: &str, names: &[&str]) -> Result<(), TestCaseError> {
    if std::env::var_os("JELLO_FUZZ_VERBOSE").is_some() {
        println!("fuzz-error {e}");
    }
    if e.is_empty() || e.contains('\n') {
        return Err(TestCaseError::fail(format!("not one line: {e:?}")));
    }
    if !names.iter().any(|n| e.contains(n)) {
        return Err(TestCaseError::fail(format!(
            "error names none of {names:?}: {e}"
        )));
    }
    Ok(())
}

fn valid_mesh(l: &LoadedMesh) -> Result<(), TestCaseError> {
    let m = &l.mesh;
    let n = m.num_vertices() as u32;
    let ok = m.num_tets() > 0
        && m.tets.iter().flatten().all(|&v| v < n)
        && m.positions.iter().flatten().all(|x| x.is_finite())
        && (0..m.num_tets()).all(|t| m.signed_volume(t) > 0.0);
    if ok {
        Ok(())
    } else {
        Err(TestCaseError::fail("an accepted mesh is invalid"))
    }
}

/// Whether the scene's generators ask for more than the fuzz build budget while within the
/// real caps (then only parsing and validation up to the build are exercised).
fn over_budget(scene: &Scene) -> bool {
    scene.spec.objects.iter().any(|o| {
        let m = &o.mesh;
        match m.generator.as_deref() {
            Some("box") => m
                .cells
                .and_then(|c| c.iter().try_fold(1usize, |a, &x| a.checked_mul(x)))
                .is_some_and(|t| t > BUILD_BUDGET_CELLS && t <= jello::limits::MAX_GENERATOR_CELLS),
            Some("ball") => {
                // Over the cap: the build refuses it, cheaply.
                let r = m.resolution.unwrap_or(8);
                r <= jello::scene::ball_max_resolution()
                    && (r.max(2).div_ceil(2) * 2).pow(3) > BUILD_BUDGET_CELLS
            }
            _ => false,
        }
    })
}

#[derive(Default, Clone, Copy)]
struct Outcome {
    ok: u64,
    err: u64,
    skipped_builds: u64,
}

/// Runs one input through its target; `Ok` tells how it ended.
fn run_case(kind: Kind, seed: &Seed, a: &[u8], e: &[u8]) -> Result<Outcome, TestCaseError> {
    let mut out = Outcome::default();
    match kind {
        Kind::Mesh => match parse_mesh(Path::new(&seed.name), a) {
            Ok(l) => {
                valid_mesh(&l)?;
                out.ok += 1;
            }
            Err(err) => {
                one_line(&err.to_string(), &[&seed.name])?;
                out.err += 1;
            }
        },
        Kind::Triangles => match jello::mesh::parse_triangle_mesh(Path::new(&seed.name), a) {
            Ok(m) => {
                let n = m.positions.len() as u32;
                let bad = m.triangles.iter().any(|t| {
                    t.iter().any(|&v| v >= n) || t[0] == t[1] || t[1] == t[2] || t[2] == t[0]
                });
                if bad
                    || m.triangles.is_empty()
                    || m.positions.iter().flatten().any(|c| !c.is_finite())
                {
                    return Err(TestCaseError::fail("invalid triangle mesh accepted"));
                }
                out.ok += 1;
            }
            Err(err) => {
                one_line(&err.to_string(), &[&seed.name])?;
                out.err += 1;
            }
        },
        Kind::TetGen => {
            let node = Path::new(&seed.name);
            let ele = node.with_extension("ele");
            match parse_tetgen(node, a, &ele, e) {
                Ok(l) => {
                    valid_mesh(&l)?;
                    out.ok += 1;
                }
                Err(err) => {
                    let ele_name = ele.to_string_lossy();
                    one_line(&err.to_string(), &[&seed.name, &ele_name])?;
                    out.err += 1;
                }
            }
        }
        Kind::Scene => {
            let path = work_dir().join(&seed.name);
            std::fs::write(&path, a).map_err(|e| TestCaseError::fail(e.to_string()))?;
            // A mesh error names the mesh file, not the scene.
            let names = [seed.name.as_str(), ".mesh", ".msh", ".node", ".ele", ".vtk"];
            match Scene::load(&path) {
                Err(err) => {
                    one_line(&err.to_string(), &names)?;
                    out.err += 1;
                }
                Ok(s) if over_budget(&s) => out.skipped_builds += 1,
                Ok(s) => match s.build() {
                    Ok(b) => {
                        let n = b.model.num_vertices() as u32;
                        if b.model.mesh.tets.iter().flatten().any(|&v| v >= n) {
                            return Err(TestCaseError::fail("built model out of range"));
                        }
                        out.ok += 1;
                    }
                    Err(err) => {
                        one_line(&err.to_string(), &names)?;
                        out.err += 1;
                    }
                },
            }
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ runner

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Process CPU time (user + system) in seconds, from /proc (Linux; `None` elsewhere).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are the 12th and 13th after the name; ticks of
    // 1/100 s on Linux.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Peak resident memory of this process, MiB (Linux).
fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Fuzzes one target: `cases` cases, or batches until `seconds` have passed. Writes each input
/// to `current` before running it (so a parent can name a hang or an abort).
fn fuzz_target(t: &Target, seed: u64, cases: u32, seconds: Option<f64>, current: &Path) {
    let limit = Duration::from_secs_f64(
        std::env::var("JELLO_FUZZ_CASE_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10.0),
    );
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let (mut total, mut batches) = (Outcome::default(), 0u64);
    let mut slowest = Duration::ZERO;
    loop {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..16].copy_from_slice(&batches.to_le_bytes());
        bytes[16..24]
            .copy_from_slice(&(t.name.len() as u64 ^ t.name.as_bytes()[0] as u64).to_le_bytes());
        let config = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 2000,
            ..Config::default()
        };
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
        let strategy = (0..t.seeds.len(), prop::collection::vec(op(), 1..4));
        let tally = std::cell::Cell::new(Outcome::default());
        let slow = std::cell::Cell::new(Duration::ZERO);
        let result = runner.run(&strategy, |(s, ops)| {
            let seed = &t.seeds[s];
            let (a, e) = mutate(seed, &ops);
            let mut record = a.clone();
            if !e.is_empty() {
                record.extend_from_slice(b"\n---- .ele ----\n");
                record.extend_from_slice(&e);
            }
            let _ = std::fs::write(current, &record);
            let t0 = Instant::now();
            let o = run_case(t.kind, seed, &a, &e)?;
            let dt = t0.elapsed();
            slow.set(slow.get().max(dt));
            if dt > limit {
                return Err(TestCaseError::fail(format!(
                    "took {dt:?}, over the per-case bound {limit:?}"
                )));
            }
            let mut acc = tally.get();
            acc.ok += o.ok;
            acc.err += o.err;
            acc.skipped_builds += o.skipped_builds;
            tally.set(acc);
            Ok(())
        });
        if let Err(e) = result {
            let failure = match &e {
                proptest::test_runner::TestError::Fail(_, (s, ops)) => {
                    let (a, el) = mutate(&t.seeds[*s], ops);
                    let dir = repo("target/fuzz-failures");
                    let _ = std::fs::create_dir_all(&dir);
                    let p = dir.join(format!("{}-{seed}-{batches}-{}", t.name, t.seeds[*s].name));
                    let _ = std::fs::write(&p, &a);
                    if !el.is_empty() {
                        let _ = std::fs::write(p.with_extension("ele"), &el);
                    }
                    format!(
                        "seed file {}, ops {ops:?}, minimal input written to {}",
                        t.seeds[*s].name,
                        p.display()
                    )
                }
                other => format!("{other}"),
            };
            // The worker silenced the panic hook for proptest's shrinking: restore it so this
            // report is printed.
            let _ = std::panic::take_hook();
            println!("fuzz FAILURE {}: {e}\n{failure}", t.name);
            panic!("fuzz target {}: {e}\n{failure}", t.name);
        }
        let b = tally.get();
        total.ok += b.ok;
        total.err += b.err;
        total.skipped_builds += b.skipped_builds;
        slowest = slowest.max(slow.get());
        batches += 1;
        match seconds {
            Some(s) if start.elapsed().as_secs_f64() < s => continue,
            _ => break,
        }
    }
    let n = total.ok + total.err + total.skipped_builds;
    let cpu = match (cpu0, cpu_seconds()) {
        (Some(a), Some(b)) => format!("{:.1} s CPU", b - a),
        _ => "CPU n/a".into(),
    };
    println!(
        "fuzz {:<12} {n:>8} cases ({} errors, {} accepted, {} builds over budget) in {:.1} s wall, {cpu}; slowest case {:.1} ms",
        t.name,
        total.err,
        total.ok,
        total.skipped_builds,
        start.elapsed().as_secs_f64(),
        slowest.as_secs_f64() * 1e3
    );
}

/// The worker: every target (or those in `JELLO_FUZZ_TARGETS`), run by `fuzz_inputs` in a
/// memory-limited child process. Ignored so a plain `cargo test` does not run it unguarded.
#[test]
#[ignore = "the fuzz worker: run by `fuzz_inputs` in a memory-limited child"]
fn fuzz_worker() {
    let seed = env_u64("JELLO_TEST_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!("fuzz_worker: JELLO_TEST_SEED={seed}");
    if std::env::var_os("JELLO_FUZZ_ALLOC_PROBE").is_some() {
        // For `fuzz_memory_cap_is_enforced`: must abort under the cap.
        let v: Vec<u8> = Vec::with_capacity(1 << 30);
        println!("probe allocated {} bytes", v.capacity());
        return;
    }
    let cases = env_u64("JELLO_FUZZ_CASES").unwrap_or(2000) as u32;
    let seconds = std::env::var("JELLO_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok());
    let only = std::env::var("JELLO_FUZZ_TARGETS").ok();
    let current = std::env::var("JELLO_FUZZ_CURRENT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| work_dir().join("current"));
    // Panics are caught and reported by proptest; the default hook would print each one
    // during shrinking.
    std::panic::set_hook(Box::new(|_| {}));
    let cpu0 = cpu_seconds();
    for t in targets() {
        if let Some(only) = &only {
            if !only.split(',').any(|n| n == t.name) {
                continue;
            }
        }
        fuzz_target(&t, seed, cases.max(1), seconds, &current);
    }
    let _ = std::panic::take_hook();
    if let (Some(a), Some(b)) = (cpu0, cpu_seconds()) {
        println!("fuzz total: {:.1} s CPU", b - a);
    }
    if let Some(p) = peak_rss_mib() {
        println!("fuzz peak RSS: {p:.0} MiB");
    }
    if let Some(l) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max address space"))
                .map(String::from)
        })
    {
        println!("fuzz {l}");
    }
    let _ = std::fs::remove_dir_all(work_dir());
}

/// Starts the worker in a child process with its address space capped (`ulimit -v`), with
/// `env` added.
fn spawn_worker(current: &Path, env: &[(&str, &str)]) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    let mem_mb = env_u64("JELLO_FUZZ_MEM_MB").unwrap_or(512);
    // The worker's path in this test crate (`fuzz_inputs::fuzz_worker`: module_path! less the
    // crate's name).
    let worker = module_path!().split_once("::").map_or_else(
        || "fuzz_worker".to_string(),
        |(_, m)| format!("{m}::fuzz_worker"),
    );
    let args = [
        "--exact",
        worker.as_str(),
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ];
    let mut cmd = if cfg!(unix) {
        let mut c = std::process::Command::new("sh");
        c.arg("-c")
            .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", mem_mb * 1024))
            .arg(&exe)
            .args(args);
        c
    } else {
        let mut c = std::process::Command::new(&exe);
        c.args(args);
        c
    };
    cmd.env("JELLO_FUZZ_CURRENT", current)
        // Few threads and malloc arenas: the address-space cap then measures the inputs' needs,
        // not per-thread reservations.
        .env("RAYON_NUM_THREADS", "2")
        .env("MALLOC_ARENA_MAX", "2")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the fuzz worker")
}

/// Waits for `child` up to `watchdog`; `None` when it had to be killed.
fn wait_for(
    mut child: std::process::Child,
    watchdog: Duration,
) -> (Option<std::process::ExitStatus>, String, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > watchdog {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    (
        status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the worker in a child process with its address space capped (`ulimit -v`) and a
/// watchdog; fails on a panic, an abort (an allocation over the cap), a hang or a failed case,
/// naming the input being processed.
#[test]
fn fuzz_inputs() {
    let current = scratch_root().join(format!("jello_fuzz_current_{}", std::process::id()));
    let per_target = env_u64("JELLO_FUZZ_SECONDS").unwrap_or(0) as f64;
    // Generous: the short run takes under a second; a long run its requested time plus slack.
    let watchdog = Duration::from_secs_f64(600.0 + per_target * 8.0 * 1.5);
    let (status, stdout, stderr) = wait_for(spawn_worker(&current, &[]), watchdog);
    let report: Vec<&str> = stdout.lines().filter(|l| l.starts_with("fuzz")).collect();
    println!("{}", report.join("\n"));
    let tail = |s: &str| {
        let n = s.chars().count();
        s.chars().skip(n.saturating_sub(4000)).collect::<String>()
    };
    match status {
        None => panic!(
            "the fuzz worker hung past {watchdog:?}; the input in progress is {}\n{}",
            current.display(),
            tail(&stdout)
        ),
        Some(s) if !s.success() => panic!(
            "the fuzz worker failed ({s}); the input in progress is {}\nstdout: {}\nstderr: {}",
            current.display(),
            tail(&stdout),
            tail(&stderr)
        ),
        Some(_) => {}
    }
    assert!(
        stdout.contains("fuzz total") || !cfg!(target_os = "linux"),
        "the worker ran no target: {stdout}"
    );
    let _ = std::fs::remove_file(&current);
}

/// The memory bound is real: a worker that reserves 1 GiB (twice the default cap) dies, and
/// the parent's check sees a failed child. Guards against the cap silently not applying.
#[cfg(target_os = "linux")]
#[test]
fn fuzz_memory_cap_is_enforced() {
    if env_u64("JELLO_FUZZ_MEM_MB").is_some() {
        return; // a custom cap may be large enough for the probe
    }
    let current = scratch_root().join(format!("jello_fuzz_probe_{}", std::process::id()));
    let child = spawn_worker(&current, &[("JELLO_FUZZ_ALLOC_PROBE", "1")]);
    let (status, stdout, _) = wait_for(child, Duration::from_secs(120));
    let status = status.expect("the probe worker hung");
    assert!(
        !status.success(),
        "a 1 GiB reservation passed the cap: {stdout}"
    );
    assert!(!stdout.contains("probe allocated"), "{stdout}");
    let _ = std::fs::remove_file(&current);
}

/// Inputs that once failed a fuzz target, replayed on every run (tests/data/fuzz/TARGET/…).
#[test]
fn fuzz_regressions() {
    let root = repo("tests/data/fuzz");
    let Ok(dirs) = std::fs::read_dir(&root) else {
        return;
    };
    let mut n = 0;
    for d in dirs.flatten() {
        let target = d.file_name().to_string_lossy().into_owned();
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") {
                continue;
            }
            let bytes = std::fs::read(f.path()).unwrap();
            let kind = match target.as_str() {
                "scene" => Kind::Scene,
                "tetgen" => Kind::TetGen,
                _ => Kind::Mesh,
            };
            let seed = Seed {
                name: name.clone(),
                bytes: bytes.clone(),
                ele: Vec::new(),
            };
            let t0 = Instant::now();
            let r = std::panic::catch_unwind(|| run_case(kind, &seed, &bytes, &[]));
            match r {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("{target}/{name}: {e}"),
                Err(_) => panic!("{target}/{name}: panicked"),
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{target}/{name}: slow"
            );
            n += 1;
        }
    }
    println!("{n} fuzz regression inputs replayed");
    let _ = std::fs::remove_dir_all(work_dir());
}
