//! A fixed-size, lock-free latency histogram with log-linear buckets.
//!
//! Why not `metrics-exporter-prometheus` or `prometheus-client`: the first buffers every raw
//! sample in a growing atomic bucket until the next scrape or upkeep (allocation on the hot path,
//! memory proportional to traffic between scrapes), the second takes a lock per observation.
//! Neither gives percentiles and Prometheus buckets from the same data. This histogram is 544
//! `AtomicU64` counters (4.3 KiB) per recording thread: 16 linear sub-buckets per power of two of
//! nanoseconds, so any value is known to within 6.25 %, from 1 ns up to 2^37 ns (about 137 s;
//! larger values clamp).

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::time::Duration;

/// log2 of the number of linear sub-buckets per power of two.
const SUB_BITS: u32 = 4;
const SUB_COUNT: u64 = 1 << SUB_BITS;
/// Largest power-of-two exponent tracked; larger values land in the last bucket.
const MAX_EXPONENT: u32 = 36;
/// Number of buckets: values below `SUB_COUNT` get one each, then `SUB_COUNT` per exponent.
pub(crate) const BUCKETS: usize = ((MAX_EXPONENT - SUB_BITS + 2) as usize) * SUB_COUNT as usize;

/// Bucket index of a value in nanoseconds.
#[inline]
pub(crate) fn bucket_index(nanos: u64) -> usize {
    if nanos < SUB_COUNT {
        return nanos as usize;
    }
    let exponent = (63 - nanos.leading_zeros()).min(MAX_EXPONENT);
    if exponent == MAX_EXPONENT && nanos >> MAX_EXPONENT > 1 {
        return BUCKETS - 1;
    }
    let sub = (nanos >> (exponent - SUB_BITS)) & (SUB_COUNT - 1);
    ((exponent - SUB_BITS + 1) as u64 * SUB_COUNT + sub) as usize
}

/// Smallest value (nanoseconds) that falls in bucket `index`.
pub(crate) fn bucket_lower_bound(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_COUNT {
        return index;
    }
    let exponent = index / SUB_COUNT + SUB_BITS as u64 - 1;
    let sub = index % SUB_COUNT;
    (SUB_COUNT + sub) << (exponent - SUB_BITS as u64)
}

/// First bucket index whose values are all >= `2^exponent` ns; used to emit exact Prometheus `le`s.
pub(crate) fn first_bucket_of_power(exponent: u32) -> usize {
    bucket_index(1u64 << exponent)
}

/// A latency histogram that many threads record into at once.
///
/// Each recording thread has a shard of its own, so that workers on different cores never
/// write the same cache line: one shared set of counters made each sample bounce its sum's
/// and its bucket's lines between cores (7.6 % of the broker's CPU in a fan-out over two
/// workers). A thread that owns its shard adds without a locked instruction. Shards are
/// allocated on a thread's first sample, so memory follows the threads that record, not the
/// cores.
pub struct LatencyHistogram {
    shards: [OnceLock<Box<Shard>>; SHARDS],
}

/// One thread's counters (the last shard is shared by every thread beyond the first
/// `SHARDS - 1`). Aligned so that no two shards share a cache line.
#[repr(align(128))]
struct Shard {
    buckets: [AtomicU64; BUCKETS],
    sum_nanos: AtomicU64,
    max_nanos: AtomicU64,
}

/// Shards per histogram: a Pi's four workers and the threads around them each get their own.
const SHARDS: usize = 8;

/// The shards owned by a living thread, one bit each (the shared last shard has none). A
/// thread gives its shard back when it exits, so that threads that come and go (tokio's
/// blocking pool) do not use the shards up.
static OWNED: AtomicU32 = AtomicU32::new(0);

/// A thread's claim on a shard, released by its thread-local destructor.
struct ShardClaim(Cell<usize>);

impl Drop for ShardClaim {
    fn drop(&mut self) {
        release(&OWNED, self.0.get());
    }
}

thread_local! {
    /// This thread's shard, claimed on its first sample; `usize::MAX` until then.
    static SHARD: ShardClaim = const { ShardClaim(Cell::new(usize::MAX)) };
}

/// The shard this thread records into, and whether it is the only thread that does. A
/// thread that records while it exits, after its claim was given back, uses the shared one.
#[inline]
fn this_threads_shard() -> (usize, bool) {
    SHARD
        .try_with(|this| {
            let mut index = this.0.get();
            if index == usize::MAX {
                index = claim(&OWNED);
                this.0.set(index);
            }
            (index, index < SHARDS - 1)
        })
        .unwrap_or((SHARDS - 1, false))
}

