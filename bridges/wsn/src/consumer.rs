//! The bridge's notification consumer: the address the remote pushes to, served on the
//! broker's own HTTP port at `/bridges/<name>/<key>`. The key is made afresh at every start and
//! is known only to the remote it was given to in Subscribe, so nobody else can push into the
//! bridge; pushes to an older key (a subscription from before a restart) get `404`.
//!
//! A Notify is handed to the bridge's task, which publishes it; the answer waits for that:
//! `202` once published (and on disk where it was kept), `503` when the broker cannot take it
//! now, so that the remote sends it again.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use wsn_xml::{Fault, FaultKind, Limits, NotificationMessage, ReplyContext, Request, parse_request, write_fault};

/// One Notify for the bridge's task, and where to say how it went.
pub(crate) struct Notified {
    /// Its messages.
    pub(crate) messages: Vec<NotificationMessage>,
    /// Its `tolk:Path` header.
    pub(crate) path: Option<String>,
    /// `Ok` once published; `Err` with the reason when the broker cannot take it now.
    pub(crate) done: oneshot::Sender<Result<(), String>>,
}

/// The route for bridge `name` under `key`, handing Notify to `inbox`.
pub(crate) fn route(name: &str, key: &str, inbox: mpsc::Sender<Notified>) -> axum::Router {
    axum::Router::new()
        .route(&format!("/bridges/{name}/{key}"), post(notify))
        .layer(DefaultBodyLimit::max(Limits::default().max_document_bytes))
        .with_state(inbox)
}

async fn notify(State(inbox): State<mpsc::Sender<Notified>>, body: Bytes) -> Response {
    let envelope = match parse_request(&body, &Limits::default()) {
        Ok(envelope) => envelope,
        Err(e) => return fault(StatusCode::BAD_REQUEST, FaultKind::Sender, &e.to_string()),
    };
    let Request::Notify(messages) = envelope.request else {
        return fault(StatusCode::BAD_REQUEST, FaultKind::Sender, "a bridge's consumer takes Notify only");
    };
    let (done, outcome) = oneshot::channel();
    let notified = Notified { messages, path: envelope.path, done };
    if inbox.send(notified).await.is_err() {
        return fault(StatusCode::SERVICE_UNAVAILABLE, FaultKind::Receiver, "the bridge is stopping");
    }
    match outcome.await {
        Ok(Ok(())) => StatusCode::ACCEPTED.into_response(),
        Ok(Err(reason)) => fault(StatusCode::SERVICE_UNAVAILABLE, FaultKind::Receiver, &reason),
        Err(_) => fault(StatusCode::SERVICE_UNAVAILABLE, FaultKind::Receiver, "the bridge is reconnecting"),
    }
}

fn fault(status: StatusCode, kind: FaultKind, reason: &str) -> Response {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let body = write_fault(&ReplyContext::new(wsn_xml::SoapVersion::V12), &Fault::new(kind, reason, now));
    (status, [(header::CONTENT_TYPE, "application/soap+xml; charset=utf-8")], body).into_response()
}
