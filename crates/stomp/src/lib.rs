//! tolk's STOMP 1.0 / 1.1 / 1.2 front end: a TCP listener whose sessions translate STOMP frames
//! to and from the core's message model.
//!
//! * `/topic/<t>` is topic `t` of the common, MQTT-style topic space (wildcards `+` and `#` in
//!   SUBSCRIBE), shared with every other protocol.
//! * `/queue/<name>` is the core's named queue `name`: competing consumers, acks, redelivery.
//!
//! Wire format comes from the sans-IO `stomp-codec` crate; this crate owns sessions
//! (the `session` state machine, one module per protocol concept), the property
//! mapping (`translate`) and the connection task. Build it with
//! `StompFrontEnd::new(StompConfig::default())`. See the crate README for what is supported.

#![warn(missing_docs)]

mod ack;
mod config;
mod connect;
mod connection;
mod destination;
mod error;
mod frontend;
mod heartbeat;
mod session;
mod subscription;
mod transaction;
/// Public so that the translation benchmarks (`benches/benches/translation.rs`) can measure
/// SEND/MESSAGE ↔ core message; the broker itself uses it only through its sessions.
pub mod translate;

pub use config::{StompConfig, default_port};
pub use frontend::StompFrontEnd;
pub use heartbeat::TOLERANCE_FACTOR as HEART_BEAT_TOLERANCE_FACTOR;
