//! Writers: VTU frames decode back (with an independent base64 decoder) to the mesh and fields,
//! the PVD lists the frames, OBJ/PLY hold exactly the boundary surface (closed, outward), and the
//! mesh report reads right.

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
