//! XMPP (RFC 6120) clients of a XEP-0060 publish-subscribe service, written for the bench: a
//! TCP stream to the server's domain, SASL, a new stream, resource binding, then `iq`
//! publishes and subscriptions addressed to the service (tolk's `pubsub.<domain>`, or
//! Prosody's `pubsub` component). STARTTLS is not spoken: a server that requires it is refused
//! with a clear error (tolk offers it only with `[tls]`, which benchmarks leave out).
//!
//! SASL: PLAIN with the target's user when it names one; otherwise ANONYMOUS when the server
//! offers it (tolk does when it has no user database), else PLAIN as `bench-<client id>` with
//! password `bench`.
//!
//! Payloads are bytes, XMPP carries XML: each goes base64 in tolk's wrapper
//! `<tolk:Payload xmlns:tolk="urn:tolk:wsn:1" encoding="base64">`, which tolk unwraps into the
//! exact bytes for its other protocols (and wraps again for XMPP subscribers, as text or
//! base64), and which a server that does not know it (Prosody) relays as an opaque item.
//! Topics are node names as they are: tolk's nodes are its topics (subscriptions may hold
//! `+`/`#`), and Prosody takes any string as a node name.
//!
//! A subscription names the connection's full JID, so that notifications reach that connection
//! whatever its presence: Prosody drops headline messages to a bare JID without an available
//! resource, and these clients send no presence.
//!
//! At QoS 0 a publisher writes and goes on; at QoS 1 and 2 up to [`WINDOW`] publishes may wait
//! for their `iq` result, as rumqttc keeps up to 100 MQTT QoS 1 publishes in flight. An `iq`
//! error fails the next publish. XMPP has no delivery acknowledgement: tolk delivers to XMPP
//! subscribers at most once whatever `--qos` says.

mod stream;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use quick_xml::escape::escape;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;
use stream::{Node, STREAMS_NS, StreamReader, describe_error};

/// Time allowed for TCP connect, SASL and binding, and for the subscription's result.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Publishes at QoS 1 or 2 that may wait for their `iq` result at once.
pub const WINDOW: usize = 100;

const CLIENT_NS: &str = "jabber:client";
const TLS_NS: &str = "urn:ietf:params:xml:ns:xmpp-tls";
const SASL_NS: &str = "urn:ietf:params:xml:ns:xmpp-sasl";
const BIND_NS: &str = "urn:ietf:params:xml:ns:xmpp-bind";
const SESSION_NS: &str = "urn:ietf:params:xml:ns:xmpp-session";
const PUBSUB_NS: &str = "http://jabber.org/protocol/pubsub";
const EVENT_NS: &str = "http://jabber.org/protocol/pubsub#event";
const TOLK_NS: &str = "urn:tolk:wsn:1";

/// The end of a client's stream.
const CLOSE: &[u8] = b"</stream:stream>";

/// A stream ready for stanzas: logged in and bound.
struct Stream {
    reader: StreamReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    /// The full JID the server bound.
    jid: String,
}

/// Connects XMPP clients to one server.
#[derive(Debug, Clone)]
pub struct XmppConnector {
    addr: SocketAddr,
    domain: String,
    service: String,
    credentials: Option<(String, String)>,
    /// Largest element read from the server.
    max_stanza: usize,
}

impl XmppConnector {
    /// A connector for `target`, sized for payloads of `payload` bytes (base64 makes them a
    /// third larger).
    pub fn new(target: &Target, payload: usize) -> Self {
        XmppConnector {
            addr: target.addr,
            domain: target.domain.clone(),
            service: target.pubsub_service.clone(),
            credentials: target.credentials.clone(),
            max_stanza: payload.max(1024) / 3 * 4 + 16 * 1024,
        }
    }

