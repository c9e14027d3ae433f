//! WS-Notification: raw SOAP 1.1 over a hyper-util client. Publishing is a Notify to the broker;
//! subscribing is a Subscribe whose consumer is either a real HTTP endpoint (push) or a pull
//! point (for a subscription that survives the consumer going away). Reconnect = the consumer
//! stops asking (a new HTTP client, the old connections dropped) and comes back to the same pull
//! point with GetMessages, which hands over what it buffered meanwhile.
//!
//! Notifications are read with quick-xml, namespaces resolved, and the payload unwrapped by the
//! rules of docs/translation.md: a `tolk:Payload` wrapper gives its bytes (text or base64) and
//! its `contentType`; any other element is the payload itself, as XML.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{Request, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::{Namespace, QName, ResolveResult};
use tokio::sync::mpsc;

use super::{BoxFuture, Outgoing, PubSub, Received, Subscription, WSN_NAMESPACE, within};

const WSNT: &str = "http://docs.oasis-open.org/wsn/b-2";
const WSA: &str = "http://www.w3.org/2005/08/addressing";
const TOLK: &str = "urn:tolk:wsn:1";
const SIMPLE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple";
const CONCRETE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete";
const FULL: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full";

type Http = Client<HttpConnector, Full<Bytes>>;

enum Consumer {
    None,
    /// A consumer endpoint; each POST body arrives on the channel.
    Push {
        posts: mpsc::UnboundedReceiver<String>,
        _stop: tokio::sync::oneshot::Sender<()>,
    },
    /// A pull point at this address.
    Pull(String),
}

pub struct Wsn {
    broker: String,
    http: Http,
    consumer: Consumer,
    pending: VecDeque<Received>,
}

fn http() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsa="{WSA}" xmlns:wsnt="{WSNT}"><s:Header/><s:Body>{body}</s:Body></s:Envelope>"#
    )
}

/// Escapes text for element content and attribute values; CR as a character reference so that
/// it survives end-of-line normalisation.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// A topic level as an XML name (translation.md: levels that are not XML names use the
/// `_xHHHH_` escape). ASCII only, which is all the matrix uses.
fn encode_level(level: &str) -> String {
    let mut out = String::new();
    for (i, c) in level.chars().enumerate() {
        let start = c.is_ascii_alphabetic() || c == '_';
        if start || (i > 0 && (c.is_ascii_digit() || c == '-' || c == '.')) {
            out.push(c);
        } else {
            out.push_str(&format!("_x{:04X}_", c as u32));
        }
    }
    out
}

fn encode_path(topic: &str) -> String {
    topic.split('/').map(encode_level).collect::<Vec<_>>().join("/")
}

/// The canonical topic as a Simple (one level) or Concrete expression in [`WSN_NAMESPACE`].
fn topic_expression(topic: &str) -> (&'static str, String) {
    (if topic.contains('/') { CONCRETE } else { SIMPLE }, format!("tns:{}", encode_path(topic)))
}

/// A canonical filter as a topic expression: exact → Simple/Concrete, `+` → Full `*`, trailing
/// `#` → Full `//.` (translation.md "Topics and destinations").
fn filter_expression(filter: &str) -> (&'static str, String) {
    if !filter.contains(['+', '#']) {
        return topic_expression(filter);
    }
    let mut text = String::from("tns:");
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        match *level {
            "#" => text.push_str("//."),
            level => {
                if i > 0 {
                    text.push('/');
                }
                text.push_str(&if level == "+" { "*".to_owned() } else { encode_level(level) });
            }
        }
    }
    (FULL, text)
}

/// Whether a content type says no more than "XML" (`application/xml`, `text/xml`).
fn is_generic_xml(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/xml" || essence == "text/xml"
}

