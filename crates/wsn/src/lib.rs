//! tolk's WS-Notification front end: an OASIS WS-BaseNotification 1.3 NotificationBroker over
//! SOAP 1.1 and 1.2 on the broker's HTTP port, sharing the core's topic space with the IoT
//! protocols.
//!
//! - Publishers send Notify; each NotificationMessage becomes a core message.
//! - Subscribers Subscribe with a consumer address (notifications are POSTed to it) or with
//!   the address of a pull point (notifications wait there for GetMessages).
//! - Each subscription and pull point has its own URL, which is all a client needs to manage it
//!   (once users are verified, only the user who made it may).
//! - Every request logs in with HTTP Basic or a WS-Security UsernameToken (or none, as an
//!   anonymous client) and is held to that user's rights in the access-control list.
//!
//! The SOAP and WS-N documents are read and written by the sans-IO `wsn-xml` codec; this crate
//! owns HTTP, the subscriptions, push delivery and the mapping to core messages. Build it with
//! [`WsnFrontEnd::new`] and merge [`WsnFrontEnd::routes`] into the broker's axum app.

#![warn(missing_docs)]

mod allow;
mod client;
mod config;
mod connector;
mod endpoint;
mod fault;
mod filter;
mod frontend;
mod http;
mod ids;
mod kept;
mod lifetime;
mod login;
mod loopmark;
mod manager;
mod memory;
mod producer;
mod pullpoint;
mod pullpoint_ops;
mod push;
mod push_mark;
mod registry;
mod restore;
mod subscription;
/// Public so that the translation benchmarks (`benches/benches/translation.rs`) can measure
/// Notify ↔ core message; the broker itself uses it only through its endpoint.
pub mod translate;

pub use client::{NotifyClient, PostError};
pub use config::{PullPointConfig, PushConfig, WsnConfig, default_path};
pub use frontend::WsnFrontEnd;
pub use ids::IdSource;
