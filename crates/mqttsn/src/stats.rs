//! Gateway-specific counters that the broker-wide metrics have no label for: datagrams that were
//! not messages, messages from peers without a session, and refusals. UDP has no connection to
//! close on bad input, so these counters (and a log line) are how bad input shows up.
//!
//! Every datagram counted in `malformed`, `unsupported`, `not_connected` or `invalid_topic_id`,
//! and a CONNECT counted in `refused` for not being MQTT-SN 1.2, is also counted in the broker's
//! `tolk_messages_dropped_total{protocol="mqttsn",reason="malformed"}`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one gateway, shared by the endpoint and whoever wants to read them.
#[derive(Debug, Default)]
pub struct GatewayStats {
    /// Datagrams that did not decode as one MQTT-SN message (bad Length, unknown MsgType,
    /// truncated fields, over `max_message_size_bytes`...). Dropped without an answer.
    pub malformed: AtomicU64,
    /// Well-formed messages the gateway does not handle (forwarder encapsulation, messages only a
    /// gateway sends), or not at that point (anything but WILLTOPIC and WILLMSG during the will
    /// handshake). Dropped.
    pub unsupported: AtomicU64,
    /// Session messages (PUBLISH QoS 0-2, REGISTER, SUBSCRIBE...) from a peer without a
    /// connection, and PINGREQs naming a client that is not at the sender's address. Answered
    /// with DISCONNECT (§5.4.21: "cannot map a received message to a client").
    pub not_connected: AtomicU64,
    /// PUBLISH refused with return code 0x02 "invalid topic id", or QoS −1 PUBLISH dropped for an
    /// unknown pre-defined id or invalid short name.
    pub invalid_topic_id: AtomicU64,
    /// REGISTER, SUBSCRIBE, will topic or CONNECT refused with a non-zero return code (CONNECTs
    /// refused for `max_clients` or `max_clients_per_address` included).
    pub refused: AtomicU64,
}

impl GatewayStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    /// Reads one counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }
}
