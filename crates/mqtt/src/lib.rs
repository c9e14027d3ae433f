//! tolk's MQTT 3.1.1 and 5.0 front end: a server session layer on tokio over the core router,
//! with the `mqtt-codec` crate (`codecs/mqtt`, on `rmqtt-codec`) for the packets.
//!
//! Both protocol levels share one port: the level is read from the first CONNECT. Sessions,
//! QoS 1/2 flows, retained messages, wills, topic aliases and shared subscriptions are handled
//! here; routing, retained storage, offline queues and `$share` groups are the core's.
//!
//! Build it from its configuration: `MqttFrontEnd::new(config)`.

#![warn(missing_docs)]

mod alias;
mod config;
mod connect;
mod connection;
mod frontend;
mod inflight;
mod kept;
mod registry;
mod session;
mod state;
mod subscriptions;
/// Public so that the translation benchmarks (`benches/benches/translation.rs`) can measure
/// PUBLISH ↔ core message; the broker itself uses it only through its sessions.
pub mod translate;
mod will;

pub use config::MqttConfig;
pub use frontend::MqttFrontEnd;
