//! One connection to the remote as the bridge's loop sees it, at either protocol level:
//! rumqttc's MQTT 5 client (No Local, Retain As Published, user properties with the path) or
//! its MQTT 3.1.1 client (none of these; see [`tolk_bridge::BridgeConfig::validate`] for the
//! rules that keep a 3.1.1 bridge from echoing). Events of both come out as one [`Event`].

use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS as WireQoS;
use rumqttc::v5::mqttbytes::v5::{Filter, Packet as Packet5, PublishProperties, RetainForwardRule};
use rumqttc::{Outgoing, TlsConfiguration, Transport};
use tolk_bridge::{Inbound, Link, Outbound};
use tolk_core::{Properties, QoS};

/// A publish from the remote, kept to acknowledge it later.
pub(crate) enum Received {
    V5(rumqttc::v5::mqttbytes::v5::Publish),
    V4(rumqttc::Publish),
}

/// What the connection reports.
#[allow(clippy::large_enum_variant, reason = "one event at a time, moved once: boxing would only add an allocation")]
pub(crate) enum Event {
    /// The remote accepted the connection.
    ConnAck,
    /// A message from the remote on `topic`, to acknowledge with [`Wire::ack`].
    Publish { topic: Bytes, inbound: Inbound, received: Received },
    /// The end of a QoS 1 (PUBACK) or QoS 2 (PUBCOMP) flow for packet `pkid`.
    Completed(u16),
    /// A PUBREC: the remote is alive and working.
    Progress,
    /// The client wrote a publish under packet id `pkid` (0: QoS 0).
    Numbered(u16),
    /// The remote sent DISCONNECT.
    Disconnected(String),
    /// Anything else.
    Other,
}

/// The client and its event loop.
#[allow(clippy::large_enum_variant, reason = "one per connection, never moved after it is made")]
pub(crate) enum Wire {
    V5(rumqttc::v5::AsyncClient, rumqttc::v5::EventLoop),
    V4(rumqttc::AsyncClient, rumqttc::EventLoop),
}

