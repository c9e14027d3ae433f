//! The HTTP server: Prometheus metrics, health, and latency percentiles. Protocol front ends
//! that live on HTTP (WS-Notification) add their routes to the same server.

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
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_core::listener::{Admission, ConnectionLimits, bind_tcp};
use tolk_metrics::{Metrics, Protocol};

use crate::config::HttpConfig;

/// Routes served on the HTTP port.
pub fn routes(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(prometheus))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/api/latency", get(latency))
        .with_state(metrics)
}

async fn prometheus(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], metrics.render_prometheus())
}

async fn latency(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    Json(metrics.latency_report())
}

/// Binds and serves `app` until `shutdown` is cancelled. Returns the bound address.
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
) -> std::io::Result<SocketAddr> {
    let listener = bind_tcp("http", config.bind).await?;
    let addr = listener.local_addr()?;
    let limits = ConnectionLimits {
        max_connections: config.max_connections,
        max_per_address: config.max_connections_per_address,
    };
    // The HTTP port is WS-Notification's: its refusals are counted under `wsn`.
    let admission = Admission::new(limits, Protocol::Wsn, metrics);
    let request_timeout = config.request_timeout;
    let app = app.layer(axum::middleware::from_fn(move |request, next| within(request_timeout, request, next)));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(config.header_timeout);
    let connections = tracker.clone();
    tracker.spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                _ = shutdown.cancelled() => return,
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
            // The peer's address for handlers that admit connections of their own (WebSocket).
            let service = TowerToHyperService::new(app.clone().layer(Extension(ConnectInfo(peer))));
            // With upgrades: a WebSocket takes the connection over after its 101 answer.
            let connection = http1.serve_connection(TokioIo::new(stream), service).with_upgrades();
            let shutdown = shutdown.clone();
            connections.spawn(async move {
                let _admitted = admitted;
                tokio::pin!(connection);
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(%peer, error = %e, "HTTP connection ended");
                        }
                    }
                    _ = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = connection.await;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// Answers 408 when a request (its body included) takes longer than `limit`.
async fn within(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::REQUEST_TIMEOUT, "request took too long\n").into_response(),
    }
}