    /// TCP connect, stream, SASL, new stream, resource binding (and a session where an older
    /// server still requires one).
    async fn connect(&self, client_id: &str) -> Result<Stream> {
        let handshake = async {
            let socket = TcpStream::connect(self.addr).await?;
            socket.set_nodelay(true)?;
            let (read, mut write) = socket.into_split();
            let mut reader = StreamReader::new(read, self.max_stanza);
            write.write_all(stream_header(&self.domain).as_bytes()).await?;
            let features = expect(&mut reader, "stream features").await?;
            let (mechanism, initial) = self.sasl(client_id, &features)?;
            let auth = format!("<auth xmlns='{SASL_NS}' mechanism='{mechanism}'>{initial}</auth>");
            write.write_all(auth.as_bytes()).await?;
            loop {
                let answer = expect(&mut reader, "the SASL outcome").await?;
                match (answer.ns == SASL_NS, answer.name.as_str()) {
                    (true, "success") => break,
                    (true, "failure") => bail!("SASL {mechanism} refused: {}", describe_error(&answer)),
                    (true, "challenge") => {
                        // An empty initial response is `=` (RFC 6120 §6.4.2).
                        let response = if initial.is_empty() { "=" } else { initial.as_str() };
                        write
                            .write_all(format!("<response xmlns='{SASL_NS}'>{response}</response>").as_bytes())
                            .await?;
                    }
                    _ => bail!("expected the SASL outcome, got <{}/>", answer.name),
                }
            }
            reader.restart();
            write.write_all(stream_header(&self.domain).as_bytes()).await?;
            let features = expect(&mut reader, "stream features after SASL").await?;
            if features.child("bind", BIND_NS).is_none() {
                bail!("the server offers no resource binding");
            }
            let bind = format!(
                "<iq type='set' id='bind'><bind xmlns='{BIND_NS}'><resource>{}</resource></bind></iq>",
                escape(client_id)
            );
            write.write_all(bind.as_bytes()).await?;
            let bound = iq_result(&mut reader, "bind").await?;
            let jid = bound.child("bind", BIND_NS).and_then(|b| b.child("jid", BIND_NS)).map(|j| j.text.trim());
            let jid = jid.filter(|j| !j.is_empty()).context("the bind result names no JID")?.to_owned();
            // RFC 3921's session establishment, which RFC 6121 dropped; a server that still
            // lists it without <optional/> wants it.
            let session = features.child("session", SESSION_NS);
            if session.is_some_and(|s| s.child("optional", SESSION_NS).is_none()) {
                write
                    .write_all(format!("<iq type='set' id='session'><session xmlns='{SESSION_NS}'/></iq>").as_bytes())
                    .await?;
                iq_result(&mut reader, "session").await?;
            }
            Ok(Stream { reader, write, jid })
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .context("XMPP login timed out")?
            .with_context(|| format!("{client_id}: connecting to xmpp://{}", self.addr))
    }

    /// The SASL mechanism to use and its initial response, base64.
    fn sasl(&self, client_id: &str, features: &Node) -> Result<(&'static str, String)> {
        if !features.is("features", STREAMS_NS) {
            bail!("expected stream features, got <{}/>", features.name);
        }
        let offered: Vec<&str> = features
            .child("mechanisms", SASL_NS)
            .map(|m| m.children.iter().filter(|c| c.is("mechanism", SASL_NS)).map(|c| c.text.trim()).collect())
            .unwrap_or_default();
        let plain = |user: &str, password: &str| ("PLAIN", BASE64.encode(format!("\0{user}\0{password}")));
        match &self.credentials {
            Some((user, password)) if offered.contains(&"PLAIN") => Ok(plain(user, password)),
            None if offered.contains(&"ANONYMOUS") => Ok(("ANONYMOUS", String::new())),
            None if offered.contains(&"PLAIN") => Ok(plain(&format!("bench-{client_id}"), "bench")),
            _ if offered.is_empty() && features.child("starttls", TLS_NS).is_some() => {
                bail!("the server offers SASL only after STARTTLS, which tolk-bench does not speak")
            }
            _ => bail!("no SASL mechanism tolk-bench can use among {offered:?}"),
        }
    }
}

/// The client's stream header (RFC 6120 §4.7).
fn stream_header(domain: &str) -> String {
    format!(
        "<?xml version='1.0'?><stream:stream xmlns='{CLIENT_NS}' xmlns:stream='{STREAMS_NS}' to='{}' version='1.0'>",
        escape(domain)
    )
}

/// The next element, which must come.
async fn expect(reader: &mut StreamReader<OwnedReadHalf>, what: &str) -> Result<Node> {
    reader.next().await?.with_context(|| format!("the server closed the stream before {what}"))
}

/// Reads until the answer to the `iq` with `id`: its result, or its error as an `Err`.
async fn iq_result(reader: &mut StreamReader<OwnedReadHalf>, id: &str) -> Result<Node> {
    loop {
        let stanza = expect(reader, &format!("answering iq {id}")).await?;
        if stanza.is("iq", CLIENT_NS) && stanza.attr("id") == Some(id) {
            return match stanza.attr("type") {
                Some("result") => Ok(stanza),
                _ => bail!("iq {id} refused: {}", stanza_error(&stanza)),
            };
        }
    }
}

/// The error of an error stanza, for reports.
fn stanza_error(stanza: &Node) -> String {
    stanza.child("error", CLIENT_NS).map_or_else(|| "error without details".into(), describe_error)
}

/// A publish of `payload` to `node` as `iq` `id`, base64 in tolk's payload wrapper.
fn publish_iq(service: &str, id: u64, node: &str, payload: &[u8]) -> String {
    format!(
        "<iq type='set' to='{}' id='p{id}'><pubsub xmlns='{PUBSUB_NS}'><publish node='{}'><item>\
         <tolk:Payload xmlns:tolk='{TOLK_NS}' encoding='base64'>{}</tolk:Payload></item></publish></pubsub></iq>",
        escape(service),
        escape(node),
        BASE64.encode(payload)
    )
}

/// The bytes an item carries: tolk's wrapper decoded; any other payload element (from a
/// publisher that sent XML) as its text, which the recorder counts as foreign.
fn item_payload(item: &Node) -> Bytes {
    let Some(element) = item.children.first() else { return Bytes::new() };
    if element.is("Payload", TOLK_NS) && element.attr("encoding") == Some("base64") {
        let compact: Vec<u8> = element.text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if let Ok(bytes) = BASE64.decode(compact) {
            return Bytes::from(bytes);
        }
    }
    Bytes::from(element.text.clone().into_bytes())
}

/// The payloads of the items an event notification carries (none for other messages).
fn event_payloads(message: &Node) -> Vec<Bytes> {
    let items = message.child("event", EVENT_NS).and_then(|e| e.child("items", EVENT_NS));
    items.map_or_else(Vec::new, |i| i.children.iter().filter(|c| c.is("item", EVENT_NS)).map(item_payload).collect())
}

/// Reads a connection that only publishes (or only stays alive) until told to stop: `iq`
/// results of publishes give their room in the window back, and the first `iq` error is kept
/// for the next publish to fail with. Returns why the server ended the stream if it did.
fn spawn_reader(
    mut reader: StreamReader<OwnedReadHalf>,
    mut write: Option<OwnedWriteHalf>,
    window: Option<Arc<Semaphore>>,
    refused: Arc<Mutex<Option<String>>>,
) -> Connection {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let end = loop {
            tokio::select! {
                _ = &mut stop_rx => {
                    if let Some(w) = write.as_mut() {
                        let _ = w.write_all(CLOSE).await;
                    }
                    return None;
                }
                stanza = reader.next() => match stanza {
                    Ok(Some(s)) if s.is("iq", CLIENT_NS) && s.attr("id").is_some_and(|id| id.starts_with('p')) => {
                        if s.attr("type") == Some("error") {
                            let why = format!("publish {} refused: {}", s.attr("id").unwrap_or(""), stanza_error(&s));
                            refused.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(why);
                        }
                        if let Some(window) = &window {
                            window.add_permits(1);
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break "stream closed by server".to_owned(),
                    Err(e) => break format!("{e:#}"),
                },
            }
        };
        if let Some(window) = &window {
            window.close();
        }
        refused.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| end.clone());
        Some(end)
    });
    Connection::new(stop_tx, task)
}