/// Where and how to connect, from the bridge's configuration.
pub(crate) struct Target {
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Wire {
    /// A client for `link`'s remote (it connects on the first poll), with room for
    /// `requests` queued requests.
    pub(crate) fn new(link: &Link, target: Target, requests: usize) -> Result<Wire, String> {
        let config = link.config();
        let client_id = config.client_id.clone().unwrap_or_else(|| format!("tolk-{}-{}", link.node(), config.name));
        let keep_alive = config.keep_alive.max(Duration::from_secs(5));
        let transport = if target.tls {
            let client = tolk_tls::client_config("ca_file", config.ca_file.as_deref()).map_err(|e| e.to_string())?;
            Some(Transport::tls_with_config(TlsConfiguration::Rustls(client)))
        } else {
            None
        };
        let credentials = config.username.clone().map(|user| (user, config.password.clone().unwrap_or_default()));
        if config.mqtt_version == 4 {
            let mut options = rumqttc::MqttOptions::new(client_id, target.host, target.port);
            options.set_keep_alive(keep_alive);
            // The remote keeps the session while the bridge is away.
            options.set_clean_session(false);
            options.set_manual_acks(true);
            options.set_inflight(config.max_inflight);
            options.set_max_packet_size(16 * 1024 * 1024, 16 * 1024 * 1024);
            if let Some((user, password)) = credentials {
                options.set_credentials(user, password);
            }
            if let Some(transport) = transport {
                options.set_transport(transport);
            }
            let (client, events) = rumqttc::AsyncClient::new(options, requests);
            return Ok(Wire::V4(client, events));
        }
        let mut options = rumqttc::v5::MqttOptions::new(client_id, target.host, target.port);
        options.set_keep_alive(keep_alive);
        options.set_clean_start(false);
        // The remote keeps the session however long the bridge is away.
        options.set_session_expiry_interval(Some(u32::MAX));
        options.set_manual_acks(true);
        options.set_outgoing_inflight_upper_limit(config.max_inflight);
        options.set_max_packet_size(Some(16 * 1024 * 1024));
        if let Some((user, password)) = credentials {
            options.set_credentials(user, password);
        }
        if let Some(transport) = transport {
            options.set_transport(transport);
        }
        let (client, events) = rumqttc::v5::AsyncClient::new(options, requests);
        Ok(Wire::V5(client, events))
    }

    /// The next event; `Err` describes a failed connection for the log.
    pub(crate) async fn poll(&mut self) -> Result<Event, String> {
        match self {
            Wire::V5(_, events) => {
                use rumqttc::v5::Event as E;
                Ok(match events.poll().await.map_err(|e| describe5(&e))? {
                    E::Incoming(Packet5::ConnAck(_)) => Event::ConnAck,
                    E::Incoming(Packet5::Publish(publish)) => {
                        let mut props = Properties::default();
                        if let Some(p) = &publish.properties {
                            props.user = p.user_properties.clone();
                            props.content_type = p.content_type.clone();
                            props.payload_utf8 = p.payload_format_indicator.map(|f| f == 1);
                            props.correlation_data = p.correlation_data.clone();
                        }
                        let inbound = Inbound {
                            payload: publish.payload.clone(),
                            qos: qos(publish.qos),
                            retain: publish.retain,
                            props,
                        };
                        Event::Publish { topic: publish.topic.clone(), inbound, received: Received::V5(publish) }
                    }
                    E::Incoming(Packet5::PubAck(ack)) => Event::Completed(ack.pkid),
                    E::Incoming(Packet5::PubComp(comp)) => Event::Completed(comp.pkid),
                    E::Incoming(Packet5::PubRec(_)) => Event::Progress,
                    E::Incoming(Packet5::Disconnect(d)) => Event::Disconnected(format!("{:?}", d.reason_code)),
                    E::Outgoing(Outgoing::Publish(pkid)) => Event::Numbered(pkid),
                    _ => Event::Other,
                })
            }
            Wire::V4(_, events) => {
                use rumqttc::{Event as E, Packet as P};
                Ok(match events.poll().await.map_err(|e| describe4(&e))? {
                    E::Incoming(P::ConnAck(_)) => Event::ConnAck,
                    E::Incoming(P::Publish(publish)) => {
                        let inbound = Inbound {
                            payload: publish.payload.clone(),
                            qos: qos4(publish.qos),
                            retain: publish.retain,
                            props: Properties::default(),
                        };
                        let topic = Bytes::copy_from_slice(publish.topic.as_bytes());
                        Event::Publish { topic, inbound, received: Received::V4(publish) }
                    }
                    E::Incoming(P::PubAck(ack)) => Event::Completed(ack.pkid),
                    E::Incoming(P::PubComp(comp)) => Event::Completed(comp.pkid),
                    E::Incoming(P::PubRec(_)) => Event::Progress,
                    E::Incoming(P::Disconnect) => Event::Disconnected("DISCONNECT".into()),
                    E::Outgoing(Outgoing::Publish(pkid)) => Event::Numbered(pkid),
                    _ => Event::Other,
                })
            }
        }
    }

    /// Subscribes to `filters` at the remote: with No Local and Retain As Published at 5.
    pub(crate) fn subscribe(&self, filters: Vec<(String, QoS)>) -> Result<(), String> {
        if filters.is_empty() {
            return Ok(());
        }
        let result = match self {
            Wire::V5(client, _) => client
                .try_subscribe_many(filters.into_iter().map(|(path, q)| Filter {
                    path,
                    qos: wire_qos(q),
                    nolocal: true,
                    preserve_retain: true,
                    retain_forward_rule: RetainForwardRule::OnEverySubscribe,
                }))
                .map_err(text),
            Wire::V4(client, _) => client
                .try_subscribe_many(
                    filters.into_iter().map(|(path, q)| rumqttc::SubscribeFilter::new(path, wire_qos4(q))),
                )
                .map_err(text),
        };
        result.map_err(|e| format!("could not subscribe: {e}"))
    }

    /// Hands `out` to the client (it numbers it when it writes it: [`Event::Numbered`]). At 5
    /// with its properties and path; 3.1.1 carries neither.
    pub(crate) fn publish(&self, out: &Outbound) -> Result<(), String> {
        let payload: Bytes = out.message.payload.clone();
        let (topic, retain) = (out.topic.clone(), out.message.retain);
        let result = match self {
            Wire::V5(client, _) => {
                let properties = PublishProperties {
                    user_properties: out.user.clone(),
                    content_type: out.message.props.content_type.clone(),
                    payload_format_indicator: out.message.props.payload_utf8.map(u8::from),
                    correlation_data: out.message.props.correlation_data.clone(),
                    ..PublishProperties::default()
                };
                client.try_publish_with_properties(topic, wire_qos(out.qos), retain, payload, properties).map_err(text)
            }
            Wire::V4(client, _) => client.try_publish(topic, wire_qos4(out.qos), retain, payload).map_err(text),
        };
        result.map_err(|e| format!("could not send: {e}"))
    }

    /// Acknowledges a message from the remote.
    pub(crate) fn ack(&self, received: &Received) -> Result<(), String> {
        let result = match (self, received) {
            (Wire::V5(client, _), Received::V5(publish)) => client.try_ack(publish).map_err(text),
            (Wire::V4(client, _), Received::V4(publish)) => client.try_ack(publish).map_err(text),
            _ => return Ok(()),
        };
        result.map_err(|e| format!("could not acknowledge: {e}"))
    }

    /// Sends DISCONNECT (the broker is stopping).
    pub(crate) fn disconnect(&self) {
        let _ = match self {
            Wire::V5(client, _) => client.try_disconnect().map_err(text),
            Wire::V4(client, _) => client.try_disconnect().map_err(text),
        };
    }
}

fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}

