//! The protocol-client abstraction: what a scenario needs from a protocol (connect a publisher,
//! subscribe, hold an idle connection), so every scenario runs unchanged over each of tolk's
//! six protocols (MQTT, MQTT-SN, STOMP, AMQP 0.9.1, WS-Notification, XMPP) and across any two
//! of them. Topics are given in tolk's canonical MQTT form (`bench/run/t`); each client maps them
//! to its own destination syntax.

pub mod amqp;
pub mod mqtt;
pub mod mqttsn;
pub mod stomp;
pub mod wsn;
pub mod xmpp;

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use amqp::{AmqpConnector, AmqpPublisher};
use mqtt::{MqttConnector, MqttPublisher};
use mqttsn::{MqttSnConnector, MqttSnPublisher};
use stomp::{StompConnector, StompPublisher};
use wsn::{WsnConnector, WsnPublisher};
use xmpp::{XmppConnector, XmppPublisher};

/// How long a closing client may take to say goodbye before its task is aborted.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Which protocol a target URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// MQTT 3.1.1 over TCP (`mqtt://host:port`, default port 1883).
    Mqtt,
    /// MQTT-SN 1.2 over UDP (`mqttsn://host:port`, default port 1884).
    MqttSn,
    /// STOMP 1.2 over TCP (`stomp://host:port`, default port 61613).
    Stomp,
    /// AMQP 0.9.1 over TCP (`amqp://host:port`, default port 5672), via `amq.topic`.
    Amqp,
    /// WS-Notification over HTTP (`wsn://host:port/path`, default port 8080 and path `/wsn`).
    Wsn,
    /// XMPP publish-subscribe (XEP-0060) over a client stream (`xmpp://host:port`, default
    /// port 5222).
    Xmpp,
}

impl Protocol {
    /// The URL scheme, also used as the protocol's name in reports.
    pub fn scheme(self) -> &'static str {
        match self {
            Protocol::Mqtt => "mqtt",
            Protocol::MqttSn => "mqttsn",
            Protocol::Stomp => "stomp",
            Protocol::Amqp => "amqp",
            Protocol::Wsn => "wsn",
            Protocol::Xmpp => "xmpp",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Protocol::Mqtt => 1883,
            Protocol::MqttSn => 1884,
            Protocol::Stomp => 61613,
            Protocol::Amqp => 5672,
            Protocol::Wsn => 8080,
            Protocol::Xmpp => 5222,
        }
    }
}

/// Every scheme `--target` accepts, for error messages.
const SCHEMES: &str = "mqtt, mqttsn, stomp, amqp, wsn, xmpp";

/// Where tolk serves WS-Notification on its HTTP port unless configured otherwise.
const DEFAULT_WSN_PATH: &str = "/wsn";

/// The XMPP domain tolk serves unless configured otherwise (`[xmpp] domain`).
const DEFAULT_XMPP_DOMAIN: &str = "localhost";

/// A broker endpoint: protocol plus socket address, from `--target`.
#[derive(Debug, Clone)]
pub struct Target {
    /// Protocol spoken there.
    pub protocol: Protocol,
    /// Host as written, kept for clients that want a name rather than an address.
    pub host: String,
    /// TCP (or UDP) port.
    pub port: u16,
    /// First resolved address, used to wait for a spawned broker.
    pub addr: SocketAddr,
    /// HTTP path of a WS-N endpoint (from `/`); empty for the other protocols.
    pub path: String,
    /// STOMP only (`?destinations=dotted`): name topics `/topic/a.b.c` with `*` for one level,
    /// as RabbitMQ's STOMP plugin requires (it refuses slashes after `/topic/`). tolk takes
    /// `/topic/a/b/c`, the form that reaches the same topic from its other protocols.
    pub dotted_destinations: bool,
    /// MQTT and XMPP (`mqtt://user:password@host:port`): the user every connection logs in as.
    pub credentials: Option<(String, String)>,
    /// XMPP only (`?domain=`): the domain streams are opened to, the server's name for itself
    /// (tolk's `[xmpp] domain`, `localhost` by default); empty for the other protocols.
    pub domain: String,
    /// XMPP only (`?service=`): the JID of the publish-subscribe service, `pubsub.<domain>`
    /// unless given (tolk's, and the usual name of Prosody's component); empty otherwise.
    pub pubsub_service: String,
}