/// An XMPP publisher: stanzas go straight to the socket; a reader task takes the answers.
pub struct XmppPublisher {
    write: OwnedWriteHalf,
    service: String,
    next_id: u64,
    /// Room for publishes waiting for their result (QoS 1 and 2 only).
    window: Option<Arc<Semaphore>>,
    /// Why a publish failed, for the next one to report.
    refused: Arc<Mutex<Option<String>>>,
    connection: Connection,
}

impl Publisher for XmppPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        if let Some(why) = self.refused.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bail!("{why}");
        }
        if let Some(window) = &self.window {
            window.acquire().await.map_err(|_| anyhow!("XMPP publisher's connection is gone"))?.forget();
        }
        self.next_id += 1;
        let iq = publish_iq(&self.service, self.next_id, topic, &payload);
        self.write.write_all(iq.as_bytes()).await.context("XMPP publisher's connection is gone")
    }

    async fn close(mut self) -> Option<String> {
        // Stop the reader first: the server closes the stream after ours, and that expected
        // end must not be reported as the server's doing.
        let reason = self.connection.close().await;
        let _ = self.write.write_all(CLOSE).await;
        reason
    }
}

impl Connector for XmppConnector {
    type Publisher = XmppPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<XmppPublisher> {
        let Stream { reader, write, .. } = self.connect(&client_id).await?;
        let window = (qos != Qos::AtMostOnce).then(|| Arc::new(Semaphore::new(WINDOW)));
        let refused = Arc::new(Mutex::new(None));
        let connection = spawn_reader(reader, None, window.clone(), refused.clone());
        Ok(XmppPublisher { write, service: self.service.clone(), next_id: 0, window, refused, connection })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        _qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        let Stream { mut reader, mut write, jid } = self.connect(&client_id).await?;
        let subscribe = format!(
            "<iq type='set' to='{}' id='sub'><pubsub xmlns='{PUBSUB_NS}'><subscribe node='{}' jid='{}'/></pubsub></iq>",
            escape(&self.service),
            escape(&topic),
            escape(&jid)
        );
        write.write_all(subscribe.as_bytes()).await?;
        tokio::time::timeout(HANDSHAKE_TIMEOUT, iq_result(&mut reader, "sub"))
            .await
            .context("no result for the subscription")?
            .with_context(|| format!("{client_id}: subscribing to node {topic} at {}", self.service))?;

        let (tx, deliveries) = mpsc::channel(buffer.max(1));
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stop_rx => {
                        let _ = write.write_all(CLOSE).await;
                        return None;
                    }
                    stanza = reader.next() => match stanza {
                        Ok(Some(s)) if s.is("message", CLIENT_NS) => {
                            let received_ns = clock.now_ns();
                            for payload in event_payloads(&s) {
                                let delivery = Delivery { payload, received_ns };
                                // Waiting for room here stops the socket reads: TCP backpressure.
                                if tx.send(delivery).await.is_err() {
                                    let _ = write.write_all(CLOSE).await;
                                    return None;
                                }
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => return Some("stream closed by server".into()),
                        Err(e) => return Some(format!("{e:#}")),
                    },
                }
            }
        });
        Ok(Subscription { deliveries, connection: Connection::new(stop_tx, task) })
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let Stream { reader, write, .. } = self.connect(&client_id).await?;
        Ok(spawn_reader(reader, Some(write), None, Arc::new(Mutex::new(None))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_payload_comes_back_from_the_item() {
        let payload = crate::payload::Stamp { publisher: 1, seq: 2, sent_ns: 3, due_ns: 3 }.encode(64);
        let iq = publish_iq("pubsub.localhost", 7, "a/b&c", &payload);
        assert!(iq.starts_with("<iq type='set' to='pubsub.localhost' id='p7'>"), "{iq}");
        assert!(iq.contains("<publish node='a/b&amp;c'>"), "{iq}");
        // What a server relays: the wrapper, maybe with another prefix and white space.
        let b64 = BASE64.encode(&payload);
        let wrapped = format!("{}\n{}", &b64[..10], &b64[10..]);
        let payload_node = Node {
            name: "Payload".into(),
            ns: TOLK_NS.into(),
            attrs: vec![("encoding".into(), "base64".into())],
            text: wrapped,
            children: Vec::new(),
        };
        let item = Node { name: "item".into(), ns: EVENT_NS.into(), children: vec![payload_node], ..Node::default() };
        assert_eq!(item_payload(&item), payload);
        let foreign = Node { children: vec![Node { text: "hello".into(), ..Node::default() }], ..Node::default() };
        assert_eq!(&item_payload(&foreign)[..], b"hello");
        assert!(item_payload(&Node::default()).is_empty());
    }

    #[test]
    fn anonymous_is_preferred_without_credentials() {
        let target: Target = "xmpp://127.0.0.1:5222".parse().unwrap();
        let mechanisms = |names: &[&str]| {
            let list = names
                .iter()
                .map(|n| Node { name: "mechanism".into(), ns: SASL_NS.into(), text: (*n).into(), ..Node::default() })
                .collect();
            let mechanisms = Node { name: "mechanisms".into(), ns: SASL_NS.into(), children: list, ..Node::default() };
            Node { name: "features".into(), ns: STREAMS_NS.into(), children: vec![mechanisms], ..Node::default() }
        };
        let anonymous = XmppConnector::new(&target, 64);
        assert_eq!(anonymous.sasl("c1", &mechanisms(&["PLAIN", "ANONYMOUS"])).unwrap(), ("ANONYMOUS", String::new()));
        let (mechanism, initial) = anonymous.sasl("c1", &mechanisms(&["SCRAM-SHA-1", "PLAIN"])).unwrap();
        assert_eq!((mechanism, BASE64.decode(initial).unwrap()), ("PLAIN", b"\0bench-c1\0bench".to_vec()));
        assert!(anonymous.sasl("c1", &mechanisms(&["SCRAM-SHA-1"])).is_err());
        let named = XmppConnector::new(&"xmpp://bench:pw@127.0.0.1".parse().unwrap(), 64);
        let (mechanism, initial) = named.sasl("c1", &mechanisms(&["PLAIN", "ANONYMOUS"])).unwrap();
        assert_eq!((mechanism, BASE64.decode(initial).unwrap()), ("PLAIN", b"\0bench\0pw".to_vec()));
    }
}
