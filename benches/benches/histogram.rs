//! Cost of recording one latency sample: through the registry (slot lookup + record), straight
//! into a histogram, and from two threads into the same histogram at once (two workers
//! delivering the same protocol pair, as in a fan-out).

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tolk_metrics::{Hop, LatencyHistogram, Metrics, Protocol};

fn record(c: &mut Criterion) {
    let metrics = Metrics::new();
    let mut nanos = 1u64;
    c.bench_function("metrics_record_hop", |b| {
        b.iter(|| {
            nanos = nanos.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let latency = Duration::from_nanos(nanos >> 40);
            metrics.record(Hop::EndToEnd, Protocol::Mqtt, Protocol::Stomp, std::hint::black_box(latency));
        })
    });
    let histogram = LatencyHistogram::new();
    c.bench_function("histogram_record_nanos", |b| {
        b.iter(|| {
            nanos = nanos.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            histogram.record_nanos(std::hint::black_box(nanos >> 40));
        })
    });
}

/// Two threads each record `iters` samples into one histogram; the time is for the pair.
fn record_from_two_threads(c: &mut Criterion) {
    let metrics = Metrics::new();
    c.bench_function("metrics_record_hop_two_threads", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            std::thread::scope(|scope| {
                for seed in 1..=2u64 {
                    let metrics = &metrics;
                    scope.spawn(move || {
                        let mut nanos = seed;
                        for _ in 0..iters {
                            nanos = nanos.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                            let latency = Duration::from_nanos(50_000 + (nanos >> 54));
                            metrics.record(
                                Hop::EndToEnd,
                                Protocol::Mqtt,
                                Protocol::Mqtt,
                                std::hint::black_box(latency),
                            );
                        }
                    });
                }
            });
            start.elapsed()
        })
    });
}

criterion_group!(benches, record, record_from_two_threads);
criterion_main!(benches);
