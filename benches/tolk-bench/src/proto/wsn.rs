//! WS-Notification (WS-BaseNotification 1.3, SOAP 1.2 over HTTP/1.1) clients.
//!
//! A publisher POSTs one `wsnt:Notify` per message to the broker endpoint over its own
//! keep-alive connection and waits for the answer (tolk answers 202 once the message is
//! routed), so a closed-loop WS-N publisher is paced by the broker's HTTP round trip.
//!
//! A subscriber is a consumer endpoint: an HTTP server of its own on an ephemeral port of the
//! address that reaches the broker, named as ConsumerReference in a `wsnt:Subscribe`. Each
//! Notify the broker POSTs there becomes deliveries, answered `202 Accepted` with no body (the
//! WS-I answer to a one-way message; tolk takes any 2xx) only once the scenario has room for
//! them: a slow reader holds back the broker's push, whose bounded queue then drops
//! at-most-once notifications. Closing the subscriber sends Unsubscribe.
//!
//! WS-N has no connection that could sit idle, so the idle scenario refuses it.

mod http;
mod soap;
mod topic;

use std::future::Future;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;
use http::{HttpConnection, HttpUrl};

/// Time allowed for Subscribe and for Unsubscribe, connection included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Time a closing subscriber gives its Unsubscribe.
const UNSUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Connects WS-N publishers and subscribers to one broker endpoint.
#[derive(Debug, Clone)]
pub struct WsnConnector {
    endpoint: HttpUrl,
}

impl WsnConnector {
    /// A connector for `target` (`wsn://host:port/path`).
    pub fn new(target: &Target) -> Self {
        let host = if target.host.contains(':') { format!("[{}]", target.host) } else { target.host.clone() };
        let authority = format!("{host}:{}", target.port);
        WsnConnector { endpoint: HttpUrl { addr: target.addr, authority, path: target.path.clone() } }
    }

    fn url(&self) -> String {
        format!("wsn://{}{}", self.endpoint.authority, self.endpoint.path)
    }

    /// Subscribes `consumer` (an `http://` consumer endpoint, or a pull point's address) to
    /// `topic`; returns the subscription manager's address.
    pub async fn subscribe_consumer(&self, consumer: &str, topic: &str) -> Result<HttpUrl> {
        let subscribed = async {
            let (status, body) = http::post_once(&self.endpoint, soap::subscribe(consumer, topic)).await?;
            expect_status("Subscribe", status, &body, StatusCode::OK)?;
            HttpUrl::parse(&soap::subscription_address(&body)?)
        };
        in_time(subscribed).await.with_context(|| format!("subscribing {consumer} to {topic} at {}", self.url()))
    }

    /// CreatePullPoint: the new pull point's address.
    pub async fn create_pull_point(&self) -> Result<String> {
        let created = async {
            let (status, body) = http::post_once(&self.endpoint, soap::create_pull_point()).await?;
            expect_status("CreatePullPoint", status, &body, StatusCode::OK)?;
            soap::pull_point_address(&body)
        };
        in_time(created).await.with_context(|| format!("CreatePullPoint at {}", self.url()))
    }

    /// GetMessages on the pull point at `address`, for at most `max` notifications: how many
    /// it handed over.
    pub async fn get_messages(&self, address: &str, max: u32) -> Result<usize> {
        let pull_point = HttpUrl::parse(address)?;
        let taken = async {
            let (status, body) = http::post_once(&pull_point, soap::get_messages(max)).await?;
            expect_status("GetMessages", status, &body, StatusCode::OK)?;
            soap::count_messages(&body)
        };
        in_time(taken).await.with_context(|| format!("GetMessages at {address}"))
    }
}

/// A Notify of `size` bytes on `topic` whose message is one XML element: the most a request
/// of that size can carry (see [`WsnPublisher::notify_document`]).
pub fn filled_notify(topic: &str, size: usize) -> String {
    soap::notify_filled(topic, size)
}

/// Fails unless the broker answered `expected`, quoting its fault.
fn expect_status(what: &str, status: StatusCode, body: &[u8], expected: StatusCode) -> Result<()> {
    if status != expected {
        bail!("{what} answered HTTP {status}: {}", soap::fault_reason(body));
    }
    Ok(())
}

/// A WS-N publisher: one keep-alive HTTP connection to the broker.
pub struct WsnPublisher {
    http: HttpConnection,
    path: String,
    connection: Connection,
}

impl Publisher for WsnPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        let (status, body) = self.http.post(&self.path, soap::notify(topic, &payload)).await?;
        // Notify is one-way: tolk answers 202 with no body once the message is routed.
        expect_status("Notify", status, &body, StatusCode::ACCEPTED)
    }

    async fn close(self) -> Option<String> {
        self.connection.close().await
    }
}

impl WsnPublisher {
    /// POSTs a whole Notify document; returns the answer's status and, for a fault, its reason.
    pub async fn notify_document(&mut self, document: String) -> Result<(StatusCode, String)> {
        let (status, body) = self.http.post(&self.path, document).await?;
        let reason = if status.is_success() { String::new() } else { soap::fault_reason(&body) };
        Ok((status, reason))
    }
}

