//! Mesh readers on inputs a careless or hostile user brings: a UTF-8 byte-order mark, duplicate
//! tetrahedra, boundary and other element kinds mixed with tets, quadratic tets, counts above
//! the caps in `jello::limits`, and paths that are not regular files (a directory, a FIFO,
//! /dev/zero, a file above the size cap). Every error is one line naming the file and the line
//! (text) or element (binary); every skip or conversion is a warning with counts.

use jello::mesh::{parse_mesh, parse_tetgen, read_mesh, write_gmsh, GmshFormat, TetMesh};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/mesh")
        .join(name)
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_mesh_hostile_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The one-line message of `text` parsed as a mesh called `name`; panics if it parses.
fn error(name: &str, text: &[u8]) -> String {
    let e = parse_mesh(Path::new(name), text)
        .map(|l| format!("accepted: {} tets", l.mesh.num_tets()))
        .unwrap_or_else(|e| e.to_string());
    assert!(!e.starts_with("accepted"), "{name}: {e}");
    assert!(!e.contains('\n'), "{name}: multi-line: {e}");
    e
}

fn assert_has(e: &str, needles: &[&str]) {
    for n in needles {
        assert!(e.contains(n), "expected `{n}` in `{e}`");
    }
}

const NODE: &str = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 1 1 1\n";

/// The corner tet and the one on its slanted face, 1-based gmsh tags 1..5.
const GMSH_NODES: &str = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n5\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 1 1 1\n$EndNodes\n";

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Every text reader (and the text header of the binary formats) accepts a leading UTF-8
/// byte-order mark and reads the same mesh as without it.
#[test]
fn byte_order_mark_is_accepted_by_every_reader() {
    for name in [
        "two_tets_v22.msh",
        "two_tets_v40.msh",
        "two_tets_v41.msh",
        "gmsh_box_v22_bin.msh",
        "gmsh_box_v41_bin.msh",
        "two_tets.mesh",
        "two_tets_classic.vtk",
        "two_tets_v51.vtk",
        "meshio_box_bin.vtk",
    ] {
        let plain = std::fs::read(fixture(name)).unwrap();
        let with_bom = [BOM, &plain].concat();
        let a = parse_mesh(Path::new(name), &plain).unwrap();
        let b = parse_mesh(Path::new(name), &with_bom)
            .unwrap_or_else(|e| panic!("{name} with a BOM: {e}"));
        assert_eq!(a.mesh, b.mesh, "{name}");
        assert!(a.mesh.num_tets() > 0);
    }
    // TetGen: both files, and through the file system.
    let node = std::fs::read(fixture("two_tets_1based.node")).unwrap();
    let ele = std::fs::read(fixture("two_tets_1based.ele")).unwrap();
    let d = dir();
    std::fs::write(d.join("bom.node"), [BOM, &node].concat()).unwrap();
    std::fs::write(d.join("bom.ele"), [BOM, &ele].concat()).unwrap();
    let a = read_mesh(&fixture("two_tets_1based.node")).unwrap();
    let b = read_mesh(&d.join("bom.ele")).unwrap();
    assert_eq!(a.mesh, b.mesh);
}

