//! tolk's XMPP front end: a client-to-server listener (RFC 6120: STARTTLS, SASL PLAIN and
//! ANONYMOUS, resource binding) whose only service is publish-subscribe (XEP-0060) on the common
//! topic space, at `pubsub.<domain>`.
//!
//! * A node is a topic: `sensors/room1/temp`; nodes exist as soon as they are used, and a
//!   subscription's node may be a filter (`sensors/+/temp`, `sensors/#`).
//! * A publish is acknowledged (the `iq` result) once routed, and once stored when it is kept;
//!   notifications are at most once, as XMPP has no acknowledgement for them.
//! * Item payloads map as WS-Notification's do (docs/translation.md, "XMPP").
//!
//! The XML stream comes from the sans-IO `xmpp-codec` crate; this crate owns the session
//! (`session`), the requests (`pubsub`, `disco`, `sasl`) and the payload mapping
//! (`translate`). Build it with `XmppFrontEnd::new(XmppConfig::default())`.

#![warn(missing_docs)]

mod config;
mod connection;
mod disco;
mod frontend;
mod pubsub;
mod sasl;
mod session;
mod stanza;
mod throttle;
mod translate;

pub use config::{XmppConfig, default_port};
pub use frontend::XmppFrontEnd;
