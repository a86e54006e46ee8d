//! `jello run --png` end to end: PNG frames are written on the software adapter, are not blank,
//! and show the body where the simulation put it (the ball's final centre projects onto a body
//! pixel; the ball moved down the image between the first and the last frame). A GPU test: it
//! FAILS when no adapter is found unless JELLO_SKIP_GPU_TESTS=1.

use jello::gpu::Backend;
use jello::output::FramePainter;
use jello::runner::{run, RunOptions};
use jello::scene::Scene;
use std::path::Path;

fn body_like(p: [u8; 4]) -> bool {
    // The default body colour is a saturated orange; background and ground are greys.
    p[0] as i32 - p[2] as i32 > 60
}

#[test]
fn run_png_frames_show_the_body_where_it_is() {
    if jello::gpu::Device::new(Backend::Gpu).is_err() {
        if std::env::var("JELLO_SKIP_GPU_TESTS").as_deref() == Ok("1") {
            eprintln!("skipping GPU test: no adapter");
            return;
        }
        panic!("no GPU adapter; set JELLO_SKIP_GPU_TESTS=1 to skip GPU tests");
    }
    let scene_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let mut built = Scene::load(&scene_path).unwrap().build().unwrap();
    built.config.steps = 12;
    built.config.output.every = 12;
    built.config.output.png = true;
    built.config.output.png_size = [320, 240];
    let painter = FramePainter::new(&built.model, (320, 240), true).unwrap();
    assert!(painter.on_gpu(), "the frame painter must use the adapter");
    let out = std::env::temp_dir().join(format!("jello-run-png-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let opts = RunOptions {
        out_dir: Some(out.clone()),
        trace: false,
        // The run itself on the adapter too (`auto` never picks a software one).
        backend: Backend::Gpu,
        ..Default::default()
    };
    let (sim, _) = run(&scene_path, built, &opts, |_, _| {}).unwrap();
    let read = |name: &str| {
        let file = std::fs::File::open(out.join("frames").join(name)).unwrap();
        let mut dec = png::Decoder::new(std::io::BufReader::new(file))
            .read_info()
            .unwrap();
        let mut buf = vec![0; dec.output_buffer_size().unwrap()];
        let info = dec.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (320, 240));
        (buf, info.width)
    };
    let centroid_px = |buf: &[u8], w: u32| {
        let (mut sx, mut sy, mut n) = (0.0f64, 0.0f64, 0.0f64);
        for (i, p) in buf.chunks_exact(4).enumerate() {
            if body_like([p[0], p[1], p[2], p[3]]) {
                sx += (i as u32 % w) as f64;
                sy += (i as u32 / w) as f64;
                n += 1.0;
            }
        }
        (sx / n.max(1.0), sy / n.max(1.0), n)
    };
    let (first, w) = read("frame_00000.png");
    let (last, _) = read("frame_00012.png");
    let (_, y0, n0) = centroid_px(&first, w);
    let (_, y1, n1) = centroid_px(&last, w);
    assert!(
        n0 > 200.0 && n1 > 200.0,
        "frames must show the body ({n0}, {n1} body pixels)"
    );
    assert!(
        y1 > y0 + 2.0,
        "the falling ball must move down the image: {y0} → {y1}"
    );
    // The simulated centre of mass, projected with the run's camera, lands on a body pixel.
    let x = &sim.state.x;
    let n = x.len() / 3;
    let c: [f32; 3] =
        std::array::from_fn(|k| (x.iter().skip(k).step_by(3).sum::<f64>() / n as f64) as f32);
    let [px, py, _] = painter
        .camera()
        .project_to_pixel(c, 320, 240)
        .expect("centre in view");
    let i = 4 * (py as usize * 320 + px as usize);
    assert!(
        body_like([last[i], last[i + 1], last[i + 2], 255]),
        "pixel at the projected centre is not the body"
    );
    let _ = std::fs::remove_dir_all(&out);
}
