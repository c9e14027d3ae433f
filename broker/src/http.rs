//! The HTTP server: Prometheus metrics, health, and latency percentiles. Protocol front ends
//! that live on HTTP (WS-Notification) add their routes to the same server.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_core::listener::bind_tcp;
use tolk_metrics::Metrics;

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
pub async fn serve(
    bind: SocketAddr,
    app: Router,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> std::io::Result<SocketAddr> {
    let listener = bind_tcp("http", bind).await?;
    let addr = listener.local_addr()?;
    tracker.spawn(async move {
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
    Ok(addr)
}
