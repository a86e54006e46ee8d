//! PNG line plots: decode what `render_plot` writes and check the picture, not just that it
//! did not fail.

use jello::output::plot::{
    render_image, render_plot, series_color, write_plot, PlotArea, PlotSpec, Series,
};

/// A decoded 8-bit image as RGB triples.
struct Decoded {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Decoded {
    fn at(&self, x: u32, y: u32) -> [u8; 3] {
        self.rgb[(y * self.width + x) as usize]
    }
}

fn decode(bytes: &[u8]) -> Decoded {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    let rgb = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    Decoded {
        width: info.width,
        height: info.height,
        rgb,
    }
}

/// Mean row of the pixels of `color` in columns `x0..x1` strictly inside the frame, and their
/// count.
fn mean_row(img: &Decoded, area: PlotArea, color: [u8; 3], x0: u32, x1: u32) -> (f64, usize) {
    let (mut sum, mut n) = (0.0, 0usize);
    for y in area.top + 1..area.bottom {
        for x in x0.max(area.left + 1)..x1.min(area.right) {
            if img.at(x, y) == color {
                sum += y as f64;
                n += 1;
            }
        }
    }
    (if n > 0 { sum / n as f64 } else { f64::NAN }, n)
}

fn count_color(img: &Decoded, area: PlotArea, color: [u8; 3]) -> usize {
    mean_row(img, area, color, area.left + 1, area.right).1
}

/// A Newton-like residual history: geometric decrease over `n` iterations.
fn decreasing(n: usize, start: f64, rate: f64) -> Vec<f64> {
    (0..n).map(|k| start * rate.powi(k as i32)).collect()
}

#[test]
fn two_series_on_a_log_axis() {
    let hlines = [(1e-8, "tol 1e-8")];
    let spec = PlotSpec {
        title: "Residual versus iteration",
        x_label: "iteration",
        y_label: "residual",
        log_y: true,
        width: 720,
        height: 450,
        hlines: &hlines,
    };
    let series = [
        Series::new("newton", decreasing(12, 1.0, 0.1)),
        Series::new("jgs2", decreasing(40, 3.0, 0.6)),
    ];
    let bytes = render_plot(&spec, &series).unwrap();
    let img = decode(&bytes);
    assert_eq!((img.width, img.height), (spec.width, spec.height));

    // Same input, same pixels: the raster the PNG was encoded from tells where the frame is.
    let raster = render_image(&spec, &series).unwrap();
    assert_eq!((raster.width, raster.height), (img.width, img.height));
    for (k, p) in img.rgb.iter().enumerate() {
        let (x, y) = (k as u32 % img.width, k as u32 / img.width);
        assert_eq!(*p, raster.pixel(x, y), "pixel ({x}, {y})");
    }
    let area = raster.area;
    assert!(area.left < area.right && area.right < img.width);
    assert!(area.top < area.bottom && area.bottom < img.height);
    // The frame holds most of the image.
    assert!((area.right - area.left) as f64 > 0.5 * img.width as f64);
    assert!((area.bottom - area.top) as f64 > 0.5 * img.height as f64);

    let white = img.rgb.iter().filter(|p| **p == [255, 255, 255]).count();
    assert!(
        white as f64 > 0.7 * img.rgb.len() as f64,
        "background mostly white: {white} of {}",
        img.rgb.len()
    );
    // Something besides white was drawn outside the frame (ticks, labels, title, legend).
    let outside_ink = (0..img.height)
        .flat_map(|y| (0..img.width).map(move |x| (x, y)))
        .filter(|&(x, y)| x < area.left || x > area.right || y < area.top || y > area.bottom)
        .filter(|&(x, y)| img.at(x, y) != [255, 255, 255])
        .count();
    assert!(outside_ink > 500, "labels drawn: {outside_ink} pixels");

    // Each curve is drawn inside the frame in its own colour, and appears in the legend
    // (right of the frame).
    for (i, s) in series.iter().enumerate() {
        let c = series_color(i);
        let inside = count_color(&img, area, c);
        // A 2-pixel line across at least a third of the frame width.
        assert!(
            inside as u32 > (area.right - area.left) / 3,
            "{}: {inside} pixels of {c:?} inside the frame",
            s.name
        );
        let in_legend = (area.top..area.bottom)
            .flat_map(|y| (area.right + 1..img.width).map(move |x| (x, y)))
            .filter(|&(x, y)| img.at(x, y) == c)
            .count();
        assert!(in_legend > 0, "{}: legend swatch", s.name);
    }
    assert_ne!(series_color(0), series_color(1));

    // Decreasing residuals on a log axis: the curve goes down (larger rows) left to right.
    // Series 0 has 12 points, spanning the left part of the 40-iteration x axis; compare
    // within its own horizontal extent.
    for (i, s) in series.iter().enumerate() {
        let c = series_color(i);
        let cols: Vec<u32> = (area.left + 1..area.right)
            .filter(|&x| (area.top + 1..area.bottom).any(|y| img.at(x, y) == c))
            .collect();
        let (x0, x1) = (cols[0], *cols.last().unwrap() + 1);
        let third = (x1 - x0) / 3;
        let (left_row, nl) = mean_row(&img, area, c, x0, x0 + third);
        let (right_row, nr) = mean_row(&img, area, c, x1 - third, x1);
        assert!(nl > 0 && nr > 0);
        assert!(
            right_row > left_row + 0.2 * (area.bottom - area.top) as f64,
            "{}: mean row {left_row} (left third) vs {right_row} (right third)",
            s.name
        );
    }
    // Series 0 spans fewer iterations, so it ends left of series 1.
    let last_col = |c: [u8; 3]| {
        (area.left + 1..area.right)
            .rev()
            .find(|&x| (area.top + 1..area.bottom).any(|y| img.at(x, y) == c))
            .unwrap()
    };
    assert!(last_col(series_color(0)) + 50 < last_col(series_color(1)));
}

#[test]
fn linear_axis_increasing_curve_goes_up() {
    let spec = PlotSpec {
        log_y: false,
        width: 400,
        height: 300,
        ..PlotSpec::default()
    };
    let y: Vec<f64> = (0..30).map(|k| -5.0 + 0.5 * k as f64).collect();
    let series = [Series::new("ramp", y)];
    let img = decode(&render_plot(&spec, &series).unwrap());
    assert_eq!((img.width, img.height), (400, 300));
    let area = render_image(&spec, &series).unwrap().area;
    let c = series_color(0);
    let w = area.right - area.left;
    let (l, nl) = mean_row(&img, area, c, area.left, area.left + w / 3);
    let (r, nr) = mean_row(&img, area, c, area.right - w / 3, area.right);
    assert!(nl > 0 && nr > 0);
    assert!(l > r + 0.3 * (area.bottom - area.top) as f64, "{l} vs {r}");
}

#[test]
fn invalid_points_break_the_line_but_do_not_panic() {
    let spec = PlotSpec {
        width: 400,
        height: 300,
        ..PlotSpec::default()
    };
    let y = vec![1.0, 0.1, f64::NAN, 0.0, -1.0, f64::INFINITY, 1e-3, 1e-4];
    let series = [
        Series::new("gappy", y),
        Series::new("nothing drawable", vec![0.0, -2.0, f64::NAN]),
    ];
    let raster = render_image(&spec, &series).unwrap();
    let img = decode(&raster.to_png().unwrap());
    assert!(count_color(&img, raster.area, series_color(0)) > 0);
    assert_eq!(count_color(&img, raster.area, series_color(1)), 0);
    // The gap: no curve pixels in the middle of the x range (points 2..=5 are not drawable).
    let x_of = |k: f64| {
        let a = raster.area;
        // Points 0 and 7 lie inside the frame; interpolate their columns from the drawn extent.
        let cols: Vec<u32> = (a.left + 1..a.right)
            .filter(|&x| (a.top + 1..a.bottom).any(|y| img.at(x, y) == series_color(0)))
            .collect();
        let (first, last) = (cols[0] as f64, *cols.last().unwrap() as f64);
        (first + (last - first) * k / 7.0).round() as u32
    };
    let (gap0, gap1) = (x_of(2.5), x_of(4.5));
    let area = raster.area;
    let (_, n) = mean_row(&img, area, series_color(0), gap0, gap1);
    assert_eq!(n, 0, "no line across the invalid points");
}

#[test]
fn degenerate_inputs_give_an_image_or_an_error() {
    let spec = PlotSpec {
        title: "degenerate",
        width: 320,
        height: 200,
        ..PlotSpec::default()
    };
    let cases: Vec<Vec<Series>> = vec![
        vec![],
        vec![Series::new("empty", vec![])],
        vec![Series::new("one point", vec![1e-3])],
        vec![Series::new("flat", vec![2.5; 10])],
        vec![Series::new("tiny", vec![f64::MIN_POSITIVE, 5e-324, 1e-300])],
        vec![Series::new(
            "huge range",
            vec![f64::MAX, 1.0, 1e-300, 5e-324],
        )],
        vec![Series::new(
            "a very long series name that cannot possibly fit into the legend column",
            vec![1.0, 0.5],
        )],
        (0..25)
            .map(|i| Series::new(format!("s{i}"), decreasing(5, 1.0 + i as f64, 0.5)))
            .collect(),
    ];
    for log_y in [true, false] {
        for series in &cases {
            let spec = PlotSpec { log_y, ..spec };
            let img = decode(&render_plot(&spec, series).unwrap());
            assert_eq!((img.width, img.height), (spec.width, spec.height));
        }
    }

    // A single point is still visible.
    let one = [Series::new("one point", vec![1e-3])];
    let raster = render_image(&spec, &one).unwrap();
    let img = decode(&raster.to_png().unwrap());
    assert!(count_color(&img, raster.area, series_color(0)) > 0);

    // A huge dynamic range is clamped: the decades are still readable, and the large values
    // are drawn.
    let huge = [Series::new("huge", vec![1e300, 1e200, 1e-300])];
    let raster = render_image(&spec, &huge).unwrap();
    let img = decode(&raster.to_png().unwrap());
    assert!(count_color(&img, raster.area, series_color(0)) > 0);

    // Non-finite reference lines are ignored.
    let hlines = [
        (f64::NAN, "nan"),
        (-1.0, "negative"),
        (f64::INFINITY, "inf"),
    ];
    let spec_h = PlotSpec {
        hlines: &hlines,
        ..spec
    };
    assert!(render_plot(&spec_h, &one).is_ok());
}

#[test]
fn too_small_or_too_large_is_an_error() {
    let series = [Series::new("a", vec![1.0, 0.1])];
    for (width, height) in [(0, 0), (0, 300), (400, 0), (20, 20), (100, 300), (400, 60)] {
        let spec = PlotSpec {
            width,
            height,
            ..PlotSpec::default()
        };
        let err = render_plot(&spec, &series).unwrap_err();
        assert!(matches!(err, jello::JelloError::Invalid(_)), "{err}");
    }
    let spec = PlotSpec {
        width: 100_000,
        height: 100_000,
        ..PlotSpec::default()
    };
    assert!(render_plot(&spec, &series).is_err());
}

#[test]
fn write_plot_writes_a_decodable_png() {
    let dir = std::env::temp_dir().join(format!("jello-plot-test-{}", std::process::id()));
    let path = dir.join("sub").join("plot.png");
    let spec = PlotSpec {
        title: "write",
        width: 300,
        height: 200,
        ..PlotSpec::default()
    };
    let series = [Series::new("a", decreasing(10, 1.0, 0.3))];
    write_plot(&path, &spec, &series).unwrap();
    let img = decode(&std::fs::read(&path).unwrap());
    assert_eq!((img.width, img.height), (300, 200));
    // No temporary file left beside it.
    let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(leftovers, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Writes a sample to `$JELLO_PLOT_SAMPLE` (e.g. /tmp/plot_sample.png) for a human to look at,
/// and a small linear-axis one beside it (`..._small.png`).
#[test]
fn sample_for_inspection() {
    let Some(path) = std::env::var_os("JELLO_PLOT_SAMPLE") else {
        return;
    };
    let hlines = [(1e-10, "tolerance 1e-10")];
    let spec = PlotSpec {
        title: "Cantilever, step 1: residual versus iteration",
        x_label: "iteration",
        y_label: "relative residual",
        hlines: &hlines,
        ..PlotSpec::default()
    };
    let mut pcg = decreasing(60, 0.8, 0.68);
    pcg[17] = f64::NAN;
    let series = [
        Series::new(
            "newton (reference)",
            vec![1.0, 0.2, 1e-2, 4e-5, 3e-10, 1e-14],
        ),
        Series::new("jgs2", decreasing(40, 1.0, 0.55)),
        Series::new("pcg", pcg),
        Series::new("jacobi", decreasing(80, 1.5, 0.85)),
        Series::new("one point", vec![1e-3]),
    ];
    let path = std::path::PathBuf::from(path);
    write_plot(&path, &spec, &series).unwrap();
    let small = PlotSpec {
        log_y: false,
        width: 320,
        height: 200,
        hlines: &[(0.25, "quarter")],
        ..spec
    };
    let y: Vec<f64> = (0..25).map(|k| (0.8f64).powi(k)).collect();
    let small_path = path.with_file_name(format!(
        "{}_small.png",
        path.file_stem().unwrap().to_string_lossy()
    ));
    write_plot(&small_path, &small, &[Series::new("0.8^k", y)]).unwrap();
}