/// The element carrying `payload` in `wsnt:Message` (translation.md "Payloads"): an XML element
/// as is when nothing more specific than XML is known about it, else the tolk wrapper with the
/// content type.
fn message_element(payload: &[u8], content_type: Option<&str>) -> String {
    let xml = content_type.is_none_or(is_generic_xml);
    let content_type = content_type.map(|c| format!(r#" contentType="{}""#, escape(c))).unwrap_or_default();
    match std::str::from_utf8(payload) {
        Ok(text) if xml && text.starts_with('<') => text.to_owned(),
        Ok(text) if !text.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')) => {
            format!(
                r#"<tolk:Payload xmlns:tolk="{TOLK}" encoding="text"{content_type}>{}</tolk:Payload>"#,
                escape(text)
            )
        }
        _ => format!(
            r#"<tolk:Payload xmlns:tolk="{TOLK}" encoding="base64"{content_type}>{}</tolk:Payload>"#,
            base64_encode(payload)
        ),
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Vec<u8> {
    let digits: Vec<u32> = text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .map(|b| B64.iter().position(|c| *c == b).unwrap_or_else(|| panic!("not base64: {text}")) as u32)
        .collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, d)| n | d << (18 - 6 * i));
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

fn namespace(resolved: &ResolveResult<'_>) -> Option<String> {
    match resolved {
        ResolveResult::Bound(Namespace(ns)) => Some((*ns).to_owned()),
        _ => None,
    }
}

fn attribute(start: &quick_xml::events::BytesStart<'_>, name: &str) -> Option<String> {
    start
        .try_get_attribute(name)
        .expect("well-formed attributes")
        .map(|a| a.normalized_value(quick_xml::XmlVersion::Implicit1_0).unwrap().into_owned())
}

/// Every NotificationMessage in a Notify or GetMessagesResponse: (topic as `{namespace}path`,
/// its dialect, the raw content of `wsnt:Message`).
fn notifications(doc: &str) -> Vec<(String, String, String)> {
    let mut reader = NsReader::from_str(doc);
    let mut found = Vec::new();
    let mut topic: Option<(String, String)> = None;
    loop {
        let (ns, event) = reader.read_resolved_event().unwrap_or_else(|e| panic!("WS-N: bad XML ({e}): {doc}"));
        let ns = namespace(&ns);
        match event {
            Event::Start(start) if ns.as_deref() == Some(WSNT) && start.local_name().as_ref() == "Topic" => {
                let dialect = attribute(&start, "Dialect").expect("Topic has a Dialect");
                let Event::Text(text) = reader.read_event().unwrap() else { panic!("WS-N: Topic without text: {doc}") };
                let text = text.trim().to_owned();
                let path = text.split_once(':').map_or(text.as_str(), |(_, path)| path);
                let ns = namespace(&reader.resolver().resolve_prefix(QName(&text).prefix(), true));
                let ns = ns.unwrap_or_default();
                topic = Some((format!("{{{ns}}}{path}"), dialect));
            }
            Event::Start(start) if ns.as_deref() == Some(WSNT) && start.local_name().as_ref() == "Message" => {
                let span = reader.read_to_end(start.name()).unwrap();
                let inner = doc[span.start as usize..span.end as usize].trim().to_owned();
                let (topic, dialect) = topic.take().unwrap_or_else(|| panic!("WS-N: Message before its Topic: {doc}"));
                found.push((topic, dialect, inner));
            }
            Event::Eof => return found,
            _ => {}
        }
    }
}

/// Unwraps the content of `wsnt:Message` per translation.md: (payload, content type).
fn unwrap_payload(element: &str) -> (Bytes, Option<String>) {
    let mut reader = NsReader::from_str(element);
    loop {
        let (ns, event) =
            reader.read_resolved_event().unwrap_or_else(|e| panic!("WS-N: bad payload XML ({e}): {element}"));
        let is_wrapper = namespace(&ns).as_deref() == Some(TOLK);
        match event {
            Event::Start(start) | Event::Empty(start) if !is_wrapper || start.local_name().as_ref() != "Payload" => {
                return (Bytes::copy_from_slice(element.as_bytes()), Some("application/xml".to_owned()));
            }
            Event::Start(start) => {
                let encoding = attribute(&start, "encoding");
                let content_type = attribute(&start, "contentType");
                let span = reader.read_to_end(start.name()).unwrap();
                let raw = &element[span.start as usize..span.end as usize];
                let text = quick_xml::escape::unescape(raw).expect("escaped text").into_owned();
                let bytes = match encoding.as_deref() {
                    Some("text") => text.into_bytes(),
                    Some("base64") => base64_decode(&text),
                    other => panic!("WS-N: tolk:Payload encoding {other:?}: {element}"),
                };
                return (Bytes::from(bytes), content_type);
            }
            Event::Empty(start) => return (Bytes::new(), attribute(&start, "contentType")),
            Event::Eof => panic!("WS-N: empty wsnt:Message"),
            _ => {}
        }
    }
}

/// The text of the first element `{ns}local` in `doc`.
fn first_text(doc: &str, ns: &str, local: &str) -> Option<String> {
    let mut reader = NsReader::from_str(doc);
    loop {
        let (resolved, event) = reader.read_resolved_event().ok()?;
        let resolved = namespace(&resolved);
        match event {
            Event::Start(start) if resolved.as_deref() == Some(ns) && start.local_name().as_ref() == local => {
                let span = reader.read_to_end(start.name()).ok()?;
                return Some(doc[span.start as usize..span.end as usize].trim().to_owned());
            }
            Event::Eof => return None,
            _ => {}
        }
    }
}

impl Wsn {
    pub fn new(http_addr: SocketAddr, _name: &str) -> Wsn {
        Wsn {
            broker: format!("http://{http_addr}/wsn"),
            http: http(),
            consumer: Consumer::None,
            pending: VecDeque::new(),
        }
    }

    async fn post(&self, url: &str, body: String) -> (u16, String) {
        let request = Request::post(url)
            .header("content-type", "text/xml; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let response = within("a WS-N answer", self.http.request(request)).await.expect("WS-N request");
        let status = response.status().as_u16();
        let body = within("a WS-N body", response.into_body().collect()).await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).expect("UTF-8 answer"))
    }

    /// Starts a consumer endpoint; returns its address.
    async fn start_consumer(&mut self) -> String {
        let (tx, posts) = mpsc::unbounded_channel();
        let app = axum::Router::new().route(
            "/{*rest}",
            post(move |body: String| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(body);
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        self.consumer = Consumer::Push { posts, _stop: stop };
        format!("http://{addr}/consumer")
    }

    fn queue(&mut self, doc: &str) {
        for (topic, dialect, element) in notifications(doc) {
            assert!(dialect == SIMPLE || dialect == CONCRETE, "WS-N: delivered topic {topic} in dialect {dialect}");
            let (payload, content_type) = unwrap_payload(&element);
            self.pending.push_back(Received::bare(topic, payload, content_type, None));
        }
    }
}

impl PubSub for Wsn {
    fn subscribe<'a>(&'a mut self, s: Subscription<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let consumer = if s.survive_reconnect {
                let (status, body) = self.post(&self.broker, envelope("<wsnt:CreatePullPoint/>")).await;
                assert_eq!(status, 200, "WS-N CreatePullPoint: {body}");
                let address = first_text(&body, WSA, "Address").expect("pull point address");
                self.consumer = Consumer::Pull(address.clone());
                address
            } else {
                self.start_consumer().await
            };
            let (dialect, expression) = filter_expression(s.filter);
            let subscribe = format!(
                r#"<wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>{consumer}</wsa:Address></wsnt:ConsumerReference><wsnt:Filter><wsnt:TopicExpression Dialect="{dialect}" xmlns:tns="{WSN_NAMESPACE}">{expression}</wsnt:TopicExpression></wsnt:Filter></wsnt:Subscribe>"#
            );
            let (status, body) = self.post(&self.broker, envelope(&subscribe)).await;
            assert_eq!(status, 200, "WS-N Subscribe to {expression}: {body}");
            assert!(first_text(&body, WSNT, "SubscriptionReference").is_some(), "WS-N SubscribeResponse: {body}");
        })
    }

    fn publish<'a>(&'a mut self, m: &'a Outgoing) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let (dialect, topic) = topic_expression(&m.topic);
            let element = message_element(&m.payload, m.content_type.as_deref());
            let notify = format!(
                r#"<wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="{dialect}" xmlns:tns="{WSN_NAMESPACE}">{topic}</wsnt:Topic><wsnt:Message>{element}</wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>"#
            );
            let (status, body) = self.post(&self.broker, envelope(&notify)).await;
            assert_eq!(status, 202, "WS-N Notify on {topic}: {body}");
        })
    }

    fn next_message(&mut self, timeout: Duration) -> BoxFuture<'_, Option<Received>> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                if let Some(received) = self.pending.pop_front() {
                    return Some(received);
                }
                match &mut self.consumer {
                    Consumer::None => panic!("WS-N: not subscribed"),
                    Consumer::Push { posts, .. } => {
                        let doc = tokio::time::timeout_at(deadline, posts.recv()).await.ok()?.expect("consumer runs");
                        self.queue(&doc);
                    }
                    Consumer::Pull(address) => {
                        let get = envelope(
                            "<wsnt:GetMessages><wsnt:MaximumNumber>16</wsnt:MaximumNumber></wsnt:GetMessages>",
                        );
                        let address = address.clone();
                        let (status, body) = self.post(&address, get).await;
                        assert_eq!(status, 200, "WS-N GetMessages: {body}");
                        self.queue(&body);
                        if self.pending.is_empty() {
                            // A pull point is polled: that is how its consumer learns of messages.
                            if tokio::time::Instant::now() >= deadline {
                                return None;
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
            }
        })
    }

    fn disconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            assert!(matches!(self.consumer, Consumer::Pull(_)), "WS-N: only a pull point keeps messages for later");
            self.http = http();
        })
    }

    fn reconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.http = http();
        })
    }

    fn own_terms(&self, topic: &str) -> String {
        format!("{{{WSN_NAMESPACE}}}{}", encode_path(topic))
    }
}

#[test]
fn base64_round_trips_and_expressions_follow_the_rules() {
    for data in [&b""[..], b"a", b"ab", b"abc", b"\x00\xff\x10tolk"] {
        assert_eq!(base64_decode(&base64_encode(data)), data);
    }
    assert_eq!(base64_encode(b"\x00\x01\x02"), "AAEC");
    assert_eq!(filter_expression("a/b/+"), (FULL, "tns:a/b/*".to_owned()));
    assert_eq!(filter_expression("a/b/#"), (FULL, "tns:a/b//.".to_owned()));
    assert_eq!(filter_expression("a/b"), (CONCRETE, "tns:a/b".to_owned()));
    assert_eq!(encode_path("a.b/2nd text/-"), "a.b/_x0032_nd_x0020_text/_x002D_");
}