/// The same four vertices twice, in another order: an error at the second, naming the first.
#[test]
fn duplicate_tets_name_both_lines_or_records() {
    let e = parse_tetgen(
        Path::new("dup.node"),
        NODE.as_bytes(),
        Path::new("dup.ele"),
        b"3 4 0\n0 0 1 2 3\n1 1 2 3 4\n2 3 0 2 1\n",
    )
    .unwrap_err()
    .to_string();
    assert_has(&e, &["dup.ele:4:", "duplicate", "line 2", "0 1 2 3"]);

    let msh = format!(
        "{GMSH_NODES}$Elements\n3\n1 4 0 1 2 3 4\n2 4 0 2 3 4 5\n3 4 0 5 4 3 2\n$EndElements\n"
    );
    // Elements on lines 14..16; the third lists the second's vertices backwards.
    assert_has(
        &error("dup.msh", msh.as_bytes()),
        &["dup.msh:16:", "duplicate", "line 15"],
    );

    let medit = "MeshVersionFormatted 1\nDimension 3\nVertices\n5\n0 0 0 0\n1 0 0 0\n0 1 0 0\n0 0 1 0\n1 1 1 0\nTetrahedra\n2\n1 2 3 4 0\n4 3 2 1 0\nEnd\n";
    assert_has(
        &error("dup.mesh", medit.as_bytes()),
        &["dup.mesh:13:", "line 12"],
    );

    let vtk = "# vtk DataFile Version 3.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 4 double\n0 0 0\n1 0 0\n0 1 0\n0 0 1\nCELLS 2 10\n4 0 1 2 3\n4 2 3 0 1\nCELL_TYPES 2\n10\n10\n";
    assert_has(
        &error("dup.vtk", vtk.as_bytes()),
        &["dup.vtk:12:", "line 11"],
    );

    // Binary: element records.
    let m = TetMesh {
        positions: vec![
            [0.0; 3],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
            [1.0, 1.0, 1.0],
        ],
        tets: vec![[0, 1, 2, 3], [1, 2, 3, 4], [2, 1, 3, 4]],
    };
    let p = dir().join("dup_bin.msh");
    write_gmsh(&p, &m, GmshFormat::V41Binary).unwrap();
    let e = read_mesh(&p).unwrap_err().to_string();
    assert_has(
        &e,
        &["dup_bin.msh", "element #2 (binary data)", "element #1"],
    );
}

/// Counts of each element type in a gmsh 2.2 ASCII file, read by a separate, minimal scan.
fn gmsh22_type_counts(text: &str) -> std::collections::BTreeMap<u32, usize> {
    let body = text
        .split("$Elements")
        .nth(1)
        .unwrap()
        .split("$EndElements")
        .next()
        .unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for line in body.lines().skip(2) {
        let t: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        *counts.entry(t).or_insert(0) += 1;
    }
    counts
}

/// Points, lines and triangles that name boundary groups are skipped with one warning giving
/// the count per kind; the same mesh in gmsh 2.2 ASCII, 4.1 ASCII and 4.1 binary (written by
/// gmsh itself) gives the same counts.
#[test]
fn boundary_elements_are_counted_in_a_warning() {
    let text = std::fs::read_to_string(fixture("gmsh_box_v22_ascii.msh")).unwrap();
    let counts = gmsh22_type_counts(&text);
    let tets = counts[&4];
    let expected: Vec<(String, String)> = counts
        .iter()
        .filter(|(t, _)| **t != 4)
        .map(|(t, n)| (format!("{n} × "), format!("(type {t})")))
        .collect();
    assert!(
        expected.len() >= 3,
        "the fixture lost its boundary elements"
    );
    let skipped: usize = counts
        .iter()
        .filter(|(t, _)| **t != 4)
        .map(|(_, n)| n)
        .sum();
    for name in [
        "gmsh_box_v22_ascii.msh",
        "gmsh_box_v41_ascii.msh",
        "gmsh_box_v41_bin.msh",
    ] {
        let l = read_mesh(&fixture(name)).unwrap();
        assert_eq!(l.mesh.num_tets(), tets, "{name}");
        let w: Vec<&String> = l
            .warnings
            .iter()
            .filter(|w| w.contains("skipped"))
            .collect();
        assert_eq!(w.len(), 1, "{name}: {:?}", l.warnings);
        assert!(w[0].contains(name), "{}", w[0]);
        assert!(
            w[0].contains(&format!("skipped {skipped} lower-dimensional")),
            "{}",
            w[0]
        );
        for (count, ty) in &expected {
            // "N × <kind name> (type T)" for every type.
            let hit = w[0]
                .split(", ")
                .any(|part| part.contains(count) && part.contains(ty));
            assert!(hit, "{name}: no `{count}…{ty}` in {}", w[0]);
        }
    }
    // MEDIT: one triangle section of 1 element beside the tets.
    let l = read_mesh(&fixture("two_tets.mesh")).unwrap();
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("skipped 1 lower-dimensional MEDIT") && w.contains("Triangles")),
        "{:?}",
        l.warnings
    );
    // Legacy VTK: one triangle cell.
    let l = read_mesh(&fixture("two_tets_classic.vtk")).unwrap();
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("1 × triangle (type 5)")),
        "{:?}",
        l.warnings
    );
}

