//! The HTTP server: Prometheus metrics, health, latency percentiles and the live dashboard.
//! Protocol front ends that live on HTTP (WS-Notification) add their routes to the same server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_core::auth::{Authenticator, BasicCredentials, Credentials};
use tolk_core::listener::{Admission, ConnectionLimits, bind_tcp};
use tolk_metrics::{Metrics, Protocol};
use tolk_tls::Tls;

use crate::config::HttpConfig;

/// Routes served on the HTTP port. With `users`, `/metrics`, `/api/*` and `/dashboard` ask for
/// one (HTTP Basic); `/healthz` stays open for load balancers and systemd checks.
pub fn routes(metrics: Arc<Metrics>, users: Option<Arc<dyn Authenticator>>) -> Router {
    let protected = Router::new()
        .route("/metrics", get(prometheus))
        .route("/api/latency", get(latency))
        .route("/api/bridges", get(bridges))
        .route("/api/cluster", get(cluster))
        .with_state(metrics.clone())
        .merge(crate::dashboard::routes(metrics.clone()));
    let protected = match users {
        Some(users) => {
            protected.layer(axum::middleware::from_fn(move |request, next| basic_auth(users.clone(), request, next)))
        }
        None => protected,
    };
    Router::new().route("/healthz", get(health)).with_state(metrics).merge(protected)
}

/// Lets a request through when its `Authorization: Basic` names a user the broker accepts;
/// answers 401 with a `WWW-Authenticate` challenge otherwise.
async fn basic_auth(users: Arc<dyn Authenticator>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(BasicCredentials::from_header);
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    if let (Some(presented), Some(peer)) = (presented, peer) {
        let credentials = Credentials {
            protocol: Protocol::Internal,
            username: Some(&presented.username),
            password: Some(presented.password.as_bytes()),
            client_id: None,
            peer,
            proven: false,
        };
        match users.authenticate(&credentials) {
            Ok(()) => return next.run(request).await,
            Err(why) => tracing::info!(%peer, why, "HTTP request refused"),
        }
    }
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Basic realm=\"tolk\"")], "log in (HTTP Basic)\n")
        .into_response()
}

async fn prometheus(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], metrics.render_prometheus())
}

async fn latency(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    Json(metrics.latency_report())
}

/// Each bridge to another broker (`[[bridge]]`): up or down, counters, spool, last error.
async fn bridges(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    Json(metrics.bridges().statuses())
}

/// This node's part in the cluster (`[cluster]`); 404 when it is on its own.
async fn cluster(State(metrics): State<Arc<Metrics>>) -> Response {
    match metrics.cluster() {
        Some(cluster) => Json(cluster.status()).into_response(),
        None => (StatusCode::NOT_FOUND, "no [cluster] on this node\n").into_response(),
    }
}

/// `ok`, or `degraded: …` while the cluster's NATS is away: the node still serves its own
/// clients (so 200, and systemd's check passes), but a load balancer matching the body can
/// send new clients to a node that reaches the others.
async fn health(State(metrics): State<Arc<Metrics>>) -> String {
    match metrics.cluster() {
        // Only the state: not the whole status, whose gauges take the queues' locks.
        Some(cluster) if !cluster.up.load(std::sync::atomic::Ordering::Relaxed) => {
            let reason = cluster.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone();
            format!("degraded: cluster down ({})\n", reason.as_deref().unwrap_or("connecting"))
        }
        _ => "ok\n".to_owned(),
    }
}

/// Binds and serves `app` until `shutdown` is cancelled, on `bind` and, with `tls`, on
/// `tls_bind` as HTTPS (and so wss for the WebSocket endpoints). Returns the bound addresses,
/// plain first.
///
/// Its own accept loop rather than `axum::serve`, for the limits a port open to a whole
/// network needs: admission (per listener and per address, shared with the protocol
/// listeners), a header timeout that also closes idle keep-alive connections, and a timeout
/// on each whole request.
pub async fn serve(
    config: &HttpConfig,
    app: Router,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
    tls: Option<Arc<Tls>>,
) -> std::io::Result<Vec<SocketAddr>> {
    let limits = ConnectionLimits {
        max_connections: config.max_connections,
        max_per_address: config.max_connections_per_address,
    };
    let request_timeout = config.request_timeout;
    let app = app
        .layer(axum::middleware::from_fn(move |request, next| within(request_timeout, request, next)))
        .layer(Extension(crate::dashboard::Shutdown(shutdown.clone())));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(config.header_timeout);
    let server = Arc::new(Server { app, http1, shutdown, tracker: tracker.clone() });
    let mut listeners = vec![(bind_tcp("http.bind", config.bind).await?, None)];
    if let (Some(tls_bind), Some(tls)) = (config.tls_bind, tls) {
        listeners.push((bind_tcp("http.tls_bind", tls_bind).await?, Some(tls)));
    }
    let mut addrs = Vec::new();
    for (listener, tls) in listeners {
        addrs.push(listener.local_addr()?);
        // The HTTP port is WS-Notification's: its refusals are counted under `wsn`.
        let admission = Admission::new(limits, Protocol::Wsn, metrics.clone());
        tracker.spawn(server.clone().accept_loop(listener, admission, tls));
    }
    Ok(addrs)
}

/// What every HTTP connection is served with.
struct Server {
    app: Router,
    http1: hyper::server::conn::http1::Builder,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Server {
    async fn accept_loop(self: Arc<Self>, listener: TcpListener, admission: Arc<Admission>, tls: Option<Arc<Tls>>) {
        loop {
            let (stream, peer) = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Usually out of file descriptors: give some a chance to free up.
                        tracing::warn!(error = %e, "HTTP accept failed; retrying in 100ms");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let Some(admitted) = admission.admit(peer.ip()) else { continue };
            // As on the protocol listeners: a WebSocket's small frames must not wait for Nagle.
            let _ = stream.set_nodelay(true);
            let server = self.clone();
            let tls = tls.clone();
            self.tracker.spawn(async move {
                let _admitted = admitted;
                match tls {
                    None => server.serve_connection(stream, peer).await,
                    Some(tls) => match tls.accept(stream).await {
                        Ok((stream, _)) => server.serve_connection(stream, peer).await,
                        Err(e) => tracing::info!(%peer, error = %e, "HTTPS: TLS handshake failed"),
                    },
                }
            });
        }
    }

    async fn serve_connection<S>(&self, stream: S, peer: SocketAddr)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        // The peer's address for handlers that admit connections of their own (WebSocket).
        let service = TowerToHyperService::new(self.app.clone().layer(Extension(ConnectInfo(peer))));
        // With upgrades: a WebSocket takes the connection over after its 101 answer.
        let connection = self.http1.serve_connection(TokioIo::new(stream), service).with_upgrades();
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "HTTP connection ended");
                }
            }
            _ = self.shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }
}

/// Answers 408 when a request (its body included) takes longer than `limit`.
async fn within(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::REQUEST_TIMEOUT, "request took too long\n").into_response(),
    }
}
