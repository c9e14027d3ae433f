//! Test harness: the WS-N routes served by a real axum server on 127.0.0.1:0, a tiny hyper-util
//! client sending raw SOAP documents, a real consumer endpoint (another axum server) that
//! records what it is sent and can be told to fail, and SOAP documents in the shapes clients
//! send.

#![allow(dead_code, reason = "each test file uses a different part of the harness")]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes as AxumBytes;
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tolk_core::auth::{AllowAll, Authenticator};
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Message, Metrics, Origin, Protocol, Router, RouterConfig, Session};
use tolk_wsn::{PullPointConfig, PushConfig, WsnConfig, WsnFrontEnd};

pub const SOAP11: &str = "http://schemas.xmlsoap.org/soap/envelope/";
pub const SOAP12: &str = "http://www.w3.org/2003/05/soap-envelope";
pub const CT11: &str = "text/xml; charset=utf-8";
pub const CT12: &str = "application/soap+xml; charset=utf-8";
pub const FULL: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full";
pub const CONCRETE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete";
pub const SIMPLE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple";

/// How long any expected event may take before a test fails.
pub const WAIT: Duration = Duration::from_secs(5);

/// A test configuration: short retry timings so retry and drop tests take well under a second.
pub fn test_config() -> WsnConfig {
    WsnConfig {
        expiry_check_interval: Duration::from_millis(20),
        push: PushConfig {
            retry_initial: Duration::from_millis(20),
            retry_backoff_max: Duration::from_millis(80),
            give_up_after: Duration::from_millis(400),
            request_timeout: Duration::from_secs(2),
            ..PushConfig::default()
        },
        pull_point: PullPointConfig { max_messages: 8, ..PullPointConfig::default() },
        ..WsnConfig::default()
    }
}

/// A running broker endpoint.
pub struct Broker {
    pub addr: SocketAddr,
    pub router: Router,
    pub ctx: FrontEndContext,
    pub http: Http,
}

impl Broker {
    pub async fn start(config: WsnConfig) -> Broker {
        Broker::start_with_auth(config, Arc::new(AllowAll)).await
    }

    /// A broker whose users and rights `auth` decides (as the broker's `[auth]` section does).
    pub async fn start_with_auth(config: WsnConfig, auth: Arc<dyn Authenticator>) -> Broker {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let mut ctx = FrontEndContext::new(router.clone(), std::env::temp_dir());
        ctx.auth = auth;
        let started = Box::new(WsnFrontEnd::new(config)).start(ctx.clone()).await.expect("WS-N starts");
        let app = started.routes.expect("WS-N serves routes");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        ctx.http_addr.set(addr).unwrap();
        let shutdown = ctx.shutdown.clone();
        ctx.tracker.spawn(async move {
            // With the peer's address, as the broker's HTTP server gives it (logged on refusals).
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await.unwrap();
        });
        Broker { addr, router, ctx, http: Http::new() }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn metrics(&self) -> &Metrics {
        self.router.metrics()
    }

    /// POSTs a document to `path` on the broker.
    pub async fn post(&self, path: &str, content_type: &str, body: impl Into<Bytes>) -> Reply {
        self.http.post(&self.url(path), content_type, body.into()).await
    }

    /// Subscribes (SOAP 1.1) and returns the subscription's address.
    pub async fn subscribe(&self, consumer: &str, filter: &str) -> String {
        let reply = self.post("/wsn", CT11, subscribe_doc(SOAP11, consumer, filter, "")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.text_of("wsa:Address").to_owned()
    }

    /// Creates a pull point and returns its address.
    pub async fn create_pull_point(&self) -> String {
        let reply = self.post("/wsn", CT11, envelope(SOAP11, "", "<wsnt:CreatePullPoint/>")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.text_of("wsa:Address").to_owned()
    }

    /// POSTs a document to an absolute address handed out by the broker.
    pub async fn post_to(&self, address: &str, body: impl Into<Bytes>) -> Reply {
        self.http.post(address, CT11, body.into()).await
    }

    /// POSTs a document to an absolute address with extra HTTP headers (`Authorization`).
    pub async fn post_with(
        &self,
        address: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        self.http.post_with(address, content_type, headers, body.into()).await
    }

    /// A core session as an MQTT client would have.
    pub fn mqtt_session(&self) -> Session {
        self.router.open_session(Protocol::Mqtt)
    }

    /// Publishes through the core as an MQTT client.
    pub fn publish_mqtt(&self, session: &Session, topic: &str, payload: &[u8]) {
        let origin = Origin { protocol: Protocol::Mqtt, session: session.id(), client_id: "mqtt-client".into() };
        session.publish(Arc::new(Message::new(topic, Bytes::copy_from_slice(payload), origin)));
    }

    pub async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        tokio::time::timeout(WAIT, self.ctx.tracker.wait()).await.expect("tasks stop at shutdown");
    }
}

/// Waits until `check` holds, polling; fails the test after [`WAIT`].
pub async fn eventually<F: FnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A raw HTTP client.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// Text of the first `<name>` element (the writer's prefixes are fixed).
    pub fn text_of(&self, name: &str) -> &str {
        text_between(&self.body, name).unwrap_or_else(|| panic!("no <{name}> in {}", self.body))
    }

    /// Asserts a WS-N fault of `detail` (local name) with `status`.
    pub fn assert_fault(&self, status: u16, detail: &str) {
        assert_eq!(self.status, status, "{}", self.body);
        assert!(self.body.contains(":Fault>"), "not a fault: {}", self.body);
        assert!(self.body.contains(detail), "fault is not {detail}: {}", self.body);
    }
}

/// The text between `<name ...>` and `</name>`.
pub fn text_between<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}");
    let mut from = 0;
    loop {
        let start = from + doc[from..].find(&open)?;
        let after = &doc[start + open.len()..];
        if after.starts_with('>') || after.starts_with(' ') {
            let gt = start + open.len() + after.find('>')?;
            let end = doc[gt..].find(&format!("</{name}>"))? + gt;
            return Some(&doc[gt + 1..end]);
        }
        from = start + open.len();
    }
}