/// A volume element jello cannot simulate (hexahedron, prism, cubic tet...) mixed with tets is
/// an error at its line or record, never a silent drop; so is an unknown element type.
#[test]
fn other_volume_elements_are_refused_where_they_are() {
    // gmsh 2.2 ASCII, a hexahedron on line 16 (its nodes need not exist: refused first).
    let msh = format!(
        "{GMSH_NODES}$Elements\n3\n1 4 0 1 2 3 4\n2 4 0 2 3 4 5\n3 5 0 1 2 3 4 5 1 2 3\n$EndElements\n"
    );
    assert_has(
        &error("hex.msh", msh.as_bytes()),
        &["hex.msh:16:", "type 5", "hexahedron", "convert"],
    );
    // A cubic (20-node) tetrahedron is refused too: only its corners would be linear.
    let msh = format!(
        "{GMSH_NODES}$Elements\n1\n1 29 0 1 2 3 4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n$EndElements\n"
    );
    assert_has(
        &error("p3.msh", msh.as_bytes()),
        &["p3.msh:14:", "20-node tetrahedron"],
    );
    let msh = format!("{GMSH_NODES}$Elements\n1\n1 200 0 1 2 3 4\n$EndElements\n");
    assert_has(
        &error("unknown.msh", msh.as_bytes()),
        &["unknown.msh:14:", "unknown gmsh element type 200"],
    );
    // gmsh 4.1 ASCII: a prism block, named at its block header line.
    let msh41 = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 6 1 6\n3 1 0 6\n1\n2\n3\n4\n5\n6\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n1 0 1\n0 1 1\n$EndNodes\n$Elements\n1 1 1 1\n3 1 6 1\n1 1 2 3 4 5 6\n$EndElements\n";
    assert_has(
        &error("prism41.msh", msh41.as_bytes()),
        &["prism41.msh:22:", "6-node prism", "block of 1"],
    );
    // gmsh 2.2 binary: a block of hexahedra, named by element record.
    let mut b = b"$MeshFormat\n2.2 1 8\n".to_vec();
    b.extend_from_slice(&1i32.to_le_bytes());
    b.extend_from_slice(b"\n$EndMeshFormat\n$Nodes\n8\n");
    for i in 0..8i32 {
        b.extend_from_slice(&(i + 1).to_le_bytes());
        for k in 0..3 {
            b.extend_from_slice(&(((i >> k) & 1) as f64).to_le_bytes());
        }
    }
    b.extend_from_slice(b"\n$EndNodes\n$Elements\n1\n");
    for v in [5i32, 1, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(b"\n$EndElements\n");
    assert_has(
        &error("hex_bin.msh", &b),
        &["hex_bin.msh", "element #0", "8-node hexahedron"],
    );
    // Legacy VTK: a hexahedron cell on line 17, an unknown type.
    let vtk = |ty: u32| {
        format!("# vtk DataFile Version 3.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 8 double\n0 0 0\n1 0 0\n0 1 0\n1 1 0\n0 0 1\n1 0 1\n0 1 1\n1 1 1\nCELLS 2 14\n4 0 1 2 4\n8 0 1 3 2 4 5 7 6\nCELL_TYPES 2\n10\n{ty}\n")
    };
    assert_has(
        &error("hex.vtk", vtk(12).as_bytes()),
        &["hex.vtk:16:", "VTK cell type 12", "hexahedron"],
    );
    assert_has(
        &error("unknown.vtk", vtk(99).as_bytes()),
        &["unknown.vtk:16:", "unknown VTK cell type 99"],
    );
    // MEDIT: a Hexahedra section, named at its keyword.
    let medit = "MeshVersionFormatted 1\nDimension 3\nVertices\n4\n0 0 0 0\n1 0 0 0\n0 1 0 0\n0 0 1 0\nTetrahedra\n1\n1 2 3 4 0\nHexahedra\n1\n1 2 3 4 1 2 3 4 0\nEnd\n";
    assert_has(
        &error("hex.mesh", medit.as_bytes()),
        &["hex.mesh:12:", "MEDIT section Hexahedra", "1 elements"],
    );
}

/// 10-node tets are read as linear tets by their corners (the documented conversion), with a
/// warning; the mid-edge nodes stay as unused vertices.
#[test]
fn quadratic_tets_are_read_by_their_corners() {
    // Corners 1..4 of the unit corner tet, mid-edge nodes 5..10.
    let nodes = "1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 0.5 0 0\n6 0.5 0.5 0\n7 0 0.5 0\n8 0 0 0.5\n9 0 0.5 0.5\n10 0.5 0 0.5\n";
    let msh = format!(
        "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n10\n{nodes}$EndNodes\n$Elements\n1\n1 11 0 1 2 3 4 5 6 7 8 9 10\n$EndElements\n"
    );
    let vtk_points: String = nodes
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_string() + "\n")
        .collect();
    let vtk = format!("# vtk DataFile Version 3.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 10 double\n{vtk_points}CELLS 1 11\n10 0 1 2 3 4 5 6 7 8 9\nCELL_TYPES 1\n24\n");
    let medit_vertices: String = vtk_points.lines().map(|l| format!("{l} 0\n")).collect();
    let medit = format!("MeshVersionFormatted 1\nDimension 3\nVertices\n10\n{medit_vertices}TetrahedraP2\n1\n1 2 3 4 5 6 7 8 9 10 0\nEnd\n");
    // A mid-edge node out of range is an error even though only the corners are kept.
    let bad = [
        (
            "p2bad.msh",
            msh.replace("8 9 10\n$EndElements", "8 9 11\n$EndElements"),
            19,
        ),
        ("p2bad.vtk", vtk.replace("7 8 9\nCELL", "7 8 10\nCELL"), 17),
        (
            "p2bad.mesh",
            medit.replace("9 10 0\nEnd", "9 11 0\nEnd"),
            17,
        ),
    ];
    for (name, text, line) in &bad {
        assert_has(
            &error(name, text.as_bytes()),
            &[&format!("{name}:{line}:"), "out of range"],
        );
    }
    let node: String = std::iter::once("10 3 0 0\n".to_string())
        .chain(
            vtk_points
                .lines()
                .enumerate()
                .map(|(i, l)| format!("{i} {l}\n")),
        )
        .collect();
    let ok = parse_tetgen(
        Path::new("p2.node"),
        node.as_bytes(),
        Path::new("p2.ele"),
        b"1 10 0\n0 0 1 2 3 4 5 6 7 8 9\n",
    )
    .unwrap();
    assert_eq!(ok.mesh.tets, vec![[0, 1, 2, 3]]);
    let e = parse_tetgen(
        Path::new("p2.node"),
        node.as_bytes(),
        Path::new("p2bad.ele"),
        b"1 10 0\n0 0 1 2 3 4 5 6 7 8 10\n",
    )
    .unwrap_err()
    .to_string();
    assert_has(&e, &["p2bad.ele:2:", "out of range"]);
    for (name, text) in [("p2.msh", msh), ("p2.vtk", vtk), ("p2.mesh", medit)] {
        let l = parse_mesh(Path::new(name), text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.mesh.tets, vec![[0, 1, 2, 3]], "{name}");
        assert!((l.mesh.total_volume() - 1.0 / 6.0).abs() < 1e-15, "{name}");
        assert_eq!(l.unreferenced, 6, "{name}");
        assert!(
            l.warnings
                .iter()
                .any(|w| w.contains(name) && w.contains("read 1 10-node")),
            "{name}: {:?}",
            l.warnings
        );
    }
}