fn qos(qos: WireQoS) -> QoS {
    match qos {
        WireQoS::AtMostOnce => QoS::AtMostOnce,
        WireQoS::AtLeastOnce => QoS::AtLeastOnce,
        WireQoS::ExactlyOnce => QoS::ExactlyOnce,
    }
}

fn wire_qos(qos: QoS) -> WireQoS {
    match qos {
        QoS::AtMostOnce => WireQoS::AtMostOnce,
        QoS::AtLeastOnce => WireQoS::AtLeastOnce,
        QoS::ExactlyOnce => WireQoS::ExactlyOnce,
    }
}

fn qos4(qos: rumqttc::QoS) -> QoS {
    match qos {
        rumqttc::QoS::AtMostOnce => QoS::AtMostOnce,
        rumqttc::QoS::AtLeastOnce => QoS::AtLeastOnce,
        rumqttc::QoS::ExactlyOnce => QoS::ExactlyOnce,
    }
}

fn wire_qos4(qos: QoS) -> rumqttc::QoS {
    match qos {
        QoS::AtMostOnce => rumqttc::QoS::AtMostOnce,
        QoS::AtLeastOnce => rumqttc::QoS::AtLeastOnce,
        QoS::ExactlyOnce => rumqttc::QoS::ExactlyOnce,
    }
}

/// A connection error as a log line a user can act on.
fn describe5(error: &rumqttc::v5::ConnectionError) -> String {
    match error {
        rumqttc::v5::ConnectionError::ConnectionRefused(code) => format!("the remote refused the connection: {code:?}"),
        other => other.to_string(),
    }
}

fn describe4(error: &rumqttc::ConnectionError) -> String {
    match error {
        rumqttc::ConnectionError::ConnectionRefused(code) => format!("the remote refused the connection: {code:?}"),
        other => other.to_string(),
    }
}
