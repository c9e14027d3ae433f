//! The MQTT bridge: one MQTT 5 connection to a remote broker, with a persistent session there.
//!
//! - **In.** It subscribes to the remote side of the `in` rules with No Local (the remote does
//!   not send back what the bridge published) and Retain As Published, and publishes what comes
//!   here. A message is acknowledged to the remote only once the store has what it left here,
//!   so nothing the remote handed over is lost in a crash here (manual acknowledgements).
//! - **Out.** It sends what the spool holds, with up to `max_inflight` messages unacknowledged,
//!   and settles each one when the remote's PUBACK (or PUBCOMP) comes. A remote that
//!   acknowledges nothing for `ack_timeout` is disconnected; what it had not acknowledged is
//!   sent again on the next connection (Mosquitto's own bridge stalls for good there).
//! - The session at the remote is persistent (clean start off, no expiry), under a client id
//!   that stays the same across restarts, so the remote keeps what arrives for the `in` rules
//!   while the bridge is away.
//! - Connection attempts back off with jitter; a refused login is logged with the remote's
//!   reason and retried like any other failure.
//! - `mqtt_version = 4` speaks MQTT 3.1.1 to remotes that have no 5 ([`wire`]): no No Local, no
//!   properties, so no path; the configuration then may not let an `out` rule and an `in` rule
//!   meet at the remote, which is what would echo.

#![warn(missing_docs)]

mod wire;

use std::collections::{HashMap, VecDeque};

use tokio::time::Instant;
use tolk_bridge::{AwaitingStore, Inbound, Kind, Launch, Link, Outbound, Refused, Runner};
use tolk_core::store::Durable;

use crate::wire::{Event, Received, Target, Wire};

/// The MQTT kind, for [`tolk_bridge::Bridges`].
pub fn runner() -> (Kind, Runner) {
    (Kind::Mqtt, |link| Launch::task(run(link)))
}

/// Connects, moves messages, and connects again after a failure, until the broker stops.
async fn run(link: Link) {
    link.reconnecting(async |link, backoff| connection(link, backoff).await).await;
}

/// `mqtt://host:port` or `mqtts://host:port` (port defaults 1883 and 8883; `[v6]` in brackets).
fn parse_url(url: &str) -> Result<(bool, String, u16), String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("mqtts://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("mqtt://") {
        (false, rest)
    } else {
        return Err(format!("url {url:?}: not mqtt:// or mqtts://"));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let default_port = if tls { 8883 } else { 1883 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => {
            (host, port.parse::<u16>().map_err(|_| format!("url {url:?}: the port is not a number"))?)
        }
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("url {url:?}: no host"));
    }
    Ok((tls, host.to_owned(), port))
}

/// One connection: returns why it ended, or `None` when the broker stops.
async fn connection(link: &mut Link, backoff: &mut tolk_bridge::Backoff) -> Option<String> {
    let max_inflight = usize::from(link.config().max_inflight);
    let ack_timeout = link.config().ack_timeout;
    let target = match parse_url(&link.config().url) {
        Ok((tls, host, port)) => Target { tls, host, port },
        Err(reason) => return Some(reason),
    };
    // Room for every request this task makes between two polls: publishes (at most
    // max_inflight), acknowledgements and one subscription.
    let mut wire = match Wire::new(link, target, 2 * max_inflight + 16) {
        Ok(wire) => wire,
        Err(reason) => return Some(reason),
    };

    // CONNACK first.
    loop {
        let event = tokio::select! {
            _ = link.shutdown().cancelled() => return None,
            event = wire.poll() => event,
        };
        match event {
            Ok(Event::ConnAck) => break,
            Ok(_) => {}
            Err(reason) => return Some(reason),
        }
    }
    if let Err(reason) = wire.subscribe(link.remote_subscriptions()) {
        return Some(reason);
    }
    link.connected();
    backoff.reset();

    // Sent in this order, not yet given a packet id by the client.
    let mut unnumbered: VecDeque<Outbound> = VecDeque::new();
    // Sent and numbered, awaiting the remote's acknowledgement.
    let mut unacked: HashMap<u16, Outbound> = HashMap::new();
    let mut awaiting_store: AwaitingStore<Received> = AwaitingStore::default();
    // When the remote last acknowledged something (or the oldest unacknowledged was sent).
    let mut last_progress = Instant::now();
    let shutdown = link.shutdown().clone();

    loop {
        let room = unnumbered.len() + unacked.len() < max_inflight;
        let stalled = !unacked.is_empty();
        tokio::select! {
            _ = shutdown.cancelled() => {
                wire.disconnect();
                return None;
            }
            event = wire.poll() => {
                match event {
                    Ok(Event::Publish { topic, inbound, received }) => match take_in(link, &topic, inbound) {
                        Ok(durable) => awaiting_store.push(durable, received),
                        Err(reason) => return Some(reason),
                    },
                    Ok(Event::Completed(pkid)) => {
                        if let Some(out) = unacked.remove(&pkid) {
                            link.confirmed(out);
                            last_progress = Instant::now();
                        }
                    }
                    Ok(Event::Progress) => last_progress = Instant::now(),
                    Ok(Event::Numbered(pkid)) => {
                        let Some(out) = unnumbered.pop_front() else { continue };
                        if pkid == 0 {
                            // QoS 0: written, and that is all it gets.
                            link.confirmed(out);
                        } else {
                            if unacked.is_empty() {
                                last_progress = Instant::now();
                            }
                            unacked.insert(pkid, out);
                        }
                    }
                    Ok(Event::Disconnected(reason)) => return Some(format!("the remote disconnected ({reason})")),
                    Ok(Event::ConnAck | Event::Other) => {}
                    Err(reason) => return Some(reason),
                }
            }
            out = link.next_outbound(), if room => {
                if let Err(reason) = wire.publish(&out) {
                    return Some(reason);
                }
                unnumbered.push_back(out);
            }
            (result, received) = awaiting_store.next() => {
                if let Err(e) = result {
                    return Some(format!("a message from the remote could not be stored here ({e}); it will be sent again"));
                }
                if let Err(reason) = wire.ack(&received) {
                    return Some(reason);
                }
            }
            _ = tokio::time::sleep_until(last_progress + ack_timeout), if stalled => {
                return Some(format!("the remote acknowledged nothing for {ack_timeout:?}; reconnecting"));
            }
        }
    }
}

/// Publishes here what the remote sent. `Err`: the connection ends (the remote keeps the
/// message and sends it again).
fn take_in(link: &Link, topic: &[u8], inbound: Inbound) -> Result<Option<Durable>, String> {
    let topic = std::str::from_utf8(topic).map_err(|_| "the remote sent a topic that is not UTF-8".to_owned())?;
    match link.publish_in(topic, inbound) {
        Ok(durable) => Ok(durable),
        // Acknowledged and dropped: nothing here wants it.
        Err(Refused::Unmapped) => Ok(None),
        Err(Refused::Full) => {
            Err("this broker is full (memory budget or queue limits); the remote will send again".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_scheme_host_and_port() {
        assert_eq!(parse_url("mqtt://h").unwrap(), (false, "h".into(), 1883));
        assert_eq!(parse_url("mqtts://h:9").unwrap(), (true, "h".into(), 9));
        assert_eq!(parse_url("mqtt://[::1]:7").unwrap(), (false, "::1".into(), 7));
        assert_eq!(parse_url("mqtt://[::1]").unwrap(), (false, "::1".into(), 1883));
        assert!(parse_url("http://h").is_err());
        assert!(parse_url("mqtt://h:x").is_err());
    }
}