impl Target {
    /// Whether the broker answers there yet: a TCP connection is accepted, or, for MQTT-SN
    /// over UDP, a gateway answers SEARCHGW.
    pub async fn answers(&self) -> bool {
        match self.protocol {
            Protocol::MqttSn => mqttsn::gateway_answers(self.addr).await,
            _ => tokio::net::TcpStream::connect(self.addr).await.is_ok(),
        }
    }
}

impl std::str::FromStr for Target {
    type Err = anyhow::Error;

    fn from_str(url: &str) -> Result<Self> {
        let (scheme, rest) = url.split_once("://").context("target must look like mqtt://host:port")?;
        let protocol = match scheme {
            "mqtt" | "tcp" => Protocol::Mqtt,
            "mqttsn" => Protocol::MqttSn,
            "stomp" => Protocol::Stomp,
            "amqp" => Protocol::Amqp,
            "wsn" => Protocol::Wsn,
            "xmpp" => Protocol::Xmpp,
            other => bail!("unsupported protocol `{other}` (supported: {SCHEMES})"),
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut dotted_destinations = false;
        let (mut domain, mut pubsub_service) = (String::new(), String::new());
        for option in query.split('&').filter(|o| !o.is_empty()) {
            match (protocol, option.split_once('=').unwrap_or((option, ""))) {
                (Protocol::Stomp, ("destinations", "dotted")) => dotted_destinations = true,
                (Protocol::Stomp, ("destinations", "slashed")) => dotted_destinations = false,
                (Protocol::Xmpp, ("domain", name)) if !name.is_empty() => domain = name.to_owned(),
                (Protocol::Xmpp, ("service", jid)) if !jid.is_empty() => pubsub_service = jid.to_owned(),
                _ => bail!(
                    "unknown option `{option}` in {url} (STOMP targets take ?destinations=dotted, XMPP \
                     targets ?domain=NAME&service=JID)"
                ),
            }
        }
        if protocol == Protocol::Xmpp {
            if domain.is_empty() {
                domain = DEFAULT_XMPP_DOMAIN.to_owned();
            }
            if pubsub_service.is_empty() {
                pubsub_service = format!("pubsub.{domain}");
            }
        }
        let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        let (credentials, authority) = match authority.rsplit_once('@') {
            Some((userinfo, host)) if matches!(protocol, Protocol::Mqtt | Protocol::Xmpp) => {
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                (Some((user.to_owned(), password.to_owned())), host)
            }
            Some(_) => bail!("only mqtt and xmpp targets take a user (mqtt://user:password@host:port): {url}"),
            None => (None, authority),
        };
        let path = match (protocol, path.trim_end_matches('/')) {
            (Protocol::Wsn, "") => DEFAULT_WSN_PATH.to_string(),
            (Protocol::Wsn, path) => path.to_string(),
            (_, "") => String::new(),
            (_, path) => bail!("{scheme} targets take no path, but {url} has {path}"),
        };
        let (host, port) = match authority.rsplit_once(':').filter(|(_, p)| !p.contains(']')) {
            Some((h, p)) => (h, p.parse().with_context(|| format!("bad port in {url}"))?),
            None => (authority, protocol.default_port()),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .next()
            .with_context(|| format!("{host} resolves to no address"))?;
        Ok(Target { protocol, host, port, addr, path, dotted_destinations, credentials, domain, pubsub_service })
    }
}

/// Delivery guarantee asked of the broker, in MQTT's terms; other protocols map it to their
/// nearest equivalent (STOMP ack:auto vs client-individual, AMQP no-ack vs ack, MQTT-SN QoS 0
/// or 1). WS-N has none to choose: Notify and push are at-most-once in tolk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(clippy::enum_variant_names, reason = "the names are MQTT's own (MQTT 3.1.1 section 4.3)")]
pub enum Qos {
    /// QoS 0.
    AtMostOnce,
    /// QoS 1.
    AtLeastOnce,
    /// QoS 2.
    ExactlyOnce,
}

impl Qos {
    /// From the `--qos` number.
    pub fn from_level(level: u8) -> Result<Self> {
        Ok(match level {
            0 => Qos::AtMostOnce,
            1 => Qos::AtLeastOnce,
            2 => Qos::ExactlyOnce,
            n => bail!("--qos must be 0, 1 or 2, not {n}"),
        })
    }
}

/// One message as a subscriber received it.
#[derive(Debug)]
pub struct Delivery {
    /// The payload, as sent.
    pub payload: Bytes,
    /// When the client library handed it over, ns since the run started; taken in the client's
    /// own task, before any queueing inside the bench.
    pub received_ns: u64,
}

/// A connection driven by its own task; closing it says the protocol's goodbye.
#[derive(Debug)]
pub struct Connection {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Option<String>>,
}

impl Connection {
    /// Wraps a client task. The task must end soon after `stop` fires, and return
    /// `Some(reason)` when it ended because the broker closed or broke the connection.
    pub fn new(stop: oneshot::Sender<()>, task: JoinHandle<Option<String>>) -> Self {
        Connection { stop: Some(stop), task }
    }

    /// Closes the connection and tells why it had ended if the broker ended it first.
    pub async fn close(mut self) -> Option<String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout(CLOSE_TIMEOUT, &mut self.task).await {
            Ok(Ok(reason)) => reason,
            Ok(Err(e)) => Some(format!("client task failed: {e}")),
            Err(_) => {
                self.task.abort();
                None
            }
        }
    }
}

/// A subscribed connection: deliveries arrive on a bounded channel. A subscriber that reads
/// the channel slowly stops its client task, which stops reading the socket, so the broker
/// sees real TCP backpressure.
#[derive(Debug)]
pub struct Subscription {
    /// Deliveries in arrival order; closed when the connection ends.
    pub deliveries: mpsc::Receiver<Delivery>,
    /// The connection itself.
    pub connection: Connection,
}

impl Subscription {
    /// Stops delivering and closes; returns the reason if the broker had ended it first.
    pub async fn close(self) -> Option<String> {
        // Dropping the receiver first unblocks a client task waiting for room in the channel.
        drop(self.deliveries);
        self.connection.close().await
    }
}

/// A connected publisher.
pub trait Publisher: Send + 'static {
    /// Publishes one message; returns once the client accepted it (the client's own buffering
    /// is what makes a closed-loop publisher wait for the network).
    fn publish(&mut self, topic: &str, payload: Bytes) -> impl Future<Output = Result<()>> + Send;

