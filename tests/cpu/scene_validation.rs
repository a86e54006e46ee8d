//! Every scene value is validated before any work starts: one case per class of bad value
//! (non-finite, out of range, zero direction, overflowing size, degenerate transform, duplicate
//! pins, keys that do not apply), each a one-line error naming the scene file and the dotted
//! key. Library level (`Scene::parse` + `build`); tests/cli/cli_errors.rs checks the binary's exit.

use crate::common;

use jello::scene::Scene;
use std::path::{Path, PathBuf};

/// A valid scene every case perturbs.
const BASE: &str = common::cli::BAR_SCENE;

fn scene_path(name: &str) -> PathBuf {
    std::env::temp_dir()
        .join(format!("jello_scene_validation_{}", std::process::id()))
        .join(format!("{name}.toml"))
}

/// `text` must fail to parse or build with one line naming the file, `key` (backquoted, as the
/// messages print it) and `needle`. Returns the message.
fn fails(name: &str, text: &str, key: &str, needle: &str) -> String {
    let path = scene_path(name);
    let err = match Scene::parse(&path, text).and_then(|s| s.build()) {
        Ok(_) => panic!("{name}: accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    assert!(!err.contains('\n'), "{name}: multi-line message: {err}");
    assert!(
        err.contains(&format!("{name}.toml")),
        "{name}: file not named: {err}"
    );
    assert!(
        err.contains(&format!("`{key}`")),
        "{name}: expected key `{key}` in: {err}"
    );
    assert!(
        err.contains(needle),
        "{name}: expected `{needle}` in: {err}"
    );
    err
}

/// BASE with `from` replaced by `to`.
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "`{from}` not in BASE");
    BASE.replacen(from, to, 1)
}

