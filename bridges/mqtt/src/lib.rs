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

#![warn(missing_docs)]

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS as WireQoS;
use rumqttc::v5::mqttbytes::v5::{Filter, Packet, PubAck, PubComp, Publish, PublishProperties, RetainForwardRule};
use rumqttc::v5::{AsyncClient, ConnectionError, Event, MqttOptions};
use rumqttc::{Outgoing, TlsConfiguration, Transport};
use tokio::time::Instant;
use tolk_bridge::{AwaitingStore, Inbound, Kind, Launch, Link, Outbound, Refused, Runner};
use tolk_core::QoS;
use tolk_core::store::Durable;

/// The MQTT kind, for [`tolk_bridge::Bridges`].
pub fn runner() -> (Kind, Runner) {
    (Kind::Mqtt, |link| Launch::task(run(link)))
}

/// Connects, moves messages, and connects again after a failure, until the broker stops.
async fn run(link: Link) {
    link.reconnecting(async |link, backoff| match options(link) {
        Ok(options) => connection(link, options, backoff).await,
        Err(reason) => Some(reason),
    })
    .await;
}

/// The client settings from the bridge's configuration.
fn options(link: &Link) -> Result<MqttOptions, String> {
    let config = link.config();
    let (tls, host, port) = parse_url(&config.url)?;
    let client_id = config.client_id.clone().unwrap_or_else(|| format!("tolk-{}-{}", link.node(), config.name));
    let mut options = MqttOptions::new(client_id, host, port);
    options.set_keep_alive(config.keep_alive.max(Duration::from_secs(5)));
    options.set_clean_start(false);
    // The remote keeps the session however long the bridge is away.
    options.set_session_expiry_interval(Some(u32::MAX));
    options.set_manual_acks(true);
    options.set_outgoing_inflight_upper_limit(config.max_inflight);
    options.set_max_packet_size(Some(16 * 1024 * 1024));
    if let (Some(user), password) = (&config.username, &config.password) {
        options.set_credentials(user.clone(), password.clone().unwrap_or_default());
    }
    if tls {
        let client = tolk_tls::client_config("ca_file", config.ca_file.as_deref()).map_err(|e| e.to_string())?;
        options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(client)));
    }
    Ok(options)
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
async fn connection(link: &mut Link, options: MqttOptions, backoff: &mut tolk_bridge::Backoff) -> Option<String> {
    let max_inflight = usize::from(link.config().max_inflight);
    let ack_timeout = link.config().ack_timeout;
    // Room for every request this task makes between two polls: publishes (at most
    // max_inflight), acknowledgements and one subscription.
    let (client, mut events) = AsyncClient::new(options, 2 * max_inflight + 16);

    // CONNACK first.
    loop {
        let event = tokio::select! {
            _ = link.shutdown().cancelled() => return None,
            event = events.poll() => event,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => break,
            Ok(_) => {}
            Err(e) => return Some(describe(&e)),
        }
    }
    let filters: Vec<Filter> = link
        .remote_subscriptions()
        .into_iter()
        .map(|(path, qos)| Filter {
            path,
            qos: wire_qos(qos),
            nolocal: true,
            preserve_retain: true,
            retain_forward_rule: RetainForwardRule::OnEverySubscribe,
        })
        .collect();
    if !filters.is_empty()
        && let Err(e) = client.try_subscribe_many(filters)
    {
        return Some(format!("could not subscribe: {e}"));
    }
    link.connected();
    backoff.reset();

    // Sent in this order, not yet given a packet id by the client.
    let mut unnumbered: VecDeque<Outbound> = VecDeque::new();
    // Sent and numbered, awaiting the remote's acknowledgement.
    let mut unacked: HashMap<u16, Outbound> = HashMap::new();
    let mut awaiting_store: AwaitingStore<Publish> = AwaitingStore::default();
    // When the remote last acknowledged something (or the oldest unacknowledged was sent).
    let mut last_progress = Instant::now();
    let shutdown = link.shutdown().clone();

    loop {
        let room = unnumbered.len() + unacked.len() < max_inflight;
        let stalled = !unacked.is_empty();
        tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = client.try_disconnect();
                return None;
            }
            event = events.poll() => {
                match event {
                    Ok(Event::Incoming(Packet::Publish(publish))) => {
                        match take_in(link, &publish) {
                            Ok(durable) => awaiting_store.push(durable, publish),
                            Err(reason) => return Some(reason),
                        }
                    }
                    // The end of a QoS 1 (PUBACK) or QoS 2 (PUBCOMP) flow.
                    Ok(Event::Incoming(Packet::PubAck(PubAck { pkid, .. }) | Packet::PubComp(PubComp { pkid, .. }))) => {
                        if let Some(out) = unacked.remove(&pkid) {
                            link.confirmed(out);
                            last_progress = Instant::now();
                        }
                    }
                    Ok(Event::Incoming(Packet::PubRec(_))) => last_progress = Instant::now(),
                    Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
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
                    Ok(Event::Incoming(Packet::Disconnect(d))) => {
                        return Some(format!("the remote disconnected ({:?})", d.reason_code));
                    }
                    Ok(_) => {}
                    Err(e) => return Some(describe(&e)),
                }
            }
            out = link.next_outbound(), if room => {
                if let Err(e) = send(&client, &out) {
                    return Some(format!("could not send: {e}"));
                }
                unnumbered.push_back(out);
            }
            (result, publish) = awaiting_store.next() => {
                if let Err(e) = result {
                    return Some(format!("a message from the remote could not be stored here ({e}); it will be sent again"));
                }
                if let Err(e) = client.try_ack(&publish) {
                    return Some(format!("could not acknowledge: {e}"));
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
fn take_in(link: &Link, publish: &Publish) -> Result<Option<Durable>, String> {
    let topic =
        std::str::from_utf8(&publish.topic).map_err(|_| "the remote sent a topic that is not UTF-8".to_owned())?;
    let mut props = tolk_core::Properties::default();
    if let Some(p) = &publish.properties {
        props.user = p.user_properties.clone();
        props.content_type = p.content_type.clone();
        props.payload_utf8 = p.payload_format_indicator.map(|f| f == 1);
        props.correlation_data = p.correlation_data.clone();
    }
    let qos = match publish.qos {
        WireQoS::AtMostOnce => QoS::AtMostOnce,
        WireQoS::AtLeastOnce => QoS::AtLeastOnce,
        WireQoS::ExactlyOnce => QoS::ExactlyOnce,
    };
    let inbound = Inbound { payload: publish.payload.clone(), qos, retain: publish.retain, props };
    match link.publish_in(topic, inbound) {
        Ok(durable) => Ok(durable),
        // Acknowledged and dropped: nothing here wants it.
        Err(Refused::Unmapped) => Ok(None),
        Err(Refused::Full) => {
            Err("this broker is full (memory budget or queue limits); the remote will send again".into())
        }
    }
}

/// Hands `out` to the client (it numbers it when it writes it: `Outgoing::Publish`).
fn send(client: &AsyncClient, out: &Outbound) -> Result<(), String> {
    let properties = PublishProperties {
        user_properties: out.user.clone(),
        content_type: out.message.props.content_type.clone(),
        payload_format_indicator: out.message.props.payload_utf8.map(u8::from),
        correlation_data: out.message.props.correlation_data.clone(),
        ..PublishProperties::default()
    };
    let payload: Bytes = out.message.payload.clone();
    client
        .try_publish_with_properties(out.topic.clone(), wire_qos(out.qos), out.message.retain, payload, properties)
        .map_err(|e| e.to_string())
}

fn wire_qos(qos: QoS) -> WireQoS {
    match qos {
        QoS::AtMostOnce => WireQoS::AtMostOnce,
        QoS::AtLeastOnce => WireQoS::AtLeastOnce,
        QoS::ExactlyOnce => WireQoS::ExactlyOnce,
    }
}

/// A connection error as a log line a user can act on.
fn describe(error: &ConnectionError) -> String {
    match error {
        ConnectionError::ConnectionRefused(code) => format!("the remote refused the connection: {code:?}"),
        other => other.to_string(),
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
