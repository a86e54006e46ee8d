//! Writers: VTU frames decode back (with an independent base64 decoder) to the mesh and fields,
//! the PVD lists the frames, OBJ/PLY hold exactly the boundary surface (closed, outward), and the
//! mesh report reads right. Run frames carry the point and cell fields ParaView users need:
//! J against det F computed here from the positions, von Mises against the closed form of a
//! uniaxial stretch, velocity and residual against the state and the step's problem, and
//! per-object files that partition the vertices and cells exactly.

use jello::mesh::{
    box_grid, surface, write_obj, write_ply, write_vtu, Field, MeshInfo, PvdCollection, TetMesh,
};
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_mesh_output_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn b64_value(c: u8) -> u32 {
    match c {
        b'A'..=b'Z' => (c - b'A') as u32,
        b'a'..=b'z' => (c - b'a') as u32 + 26,
        b'0'..=b'9' => (c - b'0') as u32 + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64 char {c}"),
    }
}

fn b64_decode(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::new();
    for q in s.chunks(4) {
        let pad = q.iter().filter(|&&c| c == b'=').count();
        let n = q
            .iter()
            .map(|&c| if c == b'=' { 0 } else { b64_value(c) })
            .fold(0u32, |acc, v| acc << 6 | v);
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

/// The decoded payload of the `DataArray` called `name` (header checked, then stripped).
fn array(xml: &str, name: &str) -> (String, Vec<u8>) {
    let key = format!("Name=\"{name}\"");
    let at = xml.find(&key).unwrap_or_else(|| panic!("no array {name}"));
    let tag_start = xml[..at].rfind('<').unwrap();
    let open_end = at + xml[at..].find('>').unwrap();
    let close = open_end + xml[open_end..].find("</DataArray>").unwrap();
    let raw = b64_decode(&xml[open_end + 1..close]);
    let len = u64::from_le_bytes(raw[..8].try_into().unwrap()) as usize;
    assert_eq!(len, raw.len() - 8, "{name}: header length");
    (xml[tag_start..open_end].to_string(), raw[8..].to_vec())
}

fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn vtu_frame_decodes_to_mesh_and_fields() {
    let m = box_grid([0.0; 3], [1.0, 2.0, 3.0], [2, 1, 2]);
    let disp: Vec<[f64; 3]> = m.positions.iter().map(|p| [p[2], -p[0], 0.5]).collect();
    let speed: Vec<f32> = (0..m.num_vertices()).map(|i| i as f32 * 0.25).collect();
    let vol: Vec<f64> = (0..m.num_tets()).map(|t| m.signed_volume(t)).collect();
    let path = scratch("frame_0000.vtu");
    write_vtu(
        &path,
        &m.positions,
        &m.tets,
        &[
            ("displacement", Field::Vector(&disp)),
            ("speed", Field::ScalarF32(&speed)),
        ],
        &[("volume", Field::Scalar(&vol))],
    )
    .unwrap();
    let xml = std::fs::read_to_string(&path).unwrap();
    assert!(xml.contains(&format!(
        "NumberOfPoints=\"{}\" NumberOfCells=\"{}\"",
        m.num_vertices(),
        m.num_tets()
    )));
    let (_, pts) = array(&xml, "Points");
    assert_eq!(
        f64s(&pts),
        m.positions.iter().flatten().copied().collect::<Vec<_>>()
    );
    let (_, conn) = array(&xml, "connectivity");
    assert_eq!(
        i64s(&conn),
        m.tets
            .iter()
            .flatten()
            .map(|&v| v as i64)
            .collect::<Vec<_>>()
    );
    let (_, offs) = array(&xml, "offsets");
    assert_eq!(
        i64s(&offs),
        (1..=m.num_tets() as i64).map(|i| 4 * i).collect::<Vec<_>>()
    );
    let (_, types) = array(&xml, "types");
    assert_eq!(types, vec![10u8; m.num_tets()]);
    let (tag, d) = array(&xml, "displacement");
    assert!(tag.contains("NumberOfComponents=\"3\"") && tag.contains("Float64"));
    assert_eq!(f64s(&d), disp.iter().flatten().copied().collect::<Vec<_>>());
    let (tag, s) = array(&xml, "speed");
    assert!(tag.contains("Float32"));
    let s: Vec<f32> = s
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(s, speed);
    let (_, v) = array(&xml, "volume");
    assert_eq!(f64s(&v), vol);
    // Point data precedes cell data, both inside the piece.
    assert!(xml.find("<PointData>").unwrap() < xml.find("<CellData>").unwrap());

    // Wrong field length is refused, naming the file.
    let short = vec![0.0; 3];
    let e = write_vtu(
        &path,
        &m.positions,
        &m.tets,
        &[("x", Field::Scalar(&short))],
        &[],
    );
    assert!(e.unwrap_err().to_string().contains("frame_0000.vtu"));
}

#[test]
fn pvd_lists_frames_relative_to_its_folder() {
    let mut pvd = PvdCollection::new(scratch("run.pvd"));
    pvd.push(0.0, scratch("frames/f0.vtu"));
    pvd.push(0.125, scratch("frames/f1.vtu"));
    pvd.write().unwrap();
    let xml = std::fs::read_to_string(scratch("run.pvd")).unwrap();
    assert!(xml.contains("type=\"Collection\""));
    assert!(
        xml.contains("<DataSet timestep=\"0.0\" group=\"\" part=\"0\" file=\"frames/f0.vtu\"/>"),
        "{xml}"
    );
    assert!(xml.contains("timestep=\"0.125\"") && xml.contains("file=\"frames/f1.vtu\""));
    assert_eq!(xml.matches("<DataSet").count(), 2);
}

/// Parses an OBJ or PLY written by us back into (vertices, 0-based triangles).
fn parse_obj(s: &str) -> (Vec<[f64; 3]>, Vec<[usize; 3]>) {
    let mut v = Vec::new();
    let mut f = Vec::new();
    for l in s.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.first() {
            Some(&"v") => v.push([1, 2, 3].map(|i| w[i].parse().unwrap())),
            Some(&"f") => f.push([1, 2, 3].map(|i| w[i].parse::<usize>().unwrap() - 1)),
            _ => {}
        }
    }
    (v, f)
}

fn parse_ply(s: &str) -> (Vec<[f64; 3]>, Vec<[usize; 3]>) {
    let mut lines = s.lines();
    let (mut nv, mut nf) = (0, 0);
    for l in lines.by_ref() {
        if let Some(n) = l.strip_prefix("element vertex ") {
            nv = n.parse().unwrap();
        }
        if let Some(n) = l.strip_prefix("element face ") {
            nf = n.parse().unwrap();
        }
        if l == "end_header" {
            break;
        }
    }
    let v = (0..nv)
        .map(|_| {
            let w: Vec<f64> = lines
                .next()
                .unwrap()
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            [w[0], w[1], w[2]]
        })
        .collect();
    let f = (0..nf)
        .map(|_| {
            let w: Vec<usize> = lines
                .next()
                .unwrap()
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            assert_eq!(w[0], 3);
            [w[1], w[2], w[3]]
        })
        .collect();
    (v, f)
}

/// Volume enclosed by an outward triangle soup (divergence theorem).
fn enclosed_volume(v: &[[f64; 3]], f: &[[usize; 3]]) -> f64 {
    f.iter()
        .map(|t| {
            let [a, b, c] = t.map(|i| v[i]);
            // a · (b × c) / 6 summed over the closed surface.
            (a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                + a[2] * (b[0] * c[1] - b[1] * c[0]))
                / 6.0
        })
        .sum()
}

#[test]
fn obj_and_ply_hold_the_outward_boundary_only() {
    let m = box_grid([0.1, 0.2, 0.3], [1.1, 0.7, 0.55], [3, 2, 2]);
    let s = surface(&m);
    // The (3-1)(2-1)(2-1) = 2 interior lattice points must not be written.
    let interior = m.num_vertices() - s.vertices.len();
    assert_eq!(interior, 2);
    for (ext, parse) in [("obj", parse_obj as fn(&str) -> _), ("ply", parse_ply)] {
        let path = scratch(&format!("surf.{ext}"));
        if ext == "obj" {
            write_obj(&path, &m.positions, &s).unwrap();
        } else {
            write_ply(&path, &m.positions, &s).unwrap();
        }
        let (v, f) = parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(v.len(), s.vertices.len(), "{ext}");
        assert_eq!(f.len(), s.triangles.len(), "{ext}");
        assert!(f.iter().flatten().all(|&i| i < v.len()));
        let vol = enclosed_volume(&v, &f);
        assert!((vol - 0.125).abs() < 1e-12, "{ext}: {vol}");
    }
}

#[test]
fn mesh_info_report() {
    let m = box_grid([0.0; 3], [2.0, 1.0, 1.0], [2, 1, 1]);
    let info = MeshInfo::new(&m);
    assert_eq!(info.num_vertices, 12);
    assert_eq!(info.num_tets, 12);
    assert_eq!(info.num_boundary_triangles, 2 * (2 + 2 + 1 + 1 + 2 + 2));
    assert_eq!(info.num_boundary_vertices, 12);
    assert!((info.volume - 2.0).abs() < 1e-15);
    assert_eq!(info.bbox, ([0.0; 3], [2.0, 1.0, 1.0]));
    // Unit-cube Kuhn tets: edges 1, √2, √3.
    assert!((info.edge_length[0] - 1.0).abs() < 1e-15);
    assert!((info.edge_length[2] - 3f64.sqrt()).abs() < 1e-15);
    // Kuhn tet: V = 1/6, Σℓ² = 1+1+1+2+2+3 = 10 → q = 12·(1/2)^(2/3)/10.
    let q = 12.0 * 0.5f64.powf(2.0 / 3.0) / 10.0;
    for k in 0..3 {
        assert!((info.quality[k] - q).abs() < 1e-12, "{:?}", info.quality);
    }
    // The regular tetrahedron scores 1.
    let reg = TetMesh {
        positions: vec![
            [1.0, 1.0, 1.0],
            [1.0, -1.0, -1.0],
            [-1.0, 1.0, -1.0],
            [-1.0, -1.0, 1.0],
        ],
        tets: vec![[0, 1, 2, 3]],
    };
    let qr = reg.tet_quality(0).abs();
    assert!((qr - 1.0).abs() < 1e-12, "{qr}");
    let text = info.to_string();
    for needle in [
        "vertices:          12",
        "tetrahedra:        12",
        "volume:",
        "m³",
        "quality",
        "bounding box",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
}

fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A decoded unstructured grid: points, tets and every data array by name (as f64).
struct Grid {
    points: Vec<[f64; 3]>,
    tets: Vec<[usize; 4]>,
    arrays: std::collections::HashMap<String, Vec<f64>>,
}

fn read_grid(path: &std::path::Path, names: &[&str]) -> Grid {
    let xml = std::fs::read_to_string(path).unwrap();
    let (_, p) = array(&xml, "Points");
    let points = f64s(&p).chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    let (_, c) = array(&xml, "connectivity");
    let (_, o) = array(&xml, "offsets");
    let offs = i64s(&o);
    assert!(offs
        .iter()
        .enumerate()
        .all(|(i, &o)| o == 4 * (i as i64 + 1)));
    let tets = i64s(&c)
        .chunks(4)
        .map(|t| [t[0] as usize, t[1] as usize, t[2] as usize, t[3] as usize])
        .collect();
    let mut arrays = std::collections::HashMap::new();
    for &name in names {
        let (tag, bytes) = array(&xml, name);
        let values = if tag.contains("Int32") {
            i32s(&bytes).into_iter().map(f64::from).collect()
        } else {
            assert!(tag.contains("Float64"), "{name}: {tag}");
            f64s(&bytes)
        };
        arrays.insert(name.to_string(), values);
    }
    Grid {
        points,
        tets,
        arrays,
    }
}

const POINT_NAMES: [&str; 3] = [
    "displacement [m]",
    "velocity [m/s]",
    "residual |grad E| [N]",
];
const CELL_NAMES: [&str; 4] = ["J [-]", "von Mises stress [Pa]", "material id", "object id"];

fn all_names() -> Vec<&'static str> {
    POINT_NAMES.iter().chain(&CELL_NAMES).copied().collect()
}

/// det[b − a, c − a, d − a] by the triple product (6 × signed volume).
fn det6(p: &[[f64; 3]], t: [usize; 4]) -> f64 {
    let e = |i: usize| {
        [
            p[t[i]][0] - p[t[0]][0],
            p[t[i]][1] - p[t[0]][1],
            p[t[i]][2] - p[t[0]][2],
        ]
    };
    let (a, b, c) = (e(1), e(2), e(3));
    a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
        + a[2] * (b[0] * c[1] - b[1] * c[0])
}

/// Two small boxes of different materials (stable Neo-Hookean, linear) and initial velocities;
/// the first spins, so its steps stretch it and the stable Neo-Hookean one is not quadratic.
fn two_box_scene(extra: &str) -> String {
    format!(
        r#"
[simulation]
h = 0.01
steps = 2
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"

[output]
vtu_per_object = true
{extra}

[[objects]]
name = "a"
mesh = {{ generator = "box", min = [0.0, 0.0, 0.0], max = [0.1, 0.1, 0.1], cells = [2, 1, 1] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}
velocity = [0.5, 0.0, 0.0]
angular_velocity = {{ axis = [0.0, 0.0, 1.0], omega = 20.0 }}

[[objects]]
name = "b"
mesh = {{ generator = "box", min = [0.3, 0.0, 0.0], max = [0.4, 0.1, 0.1], cells = [1, 1, 2] }}
material = {{ model = "linear", youngs_modulus = 3e4, poisson_ratio = 0.45, density = 1000.0 }}
velocity = [0.0, 0.0, -0.3]
"#
    )
}

/// Checks that the per-object grids of a frame are exactly the whole frame's vertices, cells
/// and arrays, split by object.
fn check_partition(dir: &std::path::Path, step: usize, bodies: &[jello::problem::Body]) {
    let names = all_names();
    let whole = read_grid(&dir.join(format!("frame_{step:05}.vtu")), &names);
    let (mut nv, mut nc) = (0, 0);
    for (i, b) in bodies.iter().enumerate() {
        let part = read_grid(&dir.join(format!("frame_{step:05}.object{i}.vtu")), &names);
        assert_eq!(part.points, whole.points[b.vertices.clone()]);
        let shifted: Vec<[usize; 4]> = part
            .tets
            .iter()
            .map(|t| t.map(|v| v + b.vertices.start))
            .collect();
        assert_eq!(shifted, whole.tets[b.tets.clone()]);
        for name in POINT_NAMES {
            let k = if name == "residual |grad E| [N]" {
                1
            } else {
                3
            };
            assert_eq!(
                part.arrays[name],
                whole.arrays[name][k * b.vertices.start..k * b.vertices.end]
            );
        }
        for name in CELL_NAMES {
            assert_eq!(part.arrays[name], whole.arrays[name][b.tets.clone()]);
        }
        assert!(part.arrays["object id"].iter().all(|&o| o == i as f64));
        nv += part.points.len();
        nc += part.tets.len();
    }
    assert_eq!((nv, nc), (whole.points.len(), whole.tets.len()));
}

#[test]
fn frame_cells_hold_det_f_and_closed_form_von_mises_of_a_uniaxial_stretch() {
    use jello::material::MaterialModel;
    use jello::output::{FrameData, FrameOptions, FrameWriter};
    let path = scratch("stretch.toml");
    std::fs::write(&path, two_box_scene("")).unwrap();
    let built = jello::scene::Scene::load(&path).unwrap().build().unwrap();
    let model = &built.model;
    // x = diag(s, 1, 1) X: every tet has F = diag(s, 1, 1), J = s.
    let s = 1.2;
    let x: Vec<f64> = model
        .mesh
        .positions
        .iter()
        .flat_map(|p| [s * p[0], p[1], p[2]])
        .collect();
    let v = vec![0.25; x.len()];
    let out = scratch("stretch_run");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("frames")).unwrap();
    let mut w = FrameWriter::new(
        &out,
        model,
        FrameOptions {
            vtu: true,
            vtu_per_object: true,
            obj: false,
        },
    );
    w.write(
        0,
        model,
        &FrameData {
            t: 0.0,
            x: &x,
            v: &v,
            residual: None,
        },
    )
    .unwrap();
    let dir = out.join("frames");
    let g = read_grid(&dir.join("frame_00000.vtu"), &all_names());
    let (mut j_err, mut vm_err) = (0.0f64, 0.0f64);
    for (c, &t) in g.tets.iter().enumerate() {
        let j_indep = det6(&g.points, t) / det6(&model.mesh.positions, t);
        j_err = j_err.max((g.arrays["J [-]"][c] - j_indep).abs());
        assert!((j_indep - s).abs() < 1e-12);
        // Closed forms for F = diag(s, 1, 1), σ = P Fᵀ / J = diag(a, b, b), von Mises = |a − b|.
        let m = model.materials[c];
        let (mu, la) = (m.mu, m.lambda);
        let expected = match m.model {
            // P = μ(1 − 1/(I_C + 1)) F + λ(J − α) cof F: the λ term is isotropic in σ.
            MaterialModel::StableNeoHookean => mu * (1.0 - 1.0 / (s * s + 3.0)) * (s * s - 1.0) / s,
            // P = 2με + λ tr ε I, ε = diag(s − 1, 0, 0); σ = diag(P₁₁, P₂₂/s, P₂₂/s).
            MaterialModel::Linear => {
                let e = s - 1.0;
                (2.0 * mu * e + la * e) - la * e / s
            }
            other => panic!("unexpected material {other:?}"),
        };
        vm_err = vm_err.max((g.arrays["von Mises stress [Pa]"][c] - expected).abs() / expected);
    }
    eprintln!("max |J − det F| = {j_err:.2e}, max rel. von Mises error = {vm_err:.2e}");
    assert!(j_err < 1e-12, "J error {j_err}");
    assert!(vm_err < 1e-12, "von Mises relative error {vm_err}");
    // Ids: one material and one object id per box, in scene order.
    for (i, b) in model.bodies.iter().enumerate() {
        for c in b.tets.clone() {
            assert_eq!(g.arrays["material id"][c], i as f64);
            assert_eq!(g.arrays["object id"][c], i as f64);
        }
    }
    assert!(g.arrays["velocity [m/s]"].iter().all(|&u| u == 0.25));
    assert!(g.arrays["residual |grad E| [N]"].iter().all(|&r| r == 0.0));
    check_partition(&dir, 0, &model.bodies);
}

#[test]
fn run_frames_carry_state_residual_and_per_object_series() {
    use jello::runner::{run, step_problem, vertex_residuals, RunOptions};
    let path = scratch("run.toml");
    // One Newton iteration per step, so the residual at a step's end is far above round-off
    // and a field from the wrong step or the wrong iterate would show.
    let scene =
        two_box_scene("").replace("name = \"newton\"", "name = \"newton\"\nmax_iterations = 1");
    assert!(scene.contains("max_iterations = 1"));
    std::fs::write(&path, scene).unwrap();
    let built = jello::scene::Scene::load(&path).unwrap().build().unwrap();
    let out = scratch("run_out");
    let _ = std::fs::remove_dir_all(&out);
    let opts = RunOptions {
        out_dir: Some(out.clone()),
        backend: jello::gpu::Backend::Cpu,
        ..Default::default()
    };
    let (sim, _) = run(&path, built, &opts, |_, _| {}).unwrap();
    let dir = out.join("frames");
    let names = all_names();
    let f0 = read_grid(&dir.join("frame_00000.vtu"), &names);
    let f1 = read_grid(&dir.join("frame_00001.vtu"), &names);
    let f2 = read_grid(&dir.join("frame_00002.vtu"), &names);
    // Velocity and positions are the state's, displacement is from frame 0's points.
    assert_eq!(f2.arrays["velocity [m/s]"], sim.state.v);
    let pts: Vec<f64> = f2.points.iter().flatten().copied().collect();
    assert_eq!(pts, sim.state.x);
    let disp = &f2.arrays["displacement [m]"];
    for (i, (p, p0)) in f2.points.iter().zip(&f0.points).enumerate() {
        for (k, (a, b)) in p.iter().zip(p0).enumerate() {
            assert_eq!(disp[3 * i + k], a - b);
        }
    }
    // J against det F from the written points.
    let mut j_err = 0.0f64;
    for (c, &t) in f2.tets.iter().enumerate() {
        let j = det6(&f2.points, t) / det6(&f0.points, t);
        j_err = j_err.max((f2.arrays["J [-]"][c] - j).abs());
    }
    eprintln!("run: max |J − det F| = {j_err:.2e}");
    assert!(j_err < 1e-12);
    // Residual: frame 0 has none; frame 2's is ∇E of step 2's problem (started from frame 1's
    // positions and velocities) at frame 2's positions.
    assert!(f0.arrays["residual |grad E| [N]"].iter().all(|&r| r == 0.0));
    let x1: Vec<f64> = f1.points.iter().flatten().copied().collect();
    let start = jello::problem::State::new(x1, f1.arrays["velocity [m/s]"].clone(), sim.h);
    let problem = step_problem(&sim.model, &start, sim.h, None);
    let (expected, _) = vertex_residuals(&problem, &sim.model, &sim.state.x);
    let got = &f2.arrays["residual |grad E| [N]"];
    let scale = expected.iter().fold(0.0f64, |a, &b| a.max(b));
    let err = got
        .iter()
        .zip(&expected)
        .fold(0.0f64, |a, (g, e)| a.max((g - e).abs()));
    eprintln!("run: residual max {scale:.3e} N, max deviation {err:.2e} N");
    assert!(
        scale > 1e-6,
        "residual {scale} N is round-off: the check would be empty"
    );
    assert!(err <= 1e-12 * scale, "residual deviation {err} N");
    // Per-object files partition every frame; each object has its own series of 3 frames.
    for step in 0..=2 {
        check_partition(&dir, step, &sim.model.bodies);
    }
    for i in 0..2 {
        let pvd = std::fs::read_to_string(dir.join(format!("object{i}.pvd"))).unwrap();
        for step in 0..=2 {
            assert!(pvd.contains(&format!("file=\"frame_{step:05}.object{i}.vtu\"")));
        }
        assert_eq!(pvd.matches("<DataSet").count(), 3);
    }
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("frames/object1.pvd") && manifest.contains("frame_00002.object1.vtu")
    );
}

#[test]
fn vtu_per_object_without_vtu_names_the_key() {
    let path = scratch("bad.toml");
    std::fs::write(&path, two_box_scene("vtu = false")).unwrap();
    let err = match jello::scene::Scene::load(&path).unwrap().build() {
        Ok(_) => panic!("vtu_per_object without vtu must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("output.vtu_per_object"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