/// An answer without a body.
fn reply(status: StatusCode) -> Response<Empty<Bytes>> {
    let mut response = Response::new(Empty::new());
    *response.status_mut() = status;
    response
}

/// A Notify POSTed to a consumer endpoint: deliveries for the scenario, or a reason to end the
/// subscription when the broker sent something a consumer cannot read.
async fn consume(
    request: Request<Incoming>,
    deliveries: mpsc::Sender<Delivery>,
    failures: mpsc::Sender<String>,
    clock: Clock,
) -> Response<Empty<Bytes>> {
    if request.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED);
    }
    let body = http::read_body(request.into_body()).await;
    let received_ns = clock.now_ns();
    let notifications = match body.and_then(|body| soap::parse_notify(&body)) {
        Ok(notifications) => notifications,
        Err(e) => {
            let _ = failures.try_send(format!("unreadable Notify from the broker: {e:#}"));
            return reply(StatusCode::BAD_REQUEST);
        }
    };
    for n in notifications {
        tracing::trace!(topic = n.topic.as_deref().unwrap_or(""), "WS-N notification");
        // Waiting for room delays the answer, which holds back the broker's push.
        if deliveries.send(Delivery { payload: n.payload, received_ns }).await.is_err() {
            return reply(StatusCode::SERVICE_UNAVAILABLE);
        }
    }
    reply(StatusCode::ACCEPTED)
}

/// Runs one exchange with the broker within [`EXCHANGE_TIMEOUT`].
async fn in_time<T>(exchange: impl Future<Output = Result<T>>) -> Result<T> {
    let answer = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange).await;
    answer.unwrap_or_else(|_| Err(anyhow!("no answer within {EXCHANGE_TIMEOUT:?}")))
}

/// Sends Unsubscribe to the subscription's manager; failures only matter as a log line, since
/// the broker also drops a subscription whose consumer is gone.
async fn unsubscribe(manager: &HttpUrl) {
    let result = tokio::time::timeout(UNSUBSCRIBE_TIMEOUT, http::post_once(manager, soap::unsubscribe())).await;
    match result {
        Ok(Ok((status, _))) if status.is_success() => {}
        Ok(Ok((status, body))) => tracing::debug!("Unsubscribe answered HTTP {status}: {}", soap::fault_reason(&body)),
        Ok(Err(e)) => tracing::debug!("Unsubscribe failed: {e:#}"),
        Err(_) => tracing::debug!("Unsubscribe timed out"),
    }
}

impl Connector for WsnConnector {
    type Publisher = WsnPublisher;

    /// WS-N has no delivery guarantee to choose: Notify is at-most-once in tolk whatever `qos`
    /// asks (docs/translation.md), and an at-least-once run shows what that means.
    async fn publisher(&self, client_id: String, _qos: Qos) -> Result<WsnPublisher> {
        let (http, driver) = in_time(http::connect(&self.endpoint))
            .await
            .with_context(|| format!("{client_id}: connecting to {}", self.url()))?;
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            tokio::select! {
                _ = stop_rx => None,
                ended = driver => Some(match ended {
                    Ok(()) => "connection closed by broker".to_string(),
                    Err(e) => e.to_string(),
                }),
            }
        });
        Ok(WsnPublisher { http, path: self.endpoint.path.clone(), connection: Connection::new(stop_tx, task) })
    }

    /// Subscribes a consumer endpoint of its own. The broker's push decides the guarantee
    /// (at-most-once with retries), whatever `qos` asks.
    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        _qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        let listener = TcpListener::bind((http::local_ip_towards(self.endpoint.addr)?, 0))
            .await
            .context("binding the consumer endpoint")?;
        let consumer = format!("http://{}/tolk-bench/{client_id}", listener.local_addr()?);
        let manager = self.subscribe_consumer(&consumer, &topic).await.with_context(|| client_id.clone())?;

        let (tx, deliveries) = mpsc::channel(buffer.max(1));
        let (failures_tx, mut failures) = mpsc::channel(1);
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            let reason = loop {
                tokio::select! {
                    _ = &mut stop_rx => break None,
                    Some(why) = failures.recv() => break Some(why),
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => {
                            let (tx, failures_tx) = (tx.clone(), failures_tx.clone());
                            let handle = move |request| consume(request, tx.clone(), failures_tx.clone(), clock);
                            connections.spawn(http::serve(stream, handle));
                        }
                        Err(e) => break Some(format!("consumer endpoint: {e}")),
                    },
                }
            };
            unsubscribe(&manager).await;
            // Dropping the set aborts the connections still open.
            drop(connections);
            reason
        });
        Ok(Subscription { deliveries, connection: Connection::new(stop_tx, task) })
    }

    async fn idle(&self, _client_id: String) -> Result<Connection> {
        bail!("WS-Notification has no idle connection: publishers and subscribers talk in short HTTP exchanges")
    }
}