impl Http {
    pub fn new() -> Http {
        Http { client: Client::builder(TokioExecutor::new()).build_http() }
    }

    pub async fn post(&self, url: &str, content_type: &str, body: Bytes) -> Reply {
        self.post_with(url, content_type, &[], body).await
    }

    pub async fn post_with(&self, url: &str, content_type: &str, headers: &[(&str, &str)], body: Bytes) -> Reply {
        let mut request = Request::post(url).header("content-type", content_type);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body)).unwrap();
        let response = tokio::time::timeout(WAIT, self.client.request(request)).await.expect("answer in time").unwrap();
        let status = response.status().as_u16();
        let content_type =
            response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply { status, content_type, headers, body: String::from_utf8(body.to_vec()).unwrap() }
    }
}

/// What a consumer received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: String,
    /// The status the consumer answered with.
    pub answered: u16,
}

#[derive(Clone)]
struct ConsumerState {
    sender: mpsc::UnboundedSender<Received>,
    script: Arc<Mutex<VecDeque<u16>>>,
}

/// A real consumer endpoint: records every POST; answers the scripted statuses first, then 200.
pub struct Consumer {
    pub addr: SocketAddr,
    pub received: mpsc::UnboundedReceiver<Received>,
    script: Arc<Mutex<VecDeque<u16>>>,
    stop: CancellationToken,
}

impl Consumer {
    pub async fn start() -> Consumer {
        let (sender, received) = mpsc::unbounded_channel();
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let state = ConsumerState { sender, script: script.clone() };
        let app = axum::Router::new().route("/consumer/{*rest}", post(consume)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await;
        });
        Consumer { addr, received, script, stop }
    }

    /// The consumer's address for subscription `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/consumer/{name}", self.addr)
    }

    /// The next statuses to answer with.
    pub fn fail_next(&self, statuses: &[u16]) {
        self.script.lock().unwrap().extend(statuses);
    }

    /// The next request, within [`WAIT`].
    pub async fn next(&mut self) -> Received {
        tokio::time::timeout(WAIT, self.received.recv()).await.expect("a notification in time").unwrap()
    }

    /// The next request answered 200.
    pub async fn next_accepted(&mut self) -> Received {
        loop {
            let r = self.next().await;
            if r.answered == 200 {
                return r;
            }
        }
    }

    /// Whether anything arrived (without waiting).
    pub fn try_next(&mut self) -> Option<Received> {
        self.received.try_recv().ok()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn consume(State(state): State<ConsumerState>, headers: HeaderMap, body: AxumBytes) -> StatusCode {
    let status = state.script.lock().unwrap().pop_front().unwrap_or(200);
    let body = String::from_utf8(body.to_vec()).unwrap();
    let _ = state.sender.send(Received { headers, body, answered: status });
    StatusCode::from_u16(status).unwrap()
}

/// A SOAP envelope with WS-Addressing headers.
pub fn envelope(soap_ns: &str, headers: &str, body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><s:Envelope xmlns:s="{soap_ns}" xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><s:Header><wsa:MessageID>urn:uuid:test-1</wsa:MessageID>{headers}</s:Header><s:Body>{body}</s:Body></s:Envelope>"#
    )
}

/// A Subscribe. `filter` is a whole `<wsnt:Filter>` (or empty); `extra` goes after it.
pub fn subscribe_doc(soap_ns: &str, consumer: &str, filter: &str, extra: &str) -> String {
    envelope(
        soap_ns,
        "",
        &format!(
            "<wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>{consumer}</wsa:Address></wsnt:ConsumerReference>{filter}{extra}</wsnt:Subscribe>"
        ),
    )
}

/// A Filter with one TopicExpression.
pub fn topic_filter(dialect: &str, expression: &str) -> String {
    format!(
        r#"<wsnt:Filter><wsnt:TopicExpression Dialect="{dialect}" xmlns:tns="urn:test:topics">{expression}</wsnt:TopicExpression></wsnt:Filter>"#
    )
}

/// A Notify with one NotificationMessage per `(topic, message element)`.
pub fn notify_doc(soap_ns: &str, messages: &[(&str, &str)]) -> String {
    let mut body = String::from("<wsnt:Notify>");
    for (topic, message) in messages {
        body.push_str(&format!(
            r#"<wsnt:NotificationMessage><wsnt:Topic Dialect="{CONCRETE}" xmlns:tns="urn:test:topics">{topic}</wsnt:Topic><wsnt:Message>{message}</wsnt:Message></wsnt:NotificationMessage>"#
        ));
    }
    body.push_str("</wsnt:Notify>");
    envelope(soap_ns, "", &body)
}

/// A GetCurrentMessage for `topic` (prefix `tns:` for `urn:t`) in the given dialect.
pub fn get_current_message_doc(soap_ns: &str, dialect: &str, topic: &str) -> String {
    let body = format!(
        r#"<wsnt:GetCurrentMessage><wsnt:Topic Dialect="{dialect}" xmlns:tns="urn:t">{topic}</wsnt:Topic></wsnt:GetCurrentMessage>"#
    );
    envelope(soap_ns, "", &body)
}

/// A request with an empty operation element (`Unsubscribe`, `PauseSubscription`…).
pub fn simple_doc(operation: &str) -> String {
    envelope(SOAP11, "", &format!("<wsnt:{operation}/>"))
}
