//! tolk's MQTT-SN 1.2 gateway over UDP. Unlike the gateways that relay MQTT-SN to an MQTT broker
//! over a second TCP hop (Paho's, the one OKSE embeds), it speaks to the core router directly:
//! an MQTT-SN client is a core session like any other.
//!
//! Shape (quinn's endpoint/connection split): one endpoint task owns the socket and routes each
//! datagram to a per-client, sans-IO session state machine (time passed in, output polled); a small
//! task per connected client waits on its core outbox. Topic ids live in one global registry
//! persisted in the data directory, so they survive a restart. See the crate README for what is
//! supported, the limits, and what a client gets for what is not.
//!
//! ```no_run
//! # async fn run(ctx: tolk_core::frontend::FrontEndContext) -> std::io::Result<()> {
//! use tolk_core::frontend::FrontEnd;
//! let front_end = tolk_mqttsn::MqttSnFrontEnd::new(tolk_mqttsn::MqttSnConfig::default());
//! let bound = Box::new(front_end).start(ctx).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod addresses;
mod config;
mod deadlines;
mod endpoint;
mod frontend;
mod gateway;
mod kept;
mod known_ids;
mod outbox_watch;
mod outgoing;
mod persist;
mod predefined;
mod registry;
mod session;
mod socket;
mod stats;
mod stored_acks;
mod throttle;
/// Public so that the translation benchmarks (`benches/benches/translation.rs`) can measure
/// PUBLISH ↔ core message; the broker itself uses it only through its sessions.
pub mod translate;

pub use config::{
    AdvertiseConfig, ClientConfig, ConfigError, MqttSnConfig, RetransmitConfig, default_first_message_timeout,
    default_handshake_timeout, default_max_clients_per_address, default_max_keep_alive, default_max_message_size_bytes,
    default_port,
};
pub use frontend::MqttSnFrontEnd;
pub use registry::{MAX_TOPIC_IDS, REGISTRY_FILE};
pub use stats::GatewayStats;
