//! Metrics for tolk: per-hop latency histograms and counters, cheap enough for the hot path.
//!
//! Everything here is a fixed array of atomics: recording a sample is two or three relaxed
//! atomic operations, never a lock or an allocation. The label sets (protocols, hops, close and
//! drop reasons) are closed enums so that every series has a slot known at compile time.
//! This crate knows nothing about messages or sockets; `tolk-core` and the front ends call it.

#![warn(missing_docs)]

mod bridges;
mod cluster;
mod histogram;
mod labels;
mod registry;
mod render;

pub use bridges::{BridgeCounters, BridgeStatus, Bridges, SpoolGauge};
pub use cluster::{ClusterCounters, ClusterStatus};
pub use histogram::{HistogramSnapshot, LatencyHistogram};
pub use labels::{CloseReason, Denial, DropReason, Encoding, Hop, MemoryKind, Protocol};
pub use registry::{ConnectionGauge, MemoryGauges, Metrics, ProtocolCounters};
pub use render::{LatencyReport, LatencyRow};
