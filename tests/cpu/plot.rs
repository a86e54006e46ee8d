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

    /// Pixels in `x0..x1` × `y0..y1` (clamped to the image) that satisfy `f`.
    fn count(&self, x0: u32, x1: u32, y0: u32, y1: u32, f: impl Fn([u8; 3]) -> bool) -> usize {
        (y0..y1.min(self.height))
            .flat_map(|y| (x0..x1.min(self.width)).map(move |x| (x, y)))
            .filter(|&(x, y)| f(self.at(x, y)))
            .count()
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

/// Dark grey or black: text and frame ink, never a series colour or the grid.
fn dark(p: [u8; 3]) -> bool {
    p.iter().all(|&c| c < 110)
}

/// An antialiased edge of dark text: grey, strictly between ink and background.
fn grey_edge(p: [u8; 3]) -> bool {
    let (lo, hi) = (*p.iter().min().unwrap(), *p.iter().max().unwrap());
    hi - lo <= 12 && (60..=215).contains(&lo)
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

/// Columns strictly inside the frame that hold `color`, with the mean row of its pixels there.
fn column_centres(img: &Decoded, area: PlotArea, color: [u8; 3]) -> Vec<(f64, f64)> {
    (area.left + 1..area.right)
        .filter_map(|x| {
            let (row, n) = mean_row(img, area, color, x, x + 1);
            (n > 0).then_some((x as f64, row))
        })
        .collect()
}

/// Least-squares line `row = a + b·col` through `pts`, and the largest distance of a point
/// from it in rows.
fn fit_line(pts: &[(f64, f64)]) -> (f64, f64, f64) {
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let b = sxy / sxx;
    let a = my - b * mx;
    let worst = pts
        .iter()
        .map(|p| (p.1 - (a + b * p.0)).abs())
        .fold(0.0, f64::max);
    (a, b, worst)
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
        y_label: "residual [N]",
        log_y: true,
        width: 720,
        height: 450,
        hlines: &hlines,
        x_categories: &[],
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
    // The frame holds most of the image, and is drawn on the rows and columns it names.
    assert!((area.right - area.left) as f64 > 0.5 * img.width as f64);
    assert!((area.bottom - area.top) as f64 > 0.5 * img.height as f64);
    for x in area.left..=area.right {
        assert!(
            dark(img.at(x, area.top)) && dark(img.at(x, area.bottom)),
            "frame at x={x}"
        );
    }

    let white = img.rgb.iter().filter(|p| **p == [255, 255, 255]).count();
    assert!(
        white as f64 > 0.6 * img.rgb.len() as f64,
        "background mostly white: {white} of {}",
        img.rgb.len()
    );

    // Each curve is drawn inside the frame in its own colour, and appears in the legend
    // (right of the frame).
    for (i, s) in series.iter().enumerate() {
        let c = series_color(i);
        let inside = count_color(&img, area, c);
        // A 2-pixel line across at least a fifth of the frame width.
        assert!(
            inside as u32 > (area.right - area.left) / 5,
            "{}: {inside} pixels of {c:?} inside the frame",
            s.name
        );
        let in_legend = img.count(area.right + 1, img.width, area.top, area.bottom, |p| p == c);
        assert!(in_legend > 20, "{}: legend swatch {in_legend} px", s.name);
    }
    assert_ne!(series_color(0), series_color(1));

    // Decreasing residuals on a log axis: the curve goes down (larger rows) left to right.
    for (i, s) in series.iter().enumerate() {
        let cols = column_centres(&img, area, series_color(i));
        let (_, slope, _) = fit_line(&cols);
        assert!(
            slope > 0.0,
            "{}: rows grow to the right, slope {slope}",
            s.name
        );
    }
    // Series 0 spans fewer iterations, so it ends left of series 1.
    let last_col = |c: [u8; 3]| column_centres(&img, area, c).last().unwrap().0;
    assert!(last_col(series_color(0)) + 50.0 < last_col(series_color(1)));
}

/// On a log axis a geometric sequence is a straight line, and its slope is proportional to
/// log(rate): rate 0.01 falls twice as steeply as rate 0.1.
#[test]
fn geometric_sequences_are_straight_lines_on_a_log_axis() {
    let spec = PlotSpec {
        title: "geometric",
        x_label: "iteration",
        y_label: "residual",
        width: 800,
        height: 500,
        ..PlotSpec::default()
    };
    // 40 samples: long enough that no markers are drawn, only the line. Each is drawn alone
    // (so neither covers the other where they start together) on the same axes: both start at
    // 1 and span more than 16 decades, so both axes run from 1 down to the 16-decade clamp.
    let mut slopes = Vec::new();
    let mut frames = Vec::new();
    for rate in [0.1, 0.01] {
        // One name for both, so the legend column and hence the frame are the same.
        let series = [Series::new("rate^k", decreasing(40, 1.0, rate))];
        let raster = render_image(&spec, &series).unwrap();
        let img = decode(&raster.to_png().unwrap());
        let cols = column_centres(&img, raster.area, series_color(0));
        assert!(cols.len() > 50, "{rate}: {} columns", cols.len());
        // The line's two ends cover part of a column each, which shifts that column's centre
        // by up to half the slope: fit the interior.
        let (_, slope, worst) = fit_line(&cols[3..cols.len() - 3]);
        println!("rate {rate}: slope {slope:.3} rows/column, worst {worst:.2} px");
        assert!(worst < 3.0, "{rate}: {worst} px off the fitted line");
        assert!(slope > 0.0);
        slopes.push(slope);
        frames.push(raster.area);
    }
    assert_eq!(frames[0], frames[1], "same axes");
    // The curves are cut at the bottom of the axis, which does not change their slopes.
    let ratio = slopes[1] / slopes[0];
    println!("slope ratio {ratio:.4}");
    assert!((ratio - 2.0).abs() < 0.05, "slope ratio {ratio}");

    // On a linear axis the same decay is not a straight line: it bends.
    let lin = PlotSpec {
        log_y: false,
        ..spec
    };
    let one = [Series::new("0.9^k", decreasing(40, 1.0, 0.9))];
    let raster = render_image(&lin, &one).unwrap();
    let img = decode(&raster.to_png().unwrap());
    let (_, _, worst) = fit_line(&column_centres(&img, raster.area, series_color(0)));
    println!("linear-axis decay: worst {worst:.1} px off a line");
    assert!(worst > 15.0, "a linear-axis decay bends: {worst} px");
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
    let raster = render_image(&spec, &series).unwrap();
    let img = decode(&raster.to_png().unwrap());
    assert_eq!((img.width, img.height), (400, 300));
    let area = raster.area;
    let cols = column_centres(&img, area, series_color(0));
    let (_, slope, worst) = fit_line(&cols);
    assert!(
        slope < 0.0,
        "rows shrink to the right (the line rises): {slope}"
    );
    // Markers (30 samples) sit centred on the line; allow for their radius.
    assert!(worst < 4.0, "{worst} px off the line");
    let rise = -slope * (cols.last().unwrap().0 - cols[0].0);
    assert!(rise > 0.7 * (area.bottom - area.top) as f64, "rise {rise}");
}

/// The title, axis labels and legend names are drawn as dark, antialiased text in their
/// places: compare a plot with them against the same plot without.
#[test]
fn title_labels_and_legend_are_antialiased_text() {
    let series = [Series::new("newton", decreasing(20, 1.0, 0.3))];
    let bare = PlotSpec {
        title: "",
        x_label: "",
        y_label: "",
        ..PlotSpec::default()
    };
    let full = PlotSpec {
        title: "Residual versus iteration",
        x_label: "iteration",
        y_label: "residual [N]",
        ..bare
    };
    let r_full = render_image(&full, &series).unwrap();
    let r_bare = render_image(&bare, &series).unwrap();
    let (img, plain) = (
        decode(&r_full.to_png().unwrap()),
        decode(&r_bare.to_png().unwrap()),
    );
    let (a, b) = (r_full.area, r_bare.area);
    let (w, h) = (img.width, img.height);

    // Title: dark ink above the frame, centred, with grey antialiased edges; none without.
    let title_dark = img.count(w / 4, 3 * w / 4, 0, a.top, dark);
    let title_grey = img.count(w / 4, 3 * w / 4, 0, a.top, grey_edge);
    println!("title: {title_dark} dark, {title_grey} grey px");
    assert!(title_dark > 150, "title ink {title_dark} px");
    assert!(title_grey > 50, "title antialiasing {title_grey} px");
    assert_eq!(
        plain.count(0, w, 0, b.top, dark),
        0,
        "no title, no ink above"
    );
    // The title takes room: the frame starts lower.
    assert!(a.top > b.top);

    // x label: below the tick labels; the labelled frame is shorter to make room for it.
    assert!(a.bottom < b.bottom);
    let below = |im: &Decoded, ar: PlotArea| im.count(ar.left, ar.right, ar.bottom + 1, h, dark);
    assert!(below(&img, a) > below(&plain, b) + 80, "x label ink");
    // y label: left of the tick labels; the labelled frame starts further right.
    assert!(a.left > b.left);
    let beside = |im: &Decoded, ar: PlotArea| im.count(0, ar.left, ar.top, ar.bottom, dark);
    assert!(beside(&img, a) > beside(&plain, b) + 80, "y label ink");

    // Legend: the swatch in the series colour, and dark text to its right.
    let c = series_color(0);
    let swatch: Vec<u32> = (a.right + 1..w)
        .filter(|&x| (a.top..a.bottom).any(|y| img.at(x, y) == c))
        .collect();
    assert!(!swatch.is_empty(), "legend swatch");
    let text_x0 = swatch.last().unwrap() + 1;
    let legend_dark = img.count(text_x0, w, a.top, a.top + 60, dark);
    let legend_grey = img.count(text_x0, w, a.top, a.top + 60, grey_edge);
    assert!(
        legend_dark > 60 && legend_grey > 20,
        "legend text {legend_dark}/{legend_grey}"
    );
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
    let area = raster.area;
    assert!(count_color(&img, area, series_color(0)) > 0);
    assert_eq!(count_color(&img, area, series_color(1)), 0);
    // The gap: no curve pixels in the middle of the x range (points 2..=5 are not drawable).
    // Points 0 and 7 lie inside the frame; interpolate their columns from the drawn extent.
    let cols = column_centres(&img, area, series_color(0));
    let (first, last) = (cols[0].0, cols.last().unwrap().0);
    let x_of = |k: f64| (first + (last - first) * k / 7.0).round() as u32;
    let (_, n) = mean_row(&img, area, series_color(0), x_of(2.5), x_of(4.5));
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
        vec![Series::new("zero", vec![0.0; 10])],
        vec![Series::new("tiny", vec![f64::MIN_POSITIVE, 5e-324, 1e-300])],
        vec![Series::new(
            "huge range",
            vec![f64::MAX, 1.0, 1e-300, 5e-324],
        )],
        vec![Series::new(
            "a very long series name that cannot possibly fit into the legend column",
            vec![1.0, 0.5],
        )],
        vec![Series::new("ünïcödé ≤ ∞ 残差", vec![1.0, 0.5])],
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

    // A single point is still visible (as a marker).
    let one = [Series::new("one point", vec![1e-3])];
    let raster = render_image(&spec, &one).unwrap();
    let img = decode(&raster.to_png().unwrap());
    assert!(count_color(&img, raster.area, series_color(0)) > 4);

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
        x_categories: &[],
        ..spec
    };
    assert!(render_plot(&spec_h, &one).is_ok());

    // A linear axis whose range overflows f64 is an error, not a panic or a blank picture;
    // the same data on a log axis is fine.
    let overflow = [Series::new("±max", vec![-f64::MAX, f64::MAX])];
    let lin = PlotSpec {
        log_y: false,
        ..spec
    };
    let err = render_plot(&lin, &overflow).unwrap_err();
    assert!(matches!(err, jello::JelloError::Invalid(_)), "{err}");
    assert!(err.to_string().contains("log_y"), "{err}");
    assert!(render_plot(&spec, &overflow).is_ok());
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
        y_label: "relative residual (dimensionless)",
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
        x_categories: &[],
        ..spec
    };
    let y: Vec<f64> = (0..25).map(|k| (0.8f64).powi(k)).collect();
    let small_path = path.with_file_name(format!(
        "{}_small.png",
        path.file_stem().unwrap().to_string_lossy()
    ));
    write_plot(&small_path, &small, &[Series::new("0.8^k", y)]).unwrap();
}