/// The lowest shard not in `owned`, now marked there, or the shared last one when all are
/// owned. Acquire: the new owner sees every add of the thread that gave the shard back.
#[cold]
fn claim(owned: &AtomicU32) -> usize {
    let mut bits = owned.load(Relaxed);
    loop {
        let free = (!bits).trailing_zeros() as usize;
        if free >= SHARDS - 1 {
            return SHARDS - 1;
        }
        match owned.compare_exchange_weak(bits, bits | 1 << free, Acquire, Relaxed) {
            Ok(_) => return free,
            Err(now) => bits = now,
        }
    }
}

/// Gives shard `index` back (the shared one was never claimed). Release: its adds are
/// published to the next owner.
fn release(owned: &AtomicU32, index: usize) {
    if index < SHARDS - 1 {
        owned.fetch_and(!(1 << index), Release);
    }
}

impl Shard {
    fn new() -> Box<Self> {
        Box::new(Shard {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
            max_nanos: AtomicU64::new(0),
        })
    }

    /// `owned`: no other thread writes this shard, so a load and a store make the add.
    #[inline]
    fn record_nanos(&self, nanos: u64, owned: bool) {
        let bucket = &self.buckets[bucket_index(nanos)];
        if owned {
            bucket.store(bucket.load(Relaxed) + 1, Relaxed);
            self.sum_nanos.store(self.sum_nanos.load(Relaxed).wrapping_add(nanos), Relaxed);
            if nanos > self.max_nanos.load(Relaxed) {
                self.max_nanos.store(nanos, Relaxed);
            }
        } else {
            bucket.fetch_add(1, Relaxed);
            self.sum_nanos.fetch_add(nanos, Relaxed);
            if nanos > self.max_nanos.load(Relaxed) {
                self.max_nanos.fetch_max(nanos, Relaxed);
            }
        }
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram; no shard is allocated until a thread records into it.
    pub fn new() -> Self {
        Self { shards: std::array::from_fn(|_| OnceLock::new()) }
    }

    /// Records one sample.
    #[inline]
    pub fn record(&self, latency: Duration) {
        self.record_nanos(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one sample given in nanoseconds, into the calling thread's shard.
    #[inline]
    pub fn record_nanos(&self, nanos: u64) {
        let (index, owned) = this_threads_shard();
        self.shards[index].get_or_init(Shard::new).record_nanos(nanos, owned);
    }

    /// A point-in-time copy for rendering, summed over the shards. Concurrent records may or
    /// may not be included.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut counts = vec![0u64; BUCKETS];
        let (mut sum_nanos, mut max_nanos) = (0u64, 0u64);
        for shard in self.shards.iter().filter_map(OnceLock::get) {
            for (total, bucket) in counts.iter_mut().zip(&shard.buckets) {
                *total += bucket.load(Relaxed);
            }
            sum_nanos = sum_nanos.wrapping_add(shard.sum_nanos.load(Relaxed));
            max_nanos = max_nanos.max(shard.max_nanos.load(Relaxed));
        }
        HistogramSnapshot { count: counts.iter().sum(), counts, sum_nanos, max_nanos }
    }
}

/// A copy of a histogram's counters, for percentiles and exposition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    counts: Vec<u64>,
    /// Number of samples.
    pub count: u64,
    /// Sum of all samples, nanoseconds (wraps after ~584 years of accumulated latency).
    pub sum_nanos: u64,
    /// Largest sample, nanoseconds (exact, not bucketed).
    pub max_nanos: u64,
}

impl HistogramSnapshot {
    /// The value at quantile `q` (0.0–1.0) in nanoseconds: the midpoint of the bucket holding
    /// the q-th sample, capped at the exact maximum. `None` when empty.
    pub fn quantile_nanos(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let low = bucket_lower_bound(index);
                let high = if index + 1 < BUCKETS { bucket_lower_bound(index + 1) } else { low };
                return Some((low + (high - low) / 2).min(self.max_nanos));
            }
        }
        Some(self.max_nanos)
    }

    /// The samples recorded after `earlier` (a snapshot of the same histogram): what a live
    /// view shows per interval, where the totals of a long-running broker hardly move. Its
    /// maximum is the upper bound of its highest bucket (the exact one is not known per
    /// interval), capped at the histogram's maximum.
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let counts: Vec<u64> =
            self.counts.iter().zip(&earlier.counts).map(|(now, then)| now.saturating_sub(*then)).collect();
        let max_nanos = counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |i| if i + 1 < BUCKETS { bucket_lower_bound(i + 1) } else { self.max_nanos })
            .min(self.max_nanos);
        HistogramSnapshot {
            count: counts.iter().sum(),
            counts,
            sum_nanos: self.sum_nanos.wrapping_sub(earlier.sum_nanos),
            max_nanos,
        }
    }

    /// Number of samples strictly below `2^exponent` nanoseconds.
    pub(crate) fn count_below_power(&self, exponent: u32) -> u64 {
        self.counts[..first_bucket_of_power(exponent)].iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_holds_only_the_samples_recorded_after_the_earlier_snapshot() {
        let h = LatencyHistogram::new();
        for _ in 0..100 {
            h.record_nanos(1_000_000);
        }
        let earlier = h.snapshot();
        for _ in 0..10 {
            h.record_nanos(2_000);
        }
        let interval = h.snapshot().since(&earlier);
        assert_eq!((interval.count, interval.sum_nanos), (10, 20_000));
        let p99 = interval.quantile_nanos(0.99).unwrap();
        assert!((1_900..=2_100).contains(&p99), "{p99}: the millisecond samples are not in it");
        assert!(h.snapshot().quantile_nanos(0.5).unwrap() > 900_000, "the totals still are");
        assert_eq!(h.snapshot().since(&h.snapshot()).quantile_nanos(0.5), None, "nothing new");
    }

    #[test]
    fn every_value_lands_in_a_bucket_whose_bounds_contain_it() {
        let mut values: Vec<u64> = (0..4096).collect();
        values.extend((0..62).map(|s| 1u64 << s));
        values.extend((1..62).map(|s| (1u64 << s) - 1));
        values.extend((1..62).map(|s| (1u64 << s) + 1));
        for v in values {
            let i = bucket_index(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            if v < 1 << (MAX_EXPONENT + 1) {
                assert!(bucket_lower_bound(i) <= v, "{v} below bucket {i}");
                if i + 1 < BUCKETS {
                    assert!(v < bucket_lower_bound(i + 1), "{v} above bucket {i}");
                }
            } else {
                assert_eq!(i, BUCKETS - 1);
            }
        }
    }

    #[test]
    fn bucket_width_is_within_one_sixteenth() {
        for i in SUB_COUNT as usize..BUCKETS - 1 {
            let (low, high) = (bucket_lower_bound(i), bucket_lower_bound(i + 1));
            assert!((high - low) * 16 <= low, "bucket {i}: {low}..{high}");
        }
    }

    #[test]
    fn quantiles_are_close_to_exact() {
        let h = LatencyHistogram::new();
        for micros in 1..=10_000u64 {
            h.record(Duration::from_micros(micros));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 10_000);
        for (q, exact) in [(0.5, 5_000_000f64), (0.9, 9_000_000.), (0.99, 9_900_000.)] {
            let got = s.quantile_nanos(q).unwrap() as f64;
            assert!((got - exact).abs() / exact < 0.0625, "q{q}: {got} vs {exact}");
        }
        assert_eq!(s.quantile_nanos(1.0), Some(10_000_000));
        assert_eq!(s.max_nanos, 10_000_000);
    }

    #[test]
    fn samples_from_more_threads_than_shards_are_all_counted() {
        let h = LatencyHistogram::new();
        let all_alive = std::sync::Barrier::new(2 * SHARDS);
        std::thread::scope(|scope| {
            for t in 0..2 * SHARDS as u64 {
                let (h, all_alive) = (&h, &all_alive);
                scope.spawn(move || {
                    all_alive.wait();
                    for i in 0..1_000 {
                        h.record_nanos(1_000 + t * 1_000 + i % 2);
                    }
                });
            }
        });
        let s = h.snapshot();
        assert_eq!(s.count, 16_000);
        let expected: u64 = (0..16u64).map(|t| 1_000 * (1_000 + t * 1_000) + 500).sum();
        assert_eq!(s.sum_nanos, expected);
        assert_eq!(s.max_nanos, 16_001);
    }

    #[test]
    fn a_shard_given_back_is_claimed_again_and_the_last_is_shared() {
        let owned = AtomicU32::new(0);
        let claimed: Vec<usize> = (0..SHARDS + 2).map(|_| claim(&owned)).collect();
        assert_eq!(claimed, [0, 1, 2, 3, 4, 5, 6, 7, 7, 7]);
        release(&owned, 3);
        release(&owned, SHARDS - 1);
        assert_eq!(claim(&owned), 3, "a thread that exited leaves its shard to the next");
        assert_eq!(claim(&owned), SHARDS - 1);
    }

    #[test]
    fn a_histogram_holds_shards_only_for_the_threads_that_recorded() {
        let h = LatencyHistogram::new();
        assert_eq!(h.shards.iter().filter(|s| s.get().is_some()).count(), 0);
        h.record_nanos(5);
        h.record_nanos(7);
        assert_eq!(h.shards.iter().filter(|s| s.get().is_some()).count(), 1);
        assert_eq!((h.snapshot().count, h.snapshot().max_nanos), (2, 7));
    }

    #[test]
    fn empty_histogram_has_no_quantiles() {
        assert_eq!(LatencyHistogram::new().snapshot().quantile_nanos(0.5), None);
    }

    #[test]
    fn power_of_two_boundaries_are_exact() {
        let h = LatencyHistogram::new();
        h.record_nanos(1023);
        h.record_nanos(1024);
        let s = h.snapshot();
        assert_eq!(s.count_below_power(10), 1);
        assert_eq!(s.count_below_power(11), 2);
    }
}