    /// Does what the first publish to `topic` would do besides publishing (MQTT-SN's REGISTER
    /// round trip), so that a scenario timing its publishes can do it while connecting. Most
    /// protocols need nothing.
    fn prepare(&mut self, _topic: &str) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }

    /// Disconnects; returns the reason if the broker had closed the connection first.
    fn close(self) -> impl Future<Output = Option<String>> + Send;
}

/// A protocol's client factory for one target.
pub trait Connector: Clone + Send + Sync + 'static {
    /// This protocol's publisher.
    type Publisher: Publisher;

    /// Connects a publisher that sends with the given guarantee.
    fn publisher(&self, client_id: String, qos: Qos) -> impl Future<Output = Result<Self::Publisher>> + Send;

    /// Connects and subscribes to `topic` (canonical form, may hold `+`/`#`); returns once the
    /// broker confirmed the subscription, so no message published afterwards can be missed.
    /// `buffer` bounds the deliveries held between the client and the scenario.
    fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> impl Future<Output = Result<Subscription>> + Send;

    /// Opens a connection that does nothing but stay alive.
    fn idle(&self, client_id: String) -> impl Future<Output = Result<Connection>> + Send;
}

/// Any protocol's connector, chosen at run time from a target URL. Scenarios are generic over
/// [`Connector`], but dispatching here keeps one instantiation per scenario however many
/// protocols exist: a new protocol adds one variant, not one arm per protocol pair.
#[derive(Debug, Clone)]
pub enum AnyConnector {
    /// MQTT.
    Mqtt(MqttConnector),
    /// STOMP.
    Stomp(StompConnector),
    /// AMQP 0.9.1.
    Amqp(AmqpConnector),
    /// MQTT-SN 1.2.
    MqttSn(MqttSnConnector),
    /// WS-Notification.
    Wsn(WsnConnector),
    /// XMPP publish-subscribe.
    Xmpp(XmppConnector),
}

