//! Routing cost: publish one message to a topic among 100,000 filters, with 1, 10 and 1,000
//! matching subscribers (each delivery is an outbox push). Outboxes are drained outside the
//! timed region.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tolk_benches::{hot_message, population};

fn routing(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_among_100k_filters");
    for matching in [1usize, 10, 1000] {
        let population = population(100_000, matching);
        let message = hot_message();
        let mut sink = Vec::with_capacity(4096);
        group.throughput(Throughput::Elements(matching as u64));
        group.bench_function(BenchmarkId::new("subscribers", matching), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let batch = left.min(1024);
                    let start = Instant::now();
                    for _ in 0..batch {
                        std::hint::black_box(population.router.publish(message.clone()));
                    }
                    timed += start.elapsed();
                    for session in &population.matching {
                        sink.clear();
                        let _ = session.receiver().try_drain(&mut sink, usize::MAX);
                    }
                    left -= batch;
                }
                timed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, routing);
criterion_main!(benches);