/// A categorical x axis puts sample i at the centre of slot i of n equal slots, labels each
/// slot with its name (text under the axis that changes with the names) and draws nothing past
/// the last category (nor lets it stretch the y range).
#[test]
fn categorical_x_axis_centres_samples_in_named_slots() {
    let cats = ["drag", "twist", "spin"];
    let spec = PlotSpec {
        log_y: false,
        width: 600,
        height: 400,
        x_categories: &cats,
        ..PlotSpec::default()
    };
    // Two samples past the categories; 100 would dominate the y range if it were drawn.
    let series = [Series::new("ratio", vec![1.0, 2.0, 3.0, 100.0, 100.0])];
    let raster = render_image(&spec, &series).unwrap();
    let img = decode(&raster.to_png().unwrap());
    let area = raster.area;
    let cols = column_centres(&img, area, series_color(0));
    assert!(!cols.is_empty(), "no curve drawn");
    let slot = (area.right - area.left) as f64 / 3.0;
    let (first, last) = (cols[0].0, cols.last().unwrap().0);
    // Marker radius 3 px at this size (see `render_image`), plus a pixel of antialiasing.
    let centre = |i: f64| area.left as f64 + (i + 0.5) * slot;
    assert!(
        (first - centre(0.0)).abs() <= 5.0,
        "first sample at column {first}, slot centre {}",
        centre(0.0)
    );
    assert!(
        (last - centre(2.0)).abs() <= 5.0,
        "last sample at column {last}, slot centre {}",
        centre(2.0)
    );
    // y = 3 is the top of the drawn data: it sits in the upper tenth of the frame, which it
    // would not if 100 counted towards the range.
    let top_row = cols.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
    let height = (area.bottom - area.top) as f64;
    assert!(
        top_row < area.top as f64 + 0.1 * height,
        "top of the curve at row {top_row}"
    );
    // The slot names are drawn under the axis: other names give other pixels there.
    let other = ["a", "b", "c"];
    let raster2 = render_image(
        &PlotSpec {
            x_categories: &other,
            ..spec
        },
        &series,
    )
    .unwrap();
    let below = |r: &jello::output::plot::PlotImage| {
        (area.bottom + 3..r.height.min(area.bottom + 40))
            .flat_map(|y| (area.left..area.right).map(move |x| (x, y)))
            .filter(|&(x, y)| dark(r.pixel(x, y)))
            .count()
    };
    let (n1, n2) = (below(&raster), below(&raster2));
    assert!(
        n1 > n2 && n2 > 0,
        "dark label pixels under the axis: {n1} (long names) vs {n2}"
    );
}
