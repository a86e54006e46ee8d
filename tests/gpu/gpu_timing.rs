//! Per-kernel timing (`Device::set_kernel_timing`; the GPU bench's per-kernel split, issue 40):
//! with timing on every dispatch is timed exactly once and its kernel's counters get its time —
//! on a GPU from timestamp queries at the start and end of the dispatch's own compute pass, on
//! the CPU backend the wall time of the twin call — the results are bit for bit those of the
//! untimed plan, the kernels' summed time fits inside the host's wall time of the submit and
//! wait, and with timing off again nothing is timed. A GPU test FAILS when no adapter is found
//! unless `JELLO_SKIP_GPU_TESTS=1`; both software adapters CI uses (lavapipe, llvmpipe) offer
//! `TIMESTAMP_QUERY`, so the GPU run is timed there too.

use crate::common;

use jello::gpu::{Device, Kernel, Params, Plan};
use rand::Rng;
use std::time::Instant;

#[test]
fn kernel_timing_times_every_dispatch_and_changes_no_result() {
    let mut rng = common::rng("kernel_timing_times_every_dispatch_and_changes_no_result");
    let n = 1 << 20;
    let x0: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let y0: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu_device());
    for mut d in devs {
        let name = d.info().to_string();
        let x = d.upload("x", &x0).unwrap();
        let y = d.upload("y", &y0).unwrap();
        let out = d.alloc::<f32>("sum", 1).unwrap();
        let mut p = Plan::new();
        for k in 0..5 {
            p.dispatch(
                Kernel::Axpy,
                &[x.id(), y.id()],
                Params::new().f0(0.5 + k as f32),
                n as u32,
            );
        }
        p.sum(&y, n as u32, &out, 0);

        d.submit(&p).unwrap();
        let untimed = (d.read(&y).unwrap(), d.read(&out).unwrap());
        d.write(&y, 0, &y0).unwrap();

        d.set_kernel_timing(true).unwrap();
        d.wait_idle().unwrap();
        let c0 = d.counters();
        let t0 = Instant::now();
        d.submit(&p).unwrap();
        d.wait_idle().unwrap();
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let c = d.counters().since(&c0);
        let timed = (d.read(&y).unwrap(), d.read(&out).unwrap());
        assert!(
            timed == untimed,
            "{name}: timing changed the plan's results"
        );

        let mut total = 0;
        let mut kernels = 0;
        for (k, kc) in c.kernel_counts() {
            eprintln!(
                "{name}: {} × {:?}, {:.3} ms",
                kc.dispatches,
                k,
                kc.time_ns as f64 * 1e-6
            );
            assert_eq!(
                kc.timed, kc.dispatches,
                "{name}: {k:?} timed once per dispatch"
            );
            total += kc.time_ns;
            kernels += 1;
        }
        assert!(
            kernels >= 2,
            "{name}: axpy and the reduction were dispatched"
        );
        let axpy = c.kernels[Kernel::Axpy.index()];
        assert_eq!(axpy.dispatches, 5);
        // Five passes over 1 Mi floats (12 MiB moved): far more than a timestamp tick anywhere.
        assert!(axpy.time_ns > 0, "{name}: axpy took no time");
        // The dispatches ran, one after another, inside the host's interval.
        assert!(
            total <= wall_ns,
            "{name}: kernels {total} ns against the submit-and-wait's {wall_ns} ns"
        );

        d.set_kernel_timing(false).unwrap();
        let c1 = d.counters();
        d.submit(&p).unwrap();
        d.wait_idle().unwrap();
        let after = d.counters().since(&c1);
        assert!(after.dispatches > 0);
        assert!(
            after.kernel_counts().all(|(_, kc)| kc.timed == 0),
            "{name}: timing off, yet dispatches were timed"
        );
    }
}