/// BASE with `extra` appended.
fn plus(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

const BOX: &str =
    r#"generator = "box", min = [0.0, 0.0, 0.0], max = [1.0, 0.1, 0.1], cells = [4, 1, 1]"#;
const MAT: &str = r#"youngs_modulus = 1e6, poisson_ratio = 0.3, density = 1000.0"#;

#[test]
fn base_scene_builds() {
    // Guards every case below: the unperturbed scene is valid.
    Scene::parse(&scene_path("base"), BASE)
        .and_then(|s| s.build())
        .unwrap();
}

#[test]
fn time_step_and_step_count() {
    let k = "simulation.h";
    fails("h_nan", &edit("h = 0.01", "h = nan"), k, "> 0");
    fails("h_inf", &edit("h = 0.01", "h = inf"), k, "> 0");
    fails(
        "h_tiny",
        &edit("h = 0.01", "h = 1e-300"),
        k,
        "TIME_STEP_RANGE",
    );
    fails(
        "h_huge",
        &edit("h = 0.01", "h = 1e300"),
        k,
        "TIME_STEP_RANGE",
    );
    let k = "simulation.steps";
    fails(
        "steps_cap",
        &edit(
            "steps = 2",
            &format!("steps = {}", jello::limits::MAX_STEPS + 1),
        ),
        k,
        "MAX_STEPS",
    );
    fails(
        "steps_i64",
        &edit("steps = 2", "steps = 9223372036854775807"),
        k,
        "MAX_STEPS",
    );
    fails("steps_neg", &edit("steps = 2", "steps = -5"), k, "-5");
}

#[test]
fn gravity() {
    let k = "simulation.gravity";
    fails("g_nan", &edit("-9.81, 0.0]", "nan, 0.0]"), k, "finite");
    fails("g_inf", &edit("-9.81, 0.0]", "-inf, 0.0]"), k, "finite");
    fails("g_huge", &edit("-9.81, 0.0]", "-1e31, 0.0]"), k, "above");
}

#[test]
fn box_generator_sizes_and_corners() {
    let k = "objects[0].mesh.cells";
    // 2^32 · 2^32 · 4 wraps to 0 in u64 arithmetic: the checked product refuses it.
    fails(
        "cells_wrap",
        &edit("cells = [4, 1, 1]", "cells = [4294967296, 4294967296, 4]"),
        k,
        "MAX_GENERATOR_CELLS",
    );
    fails(
        "cells_big",
        &edit("cells = [4, 1, 1]", "cells = [2000, 2000, 2000]"),
        k,
        "MAX_GENERATOR_CELLS",
    );
    fails(
        "cells_zero",
        &edit("cells = [4, 1, 1]", "cells = [4, 0, 1]"),
        k,
        "≥ 1",
    );
    fails(
        "cells_neg",
        &edit("cells = [4, 1, 1]", "cells = [4, -1, 1]"),
        "objects[0].mesh.cells[1]",
        "-1",
    );
    fails(
        "min_nan",
        &edit("min = [0.0, 0.0, 0.0]", "min = [0.0, nan, 0.0]"),
        "objects[0].mesh.min",
        "finite",
    );
    fails(
        "max_below_min",
        &edit("max = [1.0, 0.1, 0.1]", "max = [1.0, -0.1, 0.1]"),
        "objects[0].mesh.max",
        "exceed",
    );
    fails(
        "max_far",
        &edit("max = [1.0, 0.1, 0.1]", "max = [1e13, 0.1, 0.1]"),
        "objects[0].mesh.max",
        "MAX_COORDINATE",
    );
    fails(
        "box_radius",
        &edit("cells = [4, 1, 1]", "cells = [4, 1, 1], radius = 2.0"),
        "objects[0].mesh.radius",
        "does not apply",
    );
}

#[test]
fn ball_generator() {
    let ball = |extra: &str| {
        edit(
            BOX,
            &format!(r#"generator = "ball", center = [0.0, 1.0, 0.0], {extra}"#),
        )
    };
    fails(
        "ball_r0",
        &ball("radius = 0.0"),
        "objects[0].mesh.radius",
        "> 0",
    );
    fails(
        "ball_rnan",
        &ball("radius = nan"),
        "objects[0].mesh.radius",
        "finite",
    );
    fails(
        "ball_res",
        &ball("radius = 0.5, resolution = 126"),
        "objects[0].mesh.resolution",
        "MAX_GENERATOR_CELLS",
    );
    fails(
        "ball_res_huge",
        &ball("radius = 0.5, resolution = 9223372036854775807"),
        "objects[0].mesh.resolution",
        "2..=",
    );
    fails(
        "ball_cells",
        &ball("radius = 0.5, cells = [2, 2, 2]"),
        "objects[0].mesh.cells",
        "does not apply",
    );
    // The largest resolution the cap allows is accepted in principle (checked, not built).
    let max = jello::scene::ball_max_resolution();
    let n = max.div_ceil(2) * 2;
    assert!(n.pow(3) <= jello::limits::MAX_GENERATOR_CELLS);
    assert!((n + 2).pow(3) > jello::limits::MAX_GENERATOR_CELLS);
}

#[test]
fn ring_net_generator() {
    let net = |extra: &str| {
        edit(
            BOX,
            &format!(
                r#"generator = "ring_net", center = [0.0, 1.0, 0.0], radius = 0.05, inner_radius = 0.04, cells = [12, 1, 1], {extra}"#
            ),
        )
    };
    fails(
        "net_count0",
        &net("height = 0.01, count = [3, 0]"),
        "objects[0].mesh.count",
        "≥ 1",
    );
    fails(
        "net_no_count",
        &net("height = 0.01"),
        "objects[0].mesh",
        "needs count",
    );
    // Rings 4 cm thick through 4 cm holes would intersect.
    fails(
        "net_thick",
        &net("height = 0.04, count = [2, 2]"),
        "objects[0].mesh.height",
        "would intersect",
    );
    fails(
        "net_cells",
        &net("height = 0.01, count = [2, 2], resolution = 4"),
        "objects[0].mesh.resolution",
        "does not apply",
    );
    fails(
        "net_huge",
        &net("height = 0.01, count = [100000, 100000]"),
        "objects[0].mesh.cells",
        "MAX_GENERATOR_CELLS",
    );
    // `count` belongs to the ring net only.
    fails(
        "ball_count",
        &edit(
            BOX,
            r#"generator = "ball", center = [0.0, 1.0, 0.0], radius = 0.5, count = [2, 2]"#,
        ),
        "objects[0].mesh.count",
        "does not apply",
    );
}

#[test]
fn transforms_that_break_the_mesh_name_their_key() {
    let t = |tr: &str| {
        edit(
            "material = {",
            &format!("transform = {{ {tr} }}\nmaterial = {{"),
        )
    };
    let k = "objects[0].transform.scale";
    // Every volume underflows to zero.
    fails("scale_tiny", &t("scale = 1e-300"), k, "degenerate");
    fails("scale_huge", &t("scale = 1e20"), k, "MAX_COORDINATE");
    fails("scale_zero", &t("scale = 0.0"), k, "> 0");
    fails("scale_nan", &t("scale = nan"), k, "finite");
    fails(
        "fit_tiny",
        &t("fit = 1e-300"),
        "objects[0].transform.fit",
        "degenerate",
    );
    fails(
        "fit_inf",
        &t("fit = inf"),
        "objects[0].transform.fit",
        "finite",
    );
    fails(
        "rotate_axis0",
        &t("rotate = { axis = [0.0, 0.0, 0.0], degrees = 30.0 }"),
        "objects[0].transform.rotate.axis",
        "non-zero direction",
    );
    fails(
        "rotate_axis_nan",
        &t("rotate = { axis = [nan, 0.0, 1.0], degrees = 30.0 }"),
        "objects[0].transform.rotate.axis",
        "finite",
    );
    fails(
        "rotate_deg_inf",
        &t("rotate = { axis = [0.0, 0.0, 1.0], degrees = inf }"),
        "objects[0].transform.rotate.degrees",
        "finite",
    );
    fails(
        "translate_far",
        &t("translate = [1e13, 0.0, 0.0]"),
        "objects[0].transform.translate",
        "MAX_COORDINATE",
    );
    // A 1 µm part moved 1e11 m away: f64 spacing there (~1.5e-5 m) merges its vertices.
    let tiny = edit("max = [1.0, 0.1, 0.1]", "max = [1e-6, 1e-6, 1e-6]");
    let tiny = tiny.replacen(
        "material = {",
        "transform = { translate = [1e11, 0.0, 0.0] }\nmaterial = {",
        1,
    );
    fails(
        "translate_rounds",
        &tiny,
        "objects[0].transform.translate",
        "degenerate",
    );
}

#[test]
fn material_values() {
    let k = "objects[0].material.density";
    fails(
        "rho_nan",
        &edit("density = 1000.0", "density = nan"),
        k,
        "finite",
    );
    fails(
        "rho_inf",
        &edit("density = 1000.0", "density = inf"),
        k,
        "finite",
    );
    // Positive and finite, but every vertex mass underflows f32.
    fails(
        "rho_tiny",
        &edit("density = 1000.0", "density = 1e-300"),
        k,
        "f32",
    );
    fails(
        "e_nan",
        &edit("youngs_modulus = 1e6", "youngs_modulus = nan"),
        "objects[0].material.youngs_modulus",
        "finite",
    );
    fails(
        "e_huge",
        &edit("youngs_modulus = 1e6", "youngs_modulus = 1e35"),
        "objects[0].material.youngs_modulus",
        "above",
    );
    fails(
        "nu_nan",
        &edit("poisson_ratio = 0.3", "poisson_ratio = nan"),
        "objects[0].material.poisson_ratio",
        "(-1, 0.5)",
    );
    fails(
        "mu_nan",
        &edit(MAT, "mu = nan, lambda = 1e6, density = 1000.0"),
        "objects[0].material.mu",
        "finite",
    );
    fails(
        "lambda_inf",
        &edit(MAT, "mu = 1e6, lambda = inf, density = 1000.0"),
        "objects[0].material.lambda",
        "finite",
    );
}

#[test]
fn regions_velocities_and_spin() {
    let region = |r: &str| {
        plus(&format!(
            "[[objects.regions]]\nregion = {r}\nmaterial = {{ model = \"linear\", {MAT} }}\n"
        ))
    };
    fails(
        "region_box",
        &region("{ box = { min = [0.0, 0.0, 0.0], max = [1.0, -1.0, 1.0] } }"),
        "objects[0].regions[0].region.box.max",
        "≥ min",
    );
    fails(
        "slab_normal0",
        &region("{ slab = { normal = [0.0, 0.0, 0.0], offset = 0.5, thickness = 0.1 } }"),
        "objects[0].regions[0].region.slab.normal",
        "non-zero direction",
    );
    fails(
        "slab_thick0",
        &region("{ slab = { normal = [1.0, 0.0, 0.0], offset = 0.5, thickness = 0.0 } }"),
        "objects[0].regions[0].region.slab.thickness",
        "> 0",
    );
    fails(
        "slab_offset_nan",
        &region("{ slab = { normal = [1.0, 0.0, 0.0], offset = nan, thickness = 0.1 } }"),
        "objects[0].regions[0].region.slab.offset",
        "finite",
    );
    // offset / |normal| is where the plane sits: 1e-20 · … puts it beyond any coordinate.
    fails(
        "slab_offset_far",
        &region("{ slab = { normal = [1e-20, 0.0, 0.0], offset = 1.0, thickness = 0.1 } }"),
        "objects[0].regions[0].region.slab.offset",
        "MAX_COORDINATE",
    );
    fails(
        "sphere_inner_ge_outer",
        &region("{ sphere = { center = [0.5, 0.0, 0.0], radius = 0.1, inner_radius = 0.1 } }"),
        "objects[0].regions[0].region.sphere.inner_radius",
        "[0, radius",
    );
    fails(
        "sphere_inner_negative",
        &region("{ sphere = { center = [0.5, 0.0, 0.0], radius = 0.1, inner_radius = -0.01 } }"),
        "objects[0].regions[0].region.sphere.inner_radius",
        "[0, radius",
    );
    fails(
        "sphere_radius0",
        &region("{ sphere = { center = [0.5, 0.0, 0.0], radius = 0.0 } }"),
        "objects[0].regions[0].region.sphere.radius",
        "> 0",
    );
    fails(
        "sphere_center_nan",
        &region("{ sphere = { center = [nan, 0.0, 0.0], radius = 0.1 } }"),
        "objects[0].regions[0].region.sphere.center",
        "finite",
    );
    fails(
        "velocity_nan",
        &edit(
            "density = 1000.0 }",
            "density = 1000.0 }\nvelocity = [0.0, nan, 0.0]",
        ),
        "objects[0].velocity",
        "finite",
    );
    fails(
        "spin_axis0",
        &edit(
            "density = 1000.0 }",
            "density = 1000.0 }\nangular_velocity = { axis = [0.0, 0.0, 0.0], omega = 1.0 }",
        ),
        "objects[0].angular_velocity.axis",
        "non-zero direction",
    );
    fails(
        "spin_omega_inf",
        &edit(
            "density = 1000.0 }",
            "density = 1000.0 }\nangular_velocity = { axis = [0.0, 0.0, 1.0], omega = inf }",
        ),
        "objects[0].angular_velocity.omega",
        "finite",
    );
}

const CLAMP: &str = "region = { box = { min = [-0.01, -1.0, -1.0], max = [0.01, 1.0, 1.0] } }";

#[test]
fn pin_scripts() {
    let pin = |script: &str| plus(&format!("[[pins]]\n{CLAMP}\nscript = {script}\n"));
    fails(
        "pin_vel_nan",
        &pin(r#"{ type = "translate", velocity = [nan, 0.0, 0.0] }"#),
        "pins[0].script.velocity",
        "finite",
    );
    fails(
        "pin_axis0",
        &pin(
            r#"{ type = "rotate", center = [0.0, 0.0, 0.0], axis = [0.0, 0.0, 0.0], omega = 1.0 }"#,
        ),
        "pins[0].script.axis",
        "non-zero direction",
    );
    fails(
        "pin_omega_nan",
        &pin(
            r#"{ type = "rotate", center = [0.0, 0.0, 0.0], axis = [1.0, 0.0, 0.0], omega = nan }"#,
        ),
        "pins[0].script.omega",
        "finite",
    );
    fails(
        "pin_center_inf",
        &pin(
            r#"{ type = "rotate", center = [inf, 0.0, 0.0], axis = [1.0, 0.0, 0.0], omega = 1.0 }"#,
        ),
        "pins[0].script.center",
        "finite",
    );
}

/// Keyframed scripts: every phase value is checked and named by its index.
#[test]
fn keyframed_pin_scripts() {
    let pin = |phases: &str| {
        plus(&format!(
            "[[pins]]\n{CLAMP}\nscript = {{ type = \"keyframes\", phases = [{phases}] }}\n"
        ))
    };
    let rot = |axis: &str, deg: &str| {
        format!("rotate = {{ center = [0.0, 0.0, 0.0], axis = {axis}, degrees = {deg} }}")
    };
    let k = "pins[0].script.phases";
    fails("kf_empty", &pin(""), k, "at least one phase");
    fails(
        "kf_end_before_start",
        &pin("{ start = 1.0, end = 1.0, translate = [0.1, 0.0, 0.0] }"),
        "pins[0].script.phases[0].end",
        "must be after start",
    );
    fails(
        "kf_start_nan",
        &pin("{ start = nan, end = 1.0, translate = [0.1, 0.0, 0.0] }"),
        "pins[0].script.phases[0].start",
        "finite",
    );
    fails(
        "kf_end_inf",
        &pin("{ start = 0.0, end = inf, translate = [0.1, 0.0, 0.0] }"),
        "pins[0].script.phases[0].end",
        "finite",
    );
    fails(
        "kf_second_phase",
        &pin(&format!(
            "{{ start = 0.0, end = 1.0, {} }}, {{ start = 1.0, end = 0.5, translate = [0.1, 0.0, 0.0] }}",
            rot("[1.0, 0.0, 0.0]", "90.0")
        )),
        "pins[0].script.phases[1].end",
        "must be after start",
    );
    fails(
        "kf_axis0",
        &pin(&format!(
            "{{ start = 0.0, end = 1.0, {} }}",
            rot("[0.0, 0.0, 0.0]", "90.0")
        )),
        "pins[0].script.phases[0].rotate.axis",
        "non-zero direction",
    );
    fails(
        "kf_degrees_nan",
        &pin(&format!(
            "{{ start = 0.0, end = 1.0, {} }}",
            rot("[1.0, 0.0, 0.0]", "nan")
        )),
        "pins[0].script.phases[0].rotate.degrees",
        "finite",
    );
    fails(
        "kf_translate_inf",
        &pin("{ start = 0.0, end = 1.0, translate = [inf, 0.0, 0.0] }"),
        "pins[0].script.phases[0].translate",
        "finite",
    );
    fails(
        "kf_nothing",
        &pin("{ start = 0.0, end = 1.0 }"),
        "pins[0].script.phases[0]",
        "`rotate` and/or `translate`",
    );
    fails(
        "kf_unknown_key",
        &pin("{ start = 0.0, end = 1.0, spin = 3.0 }"),
        "pins[0].script.phases[0].spin",
        "unknown field",
    );
    fails(
        "kf_unknown_rotate_key",
        &pin("{ start = 0.0, end = 1.0, rotate = { center = [0.0, 0.0, 0.0], axis = [1.0, 0.0, 0.0], omega = 1.0 } }"),
        "pins[0].script.phases[0].rotate.omega",
        "unknown field",
    );
    // A zero axis is fine where nothing turns.
    Scene::parse(
        &scene_path("kf_axis0_still"),
        &pin(&format!(
            "{{ start = 0.0, end = 1.0, {}, translate = [0.1, 0.0, 0.0] }}",
            rot("[0.0, 0.0, 0.0]", "0.0")
        )),
    )
    .and_then(|s| s.build())
    .unwrap();
}

/// `transform.fit` as a table: the extent and the anchor are checked by key.
#[test]
fn fit_tables() {
    let t = |fit: &str| {
        edit(
            "material = {",
            &format!("transform = {{ fit = {fit} }}\nmaterial = {{"),
        )
    };
    let k = "objects[0].transform.fit";
    fails(
        "fit_t_zero",
        &t("{ extent = 0.0 }"),
        &format!("{k}.extent"),
        "> 0",
    );
    fails(
        "fit_t_nan",
        &t("{ extent = nan, anchor = \"min\" }"),
        &format!("{k}.extent"),
        "finite",
    );
    fails(
        "fit_t_tiny",
        &t("{ extent = 1e-300, anchor = \"min\" }"),
        &format!("{k}.extent"),
        "degenerate",
    );
    fails(
        "fit_t_anchor",
        &t("{ extent = 1.0, anchor = \"max\" }"),
        &format!("{k}.anchor"),
        "unknown variant",
    );
    fails(
        "fit_t_key",
        &t("{ extent = 1.0, centre = true }"),
        &format!("{k}.centre"),
        "unknown field",
    );
    fails("fit_t_missing", &t("{ anchor = \"min\" }"), k, "extent");
    fails(
        "fit_t_string",
        &t("\"big\""),
        k,
        "an extent in m or a table",
    );
}

/// Two pins selecting the same vertices: an error naming both pins, how many vertices they
/// share and one of them with its position, where the last pin used to win silently.
#[test]
fn overlapping_pins_name_both() {
    // pins[0] clamps x = 0, pins[1] the far end x = 1, pins[2] a slab around x = 0 again: it
    // shares the 2×2 = 4 vertices of the plane x = 0 with pins[0] (cells [4, 1, 1]).
    let text = plus(&format!(
        "[[pins]]\n{CLAMP}\n\n\
         [[pins]]\nregion = {{ box = {{ min = [0.99, -1.0, -1.0], max = [1.01, 1.0, 1.0] }} }}\n\n\
         [[pins]]\nregion = {{ slab = {{ normal = [1.0, 0.0, 0.0], offset = 0.0, thickness = 0.1 }} }}\n\
         script = {{ type = \"translate\", velocity = [0.0, 1.0, 0.0] }}\n"
    ));
    let e = fails(
        "pins_overlap",
        &text,
        "pins[2].region",
        "`pins[0]` and `pins[2]`",
    );
    assert!(e.contains("same 4 vertices"), "{e}");
    assert!(e.contains("at (0, "), "{e}");
    // Disjoint pins are fine.
    let ok = plus(&format!(
        "[[pins]]\n{CLAMP}\n\n\
         [[pins]]\nregion = {{ box = {{ min = [0.99, -1.0, -1.0], max = [1.01, 1.0, 1.0] }} }}\n"
    ));
    Scene::parse(&scene_path("pins_disjoint"), &ok)
        .and_then(|s| s.build())
        .unwrap();
}

#[test]
fn force_windows() {
    let force = |extra: &str| {
        plus(&format!(
            "[[forces]]\n{CLAMP}\nforce = [0.0, 1.0, 0.0]\n{extra}\n"
        ))
    };
    fails(
        "force_nan",
        &plus(&format!("[[forces]]\n{CLAMP}\nforce = [0.0, nan, 0.0]\n")),
        "forces[0].force",
        "finite",
    );
    fails(
        "force_start_nan",
        &force("start = nan"),
        "forces[0].start",
        "finite",
    );
    fails(
        "force_start_inf",
        &force("start = -inf"),
        "forces[0].start",
        "finite",
    );
    fails(
        "force_end_before",
        &force("start = 1.0\nend = 0.5"),
        "forces[0].end",
        "after start",
    );
    fails(
        "force_end_nan",
        &force("end = nan"),
        "forces[0].end",
        "after start",
    );
    // `end = inf` is the documented "never ends".
    Scene::parse(&scene_path("force_forever"), &force("end = inf"))
        .and_then(|s| s.build())
        .unwrap();
}

#[test]
fn obstacles() {
    let obs = |o: &str| plus(&format!("[[obstacles]]\n{o}\n"));
    fails(
        "ground_nan",
        &obs("type = \"ground\"\nheight = nan"),
        "obstacles[0].height",
        "finite",
    );
    fails(
        "ground_far",
        &obs("type = \"ground\"\nheight = -1e14"),
        "obstacles[0].height",
        "MAX_COORDINATE",
    );
    fails(
        "half_space_normal0",
        &obs("type = \"half_space\"\nnormal = [0.0, 0.0, 0.0]\noffset = -1.0"),
        "obstacles[0].normal",
        "non-zero direction",
    );
    fails(
        "half_space_offset_inf",
        &obs("type = \"half_space\"\nnormal = [0.0, 1.0, 0.0]\noffset = -inf"),
        "obstacles[0].offset",
        "finite",
    );
    fails(
        "obstacle_box_flat",
        &obs("type = \"box\"\nmin = [2.0, 0.0, 0.0]\nmax = [3.0, 0.0, 1.0]"),
        "obstacles[0].max",
        "exceed",
    );
    fails(
        "sphere_r0",
        &obs("type = \"sphere\"\ncenter = [3.0, 0.0, 0.0]\nradius = 0.0"),
        "obstacles[0].radius",
        "> 0",
    );
    fails(
        "sphere_center_nan",
        &obs("type = \"sphere\"\ncenter = [nan, 0.0, 0.0]\nradius = 1.0"),
        "obstacles[0].center",
        "finite",
    );
}

#[test]
fn contact_and_solver_values() {
    let k = "contact.dhat";
    fails("dhat0", &plus("[contact]\ndhat = 0.0\n"), k, "> 0");
    fails("dhat_nan", &plus("[contact]\ndhat = nan\n"), k, "finite");
    fails(
        "kappa_inf",
        &plus("[contact]\nkappa = inf\n"),
        "contact.kappa",
        "finite",
    );
    fails(
        "kappa_neg",
        &plus("[contact]\nkappa = -1.0\n"),
        "contact.kappa",
        "> 0",
    );
    fails(
        "tol_nan",
        &plus("[solver]\ntolerance = nan\n"),
        "solver.tolerance",
        "finite",
    );
    // Checked even when the stop rule in the scene does not use it.
    fails(
        "dx_tol_unused",
        &plus("[solver]\nstop = \"cn\"\ndx_tolerance = -1.0\n"),
        "solver.dx_tolerance",
        "> 0",
    );
}

/// The quasi-Newton keys: history m an integer in 0..=100, mode `rule` or `fixed`, and
/// `iterations` ≥ 1, only with `mode = "fixed"`.
#[test]
fn quasi_newton_options() {
    let qn = |extra: &str| plus(&format!("[solver]\nname = \"qn\"\n{extra}"));
    fails("m_neg", &qn("history = -1\n"), "solver.history", "-1");
    fails("m_frac", &qn("history = 2.5\n"), "solver.history", "2.5");
    fails("m_big", &qn("history = 101\n"), "solver.history", "0..=100");
    fails(
        "mode",
        &qn("mode = \"adaptive\"\n"),
        "solver.mode",
        "rule or fixed",
    );
    fails(
        "its0",
        &qn("mode = \"fixed\"\niterations = 0\n"),
        "solver.iterations",
        "≥ 1",
    );
    fails(
        "its_rule",
        &qn("iterations = 10\n"),
        "solver.iterations",
        "mode = \"fixed\"",
    );
    fails(
        "its_neg",
        &qn("mode = \"fixed\"\niterations = -3\n"),
        "solver.iterations",
        "-3",
    );
    // Valid: the defaults, m = 0, and the paper's mode.
    for ok in [
        "",
        "history = 0\n",
        "mode = \"fixed\"\n",
        "mode = \"rule\"\nhistory = 100\n",
    ] {
        let built = Scene::parse(&scene_path("qn_ok"), &qn(ok))
            .and_then(|s| s.build())
            .unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert_eq!(built.config.solver.name(), "qn");
    }
}

/// `[solver]` is one variant per solver: a key of another solver is refused naming the key
/// and the solvers that take it, an unknown key naming it, each on the key's own line.
#[test]
fn solver_keys_belong_to_their_solver() {
    let solver = |extra: &str| plus(&format!("[solver]\n{extra}"));
    // The key's line: BASE, a blank line, `[solver]`, `name`, then the key.
    let key_line = BASE.lines().count() + 4;
    for (name, text, key, needle) in [
        (
            "newton_variant",
            "name = \"newton\"\nvariant = \"gs\"\n",
            "variant",
            "jgs2, vbd",
        ),
        (
            "qn_safeguard",
            "name = \"qn\"\nsafeguard = \"cut\"\n",
            "safeguard",
            "jgs2, vbd",
        ),
        (
            "vbd_far",
            "name = \"vbd\"\nfar_order = 0\n",
            "far_order",
            "jgs2, multilevel",
        ),
        (
            "newton_prox",
            "name = \"newton\"\nprox = \"pd\"\n",
            "prox",
            "admm",
        ),
        (
            "admm_history",
            "name = \"admm\"\nhistory = 3\n",
            "history",
            "qn, dot, lbfgs-h",
        ),
        (
            "jgs2_mode",
            "name = \"jgs2\"\nmode = \"fixed\"\n",
            "mode",
            "qn, admm, dot, lbfgs-h",
        ),
        (
            "lbfgs_subdomains",
            "name = \"lbfgs-h\"\nsubdomains = 2\n",
            "subdomains",
            "dot",
        ),
    ] {
        let e = fails(name, &solver(text), &format!("solver.{key}"), needle);
        let solver_name = text.split('"').nth(1).unwrap();
        assert!(e.contains(&format!("not {solver_name}")), "{name}: {e}");
        assert!(
            e.contains(&format!(":{key_line}:")),
            "{name}: not on line {key_line}: {e}"
        );
    }
    let e = fails(
        "unknown_key",
        &solver("name = \"dot\"\nsubdomain = 2\n"),
        "solver.subdomain",
        "unknown field `subdomain`",
    );
    assert!(
        e.contains("subdomains") && e.contains(&format!(":{key_line}:")),
        "{e}"
    );
    // The default solver (newton) without a name line: the key is on line BASE + 3.
    let e = fails(
        "default_newton",
        &solver("history = 5\n"),
        "solver.history",
        "not newton",
    );
    assert!(e.contains(&format!(":{}:", key_line - 1)), "{e}");
}

/// Every string-valued `[solver]` key is a typed enum: a bad value is refused naming the key,
/// the value and the allowed values.
#[test]
fn solver_string_keys_list_their_values() {
    for (name, solver, key, value, allowed) in [
        ("stop", "newton", "stop", "dy", "cn or dx"),
        ("variant", "jgs2", "variant", "red-black", "jacobi or gs"),
        (
            "safeguard",
            "vbd",
            "safeguard",
            "never",
            "cut, always or off",
        ),
        (
            "filter",
            "dot",
            "eigen_filter",
            "projected",
            "clamp, abs or adaptive",
        ),
        ("mode", "admm", "mode", "adaptive", "rule or fixed"),
        ("prox", "admm", "prox", "proj", "hyperelastic or pd"),
        ("contact", "admm", "contact", "lcp", "uzawa or pgs"),
        (
            "lag",
            "multilevel",
            "lag_refresh",
            "never",
            "adaptive, iteration or step",
        ),
        (
            "smoother",
            "multilevel",
            "smoother",
            "ilu",
            "jacobi or jgs2",
        ),
        (
            "subspace_solve",
            "multilevel",
            "subspace_solve",
            "lu",
            "pcg or direct",
        ),
        (
            "line_search",
            "multilevel",
            "line_search",
            "gpu",
            "device or host",
        ),
    ] {
        let text = plus(&format!(
            "[solver]\nname = \"{solver}\"\n{key} = \"{value}\"\n"
        ));
        let e = fails(name, &text, &format!("solver.{key}"), allowed);
        assert!(e.contains(&format!("`{value}`")), "{name}: {e}");
    }
    // Values are exact (lower case); solver names ignore case, as `--solver` does.
    fails(
        "stop_case",
        &plus("[solver]\nstop = \"CN\"\n"),
        "solver.stop",
        "cn or dx",
    );
    let built = Scene::parse(
        &scene_path("name_case"),
        &plus("[solver]\nname = \"LBFGS-H\"\n"),
    )
    .and_then(|s| s.build())
    .unwrap();
    assert_eq!(built.config.solver, jello::scene::SolverKind::LbfgsH);
    fails(
        "name_type",
        &plus("[solver]\nname = 3\n"),
        "solver.name",
        "string",
    );
}

/// A UTF-8 byte-order mark before the scene text is accepted, like editors write it.
#[test]
fn byte_order_mark_is_accepted() {
    let text = format!("\u{feff}{BASE}");
    Scene::parse(&scene_path("bom"), &text)
        .and_then(|s| s.build())
        .unwrap();
    let p = scene_path("bom_file");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text.as_bytes()).unwrap();
    Scene::load(&p).and_then(|s| s.build()).unwrap();
}

/// Scene files that are not regular files are refused from their metadata before opening
/// (a FIFO would block the open, /dev/zero would never end), as is one above the size cap and
/// one that is not UTF-8 (its line named).
#[test]
fn special_and_oversized_scene_files() {
    let dir = scene_path("x").parent().unwrap().join("special");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let check = |p: &Path, needle: &str| {
        let e = Scene::load(p).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(e.contains(&*name) && e.contains(needle), "{e}");
    };
    let d = dir.join("a_dir.toml");
    std::fs::create_dir_all(&d).unwrap();
    check(&d, "a directory");
    let big = dir.join("big.toml");
    let f = std::fs::File::create(&big).unwrap();
    // Sparse: no 17 MiB written, and the reader must not read it to find out.
    f.set_len(jello::limits::MAX_SCENE_FILE_BYTES + 1).unwrap();
    check(&big, "cap");
    let bad = dir.join("latin1.toml");
    std::fs::write(&bad, b"[simulation]\nh = 0.01\n# caf\xe9\n").unwrap();
    check(&bad, "latin1.toml:3:");
    #[cfg(unix)]
    {
        let zero = dir.join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        check(&zero, "character device");
        let fifo = dir.join("fifo.toml");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
        {
            check(&fifo, "FIFO");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