impl AnyConnector {
    /// The connector for `target`'s protocol, sized for payloads of `payload` bytes.
    pub fn for_target(target: &Target, payload: usize) -> Self {
        match target.protocol {
            Protocol::Mqtt => AnyConnector::Mqtt(MqttConnector::new(target, payload)),
            Protocol::Stomp => AnyConnector::Stomp(StompConnector::new(target, payload)),
            Protocol::Amqp => AnyConnector::Amqp(AmqpConnector::new(target)),
            Protocol::MqttSn => AnyConnector::MqttSn(MqttSnConnector::new(target, payload)),
            Protocol::Wsn => AnyConnector::Wsn(WsnConnector::new(target)),
            Protocol::Xmpp => AnyConnector::Xmpp(XmppConnector::new(target, payload)),
        }
    }
}

/// Any protocol's publisher.
pub enum AnyPublisher {
    /// MQTT.
    Mqtt(MqttPublisher),
    /// STOMP.
    Stomp(StompPublisher),
    /// AMQP 0.9.1; boxed because its message properties make it several times the size of the
    /// others.
    Amqp(Box<AmqpPublisher>),
    /// MQTT-SN 1.2.
    MqttSn(MqttSnPublisher),
    /// WS-Notification.
    Wsn(WsnPublisher),
    /// XMPP publish-subscribe.
    Xmpp(XmppPublisher),
}

impl Publisher for AnyPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        match self {
            AnyPublisher::Mqtt(p) => p.publish(topic, payload).await,
            AnyPublisher::Stomp(p) => p.publish(topic, payload).await,
            AnyPublisher::Amqp(p) => p.publish(topic, payload).await,
            AnyPublisher::MqttSn(p) => p.publish(topic, payload).await,
            AnyPublisher::Wsn(p) => p.publish(topic, payload).await,
            AnyPublisher::Xmpp(p) => p.publish(topic, payload).await,
        }
    }

    async fn prepare(&mut self, topic: &str) -> Result<()> {
        match self {
            AnyPublisher::Mqtt(p) => p.prepare(topic).await,
            AnyPublisher::Stomp(p) => p.prepare(topic).await,
            AnyPublisher::Amqp(p) => p.prepare(topic).await,
            AnyPublisher::MqttSn(p) => p.prepare(topic).await,
            AnyPublisher::Wsn(p) => p.prepare(topic).await,
            AnyPublisher::Xmpp(p) => p.prepare(topic).await,
        }
    }

    async fn close(self) -> Option<String> {
        match self {
            AnyPublisher::Mqtt(p) => p.close().await,
            AnyPublisher::Stomp(p) => p.close().await,
            AnyPublisher::Amqp(p) => (*p).close().await,
            AnyPublisher::MqttSn(p) => p.close().await,
            AnyPublisher::Wsn(p) => p.close().await,
            AnyPublisher::Xmpp(p) => p.close().await,
        }
    }
}

impl Connector for AnyConnector {
    type Publisher = AnyPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<AnyPublisher> {
        Ok(match self {
            AnyConnector::Mqtt(c) => AnyPublisher::Mqtt(c.publisher(client_id, qos).await?),
            AnyConnector::Stomp(c) => AnyPublisher::Stomp(c.publisher(client_id, qos).await?),
            AnyConnector::Amqp(c) => AnyPublisher::Amqp(Box::new(c.publisher(client_id, qos).await?)),
            AnyConnector::MqttSn(c) => AnyPublisher::MqttSn(c.publisher(client_id, qos).await?),
            AnyConnector::Wsn(c) => AnyPublisher::Wsn(c.publisher(client_id, qos).await?),
            AnyConnector::Xmpp(c) => AnyPublisher::Xmpp(c.publisher(client_id, qos).await?),
        })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        match self {
            AnyConnector::Mqtt(c) => c.subscribe(client_id, topic, qos, clock, buffer).await,
            AnyConnector::Stomp(c) => c.subscribe(client_id, topic, qos, clock, buffer).await,
            AnyConnector::Amqp(c) => c.subscribe(client_id, topic, qos, clock, buffer).await,
            AnyConnector::MqttSn(c) => c.subscribe(client_id, topic, qos, clock, buffer).await,
            AnyConnector::Wsn(c) => c.subscribe(client_id, topic, qos, clock, buffer).await,
            AnyConnector::Xmpp(c) => c.subscribe(client_id, topic, qos, clock, buffer).await,
        }
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        match self {
            AnyConnector::Mqtt(c) => c.idle(client_id).await,
            AnyConnector::Stomp(c) => c.idle(client_id).await,
            AnyConnector::Amqp(c) => c.idle(client_id).await,
            AnyConnector::MqttSn(c) => c.idle(client_id).await,
            AnyConnector::Wsn(c) => c.idle(client_id).await,
            AnyConnector::Xmpp(c) => c.idle(client_id).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_targets_take_a_user() {
        let t: Target = "mqtt://bench:s3cret@127.0.0.1:1999".parse().unwrap();
        assert_eq!(t.credentials, Some(("bench".to_owned(), "s3cret".to_owned())));
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 1999));
        assert!("stomp://u:p@127.0.0.1".parse::<Target>().is_err());
        let t: Target = "xmpp://bench:pw@127.0.0.1".parse().unwrap();
        assert_eq!((t.credentials, t.port), (Some(("bench".to_owned(), "pw".to_owned())), 5222));
    }