/// Declared counts above the caps in `jello::limits` are refused by name, before anything is
/// allocated for them (the existing tests cover counts the file cannot hold).
#[test]
fn counts_above_the_caps() {
    let vcap = jello::limits::MAX_MESH_VERTICES + 1;
    let ecap = jello::limits::MAX_MESH_ELEMENTS + 1;
    let msh = format!("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n{vcap}\n1 0 0 0\n");
    assert_has(
        &error("cap.msh", msh.as_bytes()),
        &["cap.msh:5:", "MAX_MESH_VERTICES"],
    );
    let msh = format!("{GMSH_NODES}$Elements\n{ecap}\n1 4 0 1 2 3 4\n");
    assert_has(
        &error("cap_el.msh", msh.as_bytes()),
        &["cap_el.msh:13:", "MAX_MESH_ELEMENTS"],
    );
    let e = parse_tetgen(
        Path::new("cap.node"),
        NODE.as_bytes(),
        Path::new("cap.ele"),
        format!("{ecap} 4 0\n0 0 1 2 3\n").as_bytes(),
    )
    .unwrap_err()
    .to_string();
    assert_has(&e, &["cap.ele:1:", "MAX_MESH_ELEMENTS"]);
    let medit = format!("MeshVersionFormatted 1\nDimension 3\nVertices\n{vcap}\n0 0 0 0\n");
    assert_has(
        &error("cap.mesh", medit.as_bytes()),
        &["cap.mesh:4:", "MAX_MESH_VERTICES"],
    );
    let vtk = format!(
        "# vtk DataFile Version 3.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS {vcap} double\n"
    );
    assert_has(
        &error("cap.vtk", vtk.as_bytes()),
        &["cap.vtk:5:", "MAX_MESH_VERTICES"],
    );
    // gmsh 4.1 binary: the header's u64 count.
    let mut b = b"$MeshFormat\n4.1 1 8\n".to_vec();
    b.extend_from_slice(&1i32.to_le_bytes());
    b.extend_from_slice(b"\n$EndMeshFormat\n$Nodes\n");
    for v in [1u64, vcap as u64, 1, vcap as u64] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    // Enough bytes behind the header that only the cap can refuse it.
    b.resize(b.len() + 64, 0);
    let e = error("cap_bin.msh", &b);
    assert!(
        e.contains("MAX_MESH_VERTICES") || e.contains("declared"),
        "{e}"
    );
}

