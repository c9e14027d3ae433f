//! Cost of recording one latency sample: through the registry (slot lookup + record), and
//! straight into a histogram.

use std::time::Duration;

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

criterion_group!(benches, record);
criterion_main!(benches);