    #[test]
    fn xmpp_targets_take_a_domain_and_a_service() {
        let t: Target = "xmpp://127.0.0.1:15222".parse().unwrap();
        assert_eq!((t.domain.as_str(), t.pubsub_service.as_str(), t.port), ("localhost", "pubsub.localhost", 15222));
        let t: Target = "xmpp://127.0.0.1?domain=example.org".parse().unwrap();
        assert_eq!((t.domain.as_str(), t.pubsub_service.as_str()), ("example.org", "pubsub.example.org"));
        let t: Target = "xmpp://127.0.0.1?service=ps.example.org&domain=example.org".parse().unwrap();
        assert_eq!((t.domain.as_str(), t.pubsub_service.as_str()), ("example.org", "ps.example.org"));
        assert!("xmpp://127.0.0.1?destinations=dotted".parse::<Target>().is_err());
        assert!("stomp://127.0.0.1?domain=x".parse::<Target>().is_err());
        assert!("xmpp://127.0.0.1/path".parse::<Target>().is_err());
        assert!("mqtt://127.0.0.1".parse::<Target>().unwrap().domain.is_empty());
    }

    #[test]
    fn stomp_targets_take_a_destination_style() {
        let t: Target = "stomp://127.0.0.1:61613?destinations=dotted".parse().unwrap();
        assert!(t.dotted_destinations);
        assert_eq!(t.port, 61613);
        assert!(!"stomp://127.0.0.1".parse::<Target>().unwrap().dotted_destinations);
        assert!("mqtt://127.0.0.1?destinations=dotted".parse::<Target>().is_err());
        assert!("stomp://127.0.0.1?colour=blue".parse::<Target>().is_err());
    }

    #[test]
    fn targets_parse_with_and_without_port() {
        let t: Target = "mqtt://127.0.0.1:1999".parse().unwrap();
        assert_eq!((t.protocol, t.host.as_str(), t.port, t.path.as_str()), (Protocol::Mqtt, "127.0.0.1", 1999, ""));
        let t: Target = "mqtt://127.0.0.1/".parse().unwrap();
        assert_eq!(t.port, 1883);
        for (url, protocol, port) in [
            ("mqttsn://127.0.0.1", Protocol::MqttSn, 1884),
            ("stomp://127.0.0.1", Protocol::Stomp, 61613),
            ("amqp://127.0.0.1", Protocol::Amqp, 5672),
            ("wsn://127.0.0.1", Protocol::Wsn, 8080),
            ("xmpp://127.0.0.1", Protocol::Xmpp, 5222),
        ] {
            let t: Target = url.parse().unwrap();
            assert_eq!((t.protocol, t.port), (protocol, port), "{url}");
            assert_eq!(t.protocol.scheme(), url.split_once(':').unwrap().0);
        }
        let error = "amqp-ish://x".parse::<Target>().unwrap_err().to_string();
        assert!(error.contains("mqtt, mqttsn, stomp, amqp, wsn, xmpp"), "{error}");
        assert!("127.0.0.1:1883".parse::<Target>().is_err());
    }

    #[test]
    fn only_wsn_targets_have_a_path() {
        let t: Target = "wsn://127.0.0.1:9080".parse().unwrap();
        assert_eq!((t.port, t.path.as_str()), (9080, "/wsn"));
        let t: Target = "wsn://[::1]:9080/broker/ws-n/".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("::1", 9080, "/broker/ws-n"));
        let t: Target = "wsn://[::1]".parse().unwrap();
        assert_eq!(t.port, 8080);
        assert!("mqttsn://127.0.0.1:1884/x".parse::<Target>().is_err());
    }
}
