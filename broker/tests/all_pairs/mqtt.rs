//! MQTT 5 through rumqttc. Reconnect = DISCONNECT, then CONNECT again with Clean Start off: the
//! session (Session Expiry Interval 300 s from the first CONNECT) kept the subscription and the
//! QoS 1 messages published meanwhile, and CONNACK says Session Present.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Packet, PublishProperties, SubscribeReasonCode};
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use tokio::sync::mpsc;

use super::{BoxFuture, Outgoing, PubSub, Received, Subscription, WAIT};

type Events = mpsc::UnboundedReceiver<Result<Event, String>>;

pub struct Mqtt {
    addr: SocketAddr,
    id: String,
    client: AsyncClient,
    events: Events,
    task: tokio::task::JoinHandle<()>,
}

async fn open(
    addr: SocketAddr,
    id: &str,
    clean_start: bool,
) -> (AsyncClient, Events, tokio::task::JoinHandle<()>, bool) {
    let mut options = MqttOptions::new(id, addr.ip().to_string(), addr.port());
    options.set_keep_alive(Duration::from_secs(30));
    options.set_clean_start(clean_start);
    options.set_session_expiry_interval(Some(300));
    // rumqttc refuses incoming packets over 10 KiB unless told (and then advertises) a maximum.
    options.set_max_packet_size(Some(1024 * 1024));
    let (client, mut eventloop) = AsyncClient::new(options, 64);
    let (tx, mut events) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let event = eventloop.poll().await.map_err(|e| e.to_string());
            let end = event.is_err();
            if tx.send(event).is_err() || end {
                return;
            }
        }
    });
    let present = loop {
        match tokio::time::timeout(WAIT, events.recv()).await.expect("MQTT CONNACK in time") {
            Some(Ok(Event::Incoming(Packet::ConnAck(ack)))) => break ack.session_present,
            Some(Ok(_)) => {}
            other => panic!("MQTT connection failed: {other:?}"),
        }
    };
    (client, events, task, present)
}

impl Mqtt {
    pub async fn connect(addr: SocketAddr, id: &str) -> Mqtt {
        let (client, events, task, _) = open(addr, id, true).await;
        Mqtt { addr, id: id.to_owned(), client, events, task }
    }

    /// The next incoming packet `pick` accepts; others are skipped. `None` after `timeout`.
    async fn next<T>(&mut self, timeout: Duration, mut pick: impl FnMut(&Packet) -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => return None,
                Ok(Some(Ok(Event::Incoming(packet)))) => {
                    if let Some(t) = pick(&packet) {
                        return Some(t);
                    }
                }
                Ok(Some(Ok(Event::Outgoing(_)))) => {}
                Ok(other) => panic!("MQTT connection ended: {other:?}"),
            }
        }
    }
}

fn qos(at_least_once: bool) -> QoS {
    if at_least_once { QoS::AtLeastOnce } else { QoS::AtMostOnce }
}

impl PubSub for Mqtt {
    fn subscribe<'a>(&'a mut self, s: Subscription<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.client.subscribe(s.filter, qos(s.at_least_once)).await.unwrap();
            let codes = self
                .next(WAIT, |p| if let Packet::SubAck(a) = p { Some(a.return_codes.clone()) } else { None })
                .await
                .expect("MQTT SUBACK in time");
            assert!(matches!(codes[..], [SubscribeReasonCode::Success(_)]), "MQTT SUBACK {codes:?}");
        })
    }

    fn publish<'a>(&'a mut self, m: &'a Outgoing) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let properties = PublishProperties {
                content_type: m.content_type.clone(),
                user_properties: m.header.iter().cloned().collect(),
                correlation_data: m.correlation.clone().map(Bytes::from),
                response_topic: m.reply_to.clone(),
                message_expiry_interval: m.expiry.map(|d| u32::try_from(d.as_secs()).unwrap()),
                ..PublishProperties::default()
            };
            self.client
                .publish_with_properties(m.topic.as_str(), qos(m.at_least_once), false, m.payload.clone(), properties)
                .await
                .unwrap();
            if m.at_least_once {
                self.next(WAIT, |p| matches!(p, Packet::PubAck(_)).then_some(())).await.expect("MQTT PUBACK in time");
            }
        })
    }

    fn next_message(&mut self, timeout: Duration) -> BoxFuture<'_, Option<Received>> {
        Box::pin(async move {
            // rumqttc acknowledges QoS 1 deliveries itself.
            let publish =
                self.next(timeout, |p| if let Packet::Publish(p) = p { Some(p.clone()) } else { None }).await?;
            let properties = publish.properties.unwrap_or_default();
            Some(Received {
                topic: String::from_utf8(publish.topic.to_vec()).expect("MQTT topic is UTF-8"),
                payload: publish.payload,
                content_type: properties.content_type,
                headers: properties.user_properties,
                at_least_once: Some(publish.qos != QoS::AtMostOnce),
                correlation: properties.correlation_data.map(|c| String::from_utf8_lossy(&c).into_owned()),
                reply_to: properties.response_topic,
                expires_in: properties.message_expiry_interval.map(|s| Duration::from_secs(u64::from(s))),
            })
        })
    }

    fn disconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.client.disconnect().await.unwrap();
            // The event loop ends once the broker closed the connection.
            let deadline = tokio::time::Instant::now() + WAIT;
            while let Some(Ok(_)) =
                tokio::time::timeout_at(deadline, self.events.recv()).await.expect("MQTT close in time")
            {}
        })
    }

    fn reconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.task.abort();
            let (client, events, task, present) = open(self.addr, &self.id, false).await;
            assert!(present, "MQTT CONNACK after reconnect: Session Present is 0, the session was lost");
            (self.client, self.events, self.task) = (client, events, task);
        })
    }

    fn own_terms(&self, topic: &str) -> String {
        topic.to_owned()
    }
}

impl Drop for Mqtt {
    fn drop(&mut self) {
        self.task.abort();
    }
}
