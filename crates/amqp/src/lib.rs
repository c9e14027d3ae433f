//! tolk's AMQP 0-9-1 front end: a RabbitMQ-compatible server for the subset IoT clients use,
//! translating between AMQP exchanges, queues and consumers and tolk's topic core.
//!
//! - Frames are read and written with `amq-protocol` behind tolk's own framing checks
//!   ([`frame`]); the server logic (handshake, channels, exchanges, consumers) is here.
//! - Queues are the core's queues, shared with STOMP and MQTT shared subscriptions.
//! - Exchanges are AMQP-only state ([`exchange`]), except `amq.topic`, which is the bridge to
//!   the common topic space: routing key `a.b/c` ↔ topic `a/b.c` ([`topic_key`]).
//! - The per-connection state machine ([`session`]) is sans-IO; [`connection`] runs it on a socket.
//!
//! Build the front end with `AmqpFrontEnd::new(AmqpConfig::default())` and start it through
//! `tolk_core::frontend::FrontEnd`.

#![warn(missing_docs)]

mod access;
mod basic;
mod channel;
pub mod config;
pub mod connection;
pub mod context;
pub mod error;
pub mod exchange;
mod exchange_class;
pub mod frontend;
mod kept;
mod output;
mod queue;
pub mod session;
pub mod topic_key;
pub mod translate;

pub use config::AmqpConfig;
pub use error::AmqpError;
pub use frontend::AmqpFrontEnd;
pub use session::AmqpSession;
