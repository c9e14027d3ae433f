//! The HTTP side: the axum routes, reading a request body within its limits, and turning an
//! operation's outcome into an HTTP response in the caller's SOAP version.
//!
//! - `POST {path}`: the NotificationBroker (Notify, Subscribe, GetCurrentMessage,
//!   CreatePullPoint). `POST {path}/subscriptions/{id}`: one subscription's manager.
//!   `POST {path}/pullpoints/{id}`: one pull point.
//! - A body larger than `max_body_bytes` is answered `413` with a SOAP fault as soon as that is
//!   known (from `Content-Length`, or while reading), without reading the rest. A body not
//!   complete within `body_read_timeout` is answered `408`. More than
//!   `max_concurrent_requests` requests at once are answered `503`.
//! - Success is `200` with the response envelope; Notify is `202 Accepted` with no body.
//!   Every SOAP fault is `500`, in SOAP 1.2 too (see [`Fault::HTTP_STATUS`]: Apache CXF reads
//!   typed faults only from a 500). A request that is not SOAP at all (not XML, a DTD, not an
//!   Envelope) is `400`, still with a fault body for clients that read one. A request too
//!   broken to show its SOAP version is answered in the version its `Content-Type` names,
//!   else SOAP 1.1.
//! - A request carrying this broker's own push mark is a loop ([`crate::loopmark`]).
//! - Every other request logs in ([`crate::login`]) before it is dispatched. Refused
//!   credentials are a `wsse:FailedAuthentication` fault (WSS 1.0 §12): `401` with
//!   `WWW-Authenticate: Basic realm="tolk"` when the client used HTTP Basic or presented
//!   nothing, `500` for a refused UsernameToken. Each refusal is logged at info with the peer's
//!   address and counted in `tolk_connections_closed_total{protocol="wsn",reason="auth_failed"}`
//!   (for WS-N a refused request, there being no connection to close).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header, uri::Authority};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tolk_core::{CloseReason, Protocol};
use tracing::{debug, info};
use wsn_xml::{Fault, FaultKind, ReplyContext, SoapVersion, parse_request, write_fault};

use crate::endpoint::{Endpoint, Reply, Resource};
use crate::fault::{Refusal, shorten};
use crate::lifetime::now_unix_millis;
use crate::login::log_in;

/// The endpoint's routes, with their state, ready to merge into the broker's HTTP app.
pub(crate) fn router(endpoint: Arc<Endpoint>) -> axum::Router {
    let base = endpoint.base_path.clone();
    let mut app = axum::Router::new()
        .route(&format!("{base}/"), post(broker))
        .route(&format!("{base}/subscriptions/{{id}}"), post(subscription))
        .route(&format!("{base}/pullpoints/{{id}}"), post(pull_point));
    if !base.is_empty() {
        app = app.route(&base, post(broker));
    }
    app.with_state(endpoint)
}

/// The client's address, which the broker's HTTP server (and axum's
/// `into_make_service_with_connect_info`) records for every connection.
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

async fn broker(State(endpoint): State<Arc<Endpoint>>, peer: Peer, headers: HeaderMap, body: Body) -> Response {
    serve(endpoint, Resource::Broker, peer, headers, body).await
}

async fn subscription(
    State(endpoint): State<Arc<Endpoint>>,
    Path(id): Path<String>,
    peer: Peer,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve(endpoint, Resource::Subscription(id), peer, headers, body).await
}

async fn pull_point(
    State(endpoint): State<Arc<Endpoint>>,
    Path(id): Path<String>,
    peer: Peer,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve(endpoint, Resource::PullPoint(id), peer, headers, body).await
}

/// Why a body could not be read.
enum BodyError {
    TooLarge,
    Timeout,
    Broken(String),
}

