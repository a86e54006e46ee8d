//! What a bench prints is what it publishes: every line a bench writes with [`out!`] goes to
//! stdout and into one markdown document, which [`finish`] writes with a provenance line
//! (machine, date, commit; taken when the bench printed its first line) as `NAME.md`, and its
//! markdown tables parsed into `NAME.json`, under
//! `target/bench-out/` (`JELLO_BENCH_OUT` overrides the folder). With `JELLO_BENCH_BOOK=1` the
//! markdown also goes to `docs/src/benchmarks/generated/NAME.md`, the file the book's page
//! includes — so no figure reaches the book by hand, and a page always says where its figures
//! were measured.
//!
//! Included by each bench as `#[path = "common/report.rs"] #[macro_use] mod report;`.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The document so far (one per bench process).
static DOC: Mutex<String> = Mutex::new(String::new());

/// The provenance line, taken when the bench prints its first line: the commit and settings
/// the running binary was started from, not those of the tree when it finishes (a long run can
/// outlast commits made meanwhile).
static START: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Prints one line to stdout and appends it to the bench's markdown document.
macro_rules! out {
    () => {
        $crate::report::line(String::new())
    };
    ($($arg:tt)*) => {
        $crate::report::line(format!($($arg)*))
    };
}

/// Prints `s` and appends it (with a newline) to the document.
pub fn line(s: String) {
    START.get_or_init(provenance);
    println!("{s}");
    let mut doc = DOC.lock().unwrap_or_else(|e| e.into_inner());
    doc.push_str(&s);
    doc.push('\n');
}

/// One line saying where the figures come from: CPU model and count, memory, UTC date, commit
/// (with `+dirty` when files outside `docs/` have uncommitted changes), the build profile, and
/// the `JELLO_*` settings of the run.
pub fn provenance() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(String::from("?"), |kb| format!("{:.0}", kb / 1048576.0));
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Uncommitted edits outside docs/ (the book's pages do not change what is measured).
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":!docs",
    ])
    .is_some_and(|s| !s.is_empty());
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    // The bench's own knobs, so a page says which run it shows (the output switches are not
    // part of the run).
    let mut settings: Vec<String> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("JELLO_") && !matches!(k.as_str(), "JELLO_BENCH_BOOK" | "JELLO_BENCH_OUT")
        })
        .map(|(k, v)| format!("`{k}={v}`"))
        .collect();
    settings.sort();
    format!(
        "_Measured {} UTC on {cores} × {cpu}, {mem_gib} GiB; commit {commit}{}; {profile} build{}._",
        utc_now(),
        if dirty { "+dirty" } else { "" },
        if settings.is_empty() {
            String::new()
        } else {
            format!("; settings {}", settings.join(" "))
        }
    )
}

/// The current UTC time as `YYYY-MM-DD HH:MM`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The markdown tables of `md` as JSON: `[{"heading", "columns", "rows"}]`, each table with the
/// nearest heading or text line above it; cells stay strings, as printed.
pub fn tables_json(md: &str) -> serde_json::Value {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut tables = Vec::new();
    let mut heading = String::new();
    let mut lines = md.lines().peekable();
    while let Some(l) = lines.next() {
        let t = l.trim();
        if t.starts_with('|') {
            let columns = cells(t);
            let mut rows = Vec::new();
            while let Some(next) = lines.peek() {
                let n = next.trim();
                if !n.starts_with('|') {
                    break;
                }
                let row = cells(n);
                if !row
                    .iter()
                    .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':')))
                {
                    rows.push(row);
                }
                lines.next();
            }
            tables.push(serde_json::json!({
                "heading": heading, "columns": columns, "rows": rows,
            }));
        } else if !t.is_empty() {
            heading = t.trim_start_matches('#').trim().to_string();
        }
    }
    serde_json::Value::Array(tables)
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Writes the document as `NAME.md` (provenance line first) and its tables as `NAME.json`
/// under `JELLO_BENCH_OUT` (default `target/bench-out`), and into the book with
/// `JELLO_BENCH_BOOK=1`. Exits non-zero, naming the file, when a write fails.
pub fn finish(name: &str) {
    finish_to(name, None, serde_json::Value::Null);
}

/// [`finish`] into `dir` when given (else as [`finish`]), with the bench's own structured
/// results as the JSON's `data`.
pub fn finish_to(name: &str, dir: Option<&Path>, data: serde_json::Value) {
    write_doc(&name.replace('-', "_"), name, dir, data);
}

/// [`finish`] for a bench (`benches/BENCH.rs`) whose run is published under another name
/// (`DOC.md`, `DOC.json`): a bench with several cases and one of them in the book.
pub fn finish_as(bench: &str, doc: &str) {
    write_doc(bench, doc, None, serde_json::Value::Null);
}

fn write_doc(bench: &str, name: &str, dir: Option<&Path>, data: serde_json::Value) {
    let body = DOC.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "<!-- written by benches/{bench}.rs (benches/common/report.rs); do not edit -->"
    );
    let started = START.get_or_init(provenance).clone();
    let _ = writeln!(md, "{started}\n");
    md.push_str(&body);
    let json = serde_json::json!({
        "bench": name,
        "provenance": started,
        "tables": tables_json(&body),
        "data": data,
    });
    let dir = dir.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os("JELLO_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-out"))
    });
    let mut targets = vec![
        (dir.join(format!("{name}.md")), md.clone()),
        (
            dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(&json).unwrap_or_default(),
        ),
    ];
    if std::env::var("JELLO_BENCH_BOOK").is_ok_and(|v| v == "1") {
        let book = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("docs/src/benchmarks/generated")
            .join(format!("{name}.md"));
        targets.push((book, md));
    }
    for (path, text) in targets {
        if let Err(e) = write_atomic(&path, &text) {
            eprintln!("{}: {e}", path.display());
            std::process::exit(1);
        }
        eprintln!("wrote {}", path.display());
    }
}