/// Paths that are not regular files are refused from their metadata, before they are opened:
/// a directory, a FIFO (opening it would block forever), /dev/zero (reading never ends) and a
/// file above `MAX_MESH_FILE_BYTES` (sparse here, so nothing is written or read).
#[test]
fn special_files_are_refused_before_opening() {
    let d = dir().join("special");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let check = |p: &Path, needle: &str| {
        let e = read_mesh(p).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(e.contains(&*name) && e.contains(needle), "{e}");
    };
    let sub = d.join("folder.msh");
    std::fs::create_dir_all(&sub).unwrap();
    check(&sub, "a directory");
    let big = d.join("big.vtk");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(jello::limits::MAX_MESH_FILE_BYTES + 1)
        .unwrap();
    check(&big, "cap");
    #[cfg(unix)]
    {
        let zero = d.join("zero.msh");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        check(&zero, "character device");
        // TetGen: a valid .node and a FIFO for the .ele; the message names the .ele.
        std::fs::write(d.join("pipe.node"), NODE).unwrap();
        let fifo = d.join("pipe.ele");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
        {
            for p in [d.join("pipe.node"), fifo] {
                let e = read_mesh(&p).unwrap_err().to_string();
                assert!(e.contains("pipe.ele") && e.contains("FIFO"), "{e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}