async fn serve(endpoint: Arc<Endpoint>, resource: Resource, peer: Peer, headers: HeaderMap, body: Body) -> Response {
    // Without connection info (an app served without it), the unspecified address stands in.
    let peer = peer.map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |Extension(ConnectInfo(addr))| addr);
    let fallback = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(SoapVersion::from_content_type)
        .unwrap_or(SoapVersion::V11);
    let bare = ReplyContext::new(fallback);
    let Ok(_permit) = endpoint.request_permits.clone().try_acquire_owned() else {
        let busy = Refusal::new(FaultKind::Receiver, "the broker is handling too many WS-N requests; retry later");
        return fault_response(&bare, &busy, Some(StatusCode::SERVICE_UNAVAILABLE));
    };
    let bytes = match read_body(&endpoint, &headers, body).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => {
            let max = endpoint.config.max_body_bytes;
            info!(max_body_bytes = max, "WS-N request refused: body too large");
            let refusal = Refusal::sender(format!("request body larger than {max} bytes"));
            return fault_response(&bare, &refusal, Some(StatusCode::PAYLOAD_TOO_LARGE));
        }
        Err(BodyError::Timeout) => {
            info!("WS-N request refused: body not received within {:?}", endpoint.config.body_read_timeout);
            let refusal = Refusal::sender("request body not received in time");
            return fault_response(&bare, &refusal, Some(StatusCode::REQUEST_TIMEOUT));
        }
        Err(BodyError::Broken(e)) => {
            debug!(error = %e, "WS-N request body could not be read");
            let refusal = Refusal::sender("request body could not be read");
            return fault_response(&bare, &refusal, Some(StatusCode::BAD_REQUEST));
        }
    };
    let envelope = match parse_request(&bytes, &endpoint.limits) {
        Ok(envelope) => envelope,
        Err(e) => {
            info!(error = %e.error, "WS-N request refused");
            let refusal = Refusal::new(e.error.fault_kind(), e.error.to_string());
            let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            return fault_response(&e.reply_context(fallback), &refusal, Some(status));
        }
    };
    let ctx = envelope.reply_context();
    if let Some(tag) = endpoint.loop_mark.returned_tag(&headers) {
        let refusal = endpoint.refuse_returned_push(tag, &envelope.request);
        return fault_response(&ctx, &refusal, None);
    }
    if !envelope.not_understood.is_empty() {
        let names: Vec<String> = envelope.not_understood.iter().map(ToString::to_string).collect();
        let refusal = Refusal::new(
            FaultKind::MustUnderstand { headers: envelope.not_understood.clone() },
            format!("header blocks not understood: {}", shorten(&names.join(", "))),
        );
        info!(reason = %refusal, "WS-N request refused");
        return fault_response(&ctx, &refusal, None);
    }
    let caller = match log_in(&*endpoint.auth, headers.get(header::AUTHORIZATION), &envelope.security, peer) {
        Ok(caller) => caller,
        Err(refused) => {
            endpoint.router.metrics().protocol(Protocol::Wsn).closed(CloseReason::AuthFailed);
            info!(%peer, user = ?refused.user, reason = %refused.refusal, "WS-N request refused: login failed");
            if !refused.challenge {
                return fault_response(&ctx, &refused.refusal, None);
            }
            let mut response = fault_response(&ctx, &refused.refusal, Some(StatusCode::UNAUTHORIZED));
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"tolk\""));
            return response;
        }
    };
    let base = base_url(&endpoint, &headers);
    match endpoint.dispatch(&resource, envelope, &caller, &ctx, &base).await {
        Ok(Reply::Body(body)) => soap_response(StatusCode::OK, ctx.soap, body),
        Ok(Reply::Accepted) => StatusCode::ACCEPTED.into_response(),
        Err(refusal) => {
            debug!(?resource, fault = ?refusal.kind, reason = %refusal, "WS-N fault");
            fault_response(&ctx, &refusal, None)
        }
    }
}

/// Reads the whole body, refusing more than `max_body_bytes` without reading past it.
async fn read_body(endpoint: &Endpoint, headers: &HeaderMap, body: Body) -> Result<Bytes, BodyError> {
    let max = endpoint.config.max_body_bytes;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge);
    }
    let read = Limited::new(body, max).collect();
    match tokio::time::timeout(endpoint.config.body_read_timeout, read).await {
        Err(_) => Err(BodyError::Timeout),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(BodyError::TooLarge),
        Ok(Err(e)) => Err(BodyError::Broken(e.to_string())),
    }
}

/// Scheme and authority for the addresses handed out: the configured public base URL, else
/// `http://` + the request's `Host` (checked to be a plain authority), else `http://localhost`.
fn base_url(endpoint: &Endpoint, headers: &HeaderMap) -> String {
    if let Some(base) = &endpoint.config.public_base_url {
        return base.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.parse::<Authority>().ok())
        .filter(|a| !a.as_str().contains('@'));
    match host {
        Some(authority) => format!("http://{authority}"),
        None => "http://localhost".to_owned(),
    }
}

fn soap_response(status: StatusCode, soap: SoapVersion, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static(soap.content_type()))], body).into_response()
}

/// The fault envelope, `500` unless `status` says otherwise (400, 401, 413, 408, 503).
fn fault_response(ctx: &ReplyContext, refusal: &Refusal, status: Option<StatusCode>) -> Response {
    let fault = Fault::new(refusal.kind.clone(), refusal.reason.clone(), now_unix_millis());
    let status = status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    soap_response(status, ctx.soap, write_fault(ctx, &fault))
}
