//! The WS-Notification endpoint (its real axum routes, called with `oneshot`, no socket) fed a
//! sequence of HTTP requests built from the fuzz input, against a fresh `tolk_core::Router`.
//!
//! Input: requests separated by NUL bytes (never valid in XML, so little is lost). Each
//! request's first byte picks where it goes and how it is labelled; the rest is its body:
//! - bits 0-2, the path: `/wsn` (0, 1: seeds use 1, since a selector of 0 is a separator), `/wsn/` (2), a subscription the endpoint handed out in
//!   an earlier response of this input (3), a pull point handed out (4), an unknown
//!   subscription (5), an unknown pull point (6), a path outside the endpoint (7);
//! - bits 3-4, the Content-Type: SOAP 1.1 (0), SOAP 1.2 (1), SOAP 1.2 with an action (2), none (3);
//! - bits 5-7, which of the handed-out subscriptions or pull points (modulo their number).
//!
//! In a body, `http://sink` is replaced by the address of a consumer served by this process
//! (it answers 500 for paths containing `fail`, waits past the push timeout for `slow`, else
//! 200), `$PP` by the id of the last pull point handed out and `$SUB` by that of the last
//! subscription. A Subscribe whose consumer is any other address is not sent: push delivery
//! (and the `consumer_allow` check, which resolves host names) would otherwise reach whatever
//! host a mutation names; `consumer_allow` is also set to 127.0.0.1. The endpoint's addresses
//! use the sink's authority (`public_base_url`), so subscribing a handed-out pull point works.
//!
//! Checked: every request is answered within the deadline; every response body is a SOAP
//! envelope that this codebase's own parser reads back (so faults and responses echoing client
//! text stay well-formed); the endpoint's tasks stop at shutdown.
#![no_main]

use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, Uri, header};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_fuzz::{data_dir, router, runtime, stop, within};
use tolk_wsn::{PullPointConfig, PushConfig, WsnConfig, WsnFrontEnd};
use tower::ServiceExt;
use wsn_xml::{Limits, Request as WsnRequest, parse_request};

/// Requests per input beyond which the rest is ignored (keeps one input's time bounded).
const MAX_REQUESTS: usize = 32;
/// Push request timeout; the sink's `slow` answer takes longer.
const PUSH_TIMEOUT: Duration = Duration::from_millis(50);

/// The consumer that push deliveries go to, started once per process on the shared runtime.
static SINK: LazyLock<SocketAddr> = LazyLock::new(|| {
    runtime().block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
        let addr = listener.local_addr().expect("sink address");
        let app = axum::Router::new().fallback(|uri: Uri| async move {
            let path = uri.path();
            if path.contains("slow") {
                tokio::time::sleep(PUSH_TIMEOUT * 3).await;
            }
            if path.contains("fail") { StatusCode::INTERNAL_SERVER_ERROR } else { StatusCode::OK }
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        addr
    })
});

fn config(base: &str) -> WsnConfig {
    WsnConfig {
        public_base_url: Some(base.to_owned()),
        body_read_timeout: Duration::from_secs(1),
        expiry_check_interval: Duration::from_millis(10),
        push: PushConfig {
            retry_initial: Duration::from_millis(5),
            retry_backoff_max: Duration::from_millis(20),
            give_up_after: Duration::from_millis(100),
            request_timeout: PUSH_TIMEOUT,
            // Defence in depth behind `pushes_elsewhere`: loopback only.
            consumer_allow: vec!["127.0.0.1".to_owned()],
            ..PushConfig::default()
        },
        pull_point: PullPointConfig { max_messages: 16, ..PullPointConfig::default() },
        ..WsnConfig::default()
    }
}

/// Limits for reading the endpoint's own responses back: only well-formedness is in question.
fn generous() -> Limits {
    Limits {
        max_document_bytes: 64 << 20,
        max_depth: 4096,
        max_elements: 1 << 24,
        max_attributes_per_element: 1 << 16,
        max_namespace_bindings: 1 << 16,
    }
}

/// 32 lowercase hex digits after `marker`: the ids the endpoint hands out (see `ids.rs`).
fn ids_after(text: &str, marker: &str, into: &mut Vec<String>) {
    for (at, _) in text.match_indices(marker) {
        let id = &text[at + marker.len()..];
        let len = id.bytes().take_while(u8::is_ascii_hexdigit).count();
        if len == 32 && !into.iter().any(|known| known == &id[..32]) {
            into.push(id[..32].to_owned());
        }
    }
}

/// Whether sending `body` could make the endpoint push to an address other than the sink.
fn pushes_elsewhere(body: &[u8], sink: &str) -> bool {
    let Ok(envelope) = parse_request(body, &Limits::default()) else { return false };
    let WsnRequest::Subscribe(subscribe) = envelope.request else { return false };
    let address = subscribe.consumer_reference.address.trim();
    match address.parse::<Uri>() {
        Ok(uri) => uri.authority().is_none_or(|a| !a.as_str().eq_ignore_ascii_case(sink)),
        // Not a URL: refused by the endpoint.
        Err(_) => false,
    }
}

fn replace(body: &[u8], from: &str, to: &str) -> Vec<u8> {
    let from = from.as_bytes();
    if from.is_empty() || body.len() < from.len() {
        return body.to_vec();
    }
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i..].starts_with(from) {
            out.extend_from_slice(to.as_bytes());
            i += from.len();
        } else {
            out.push(body[i]);
            i += 1;
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let sink = *SINK;
    let sink_authority = sink.to_string();
    let base = format!("http://{sink_authority}");
    runtime().block_on(async {
        let ctx = FrontEndContext::new(router(), data_dir());
        let started = Box::new(WsnFrontEnd::new(config(&base))).start(ctx.clone()).await.expect("WS-N starts");
        let app = started.routes.expect("WS-N serves routes");
        let mut subscriptions: Vec<String> = Vec::new();
        let mut pull_points: Vec<String> = Vec::new();

        for record in data.split(|&b| b == 0).take(MAX_REQUESTS) {
            let Some((&selector, body)) = record.split_first() else { continue };
            let pick = |known: &[String], unknown: &str| {
                known.get(usize::from(selector >> 5) % known.len().max(1)).cloned().unwrap_or_else(|| unknown.into())
            };
            let path = match selector & 7 {
                0 | 1 => "/wsn".to_owned(),
                2 => "/wsn/".to_owned(),
                3 => format!("/wsn/subscriptions/{}", pick(&subscriptions, "none")),
                4 => format!("/wsn/pullpoints/{}", pick(&pull_points, "none")),
                5 => "/wsn/subscriptions/0123456789abcdef0123456789abcdef".to_owned(),
                6 => "/wsn/pullpoints/0123456789abcdef0123456789abcdef".to_owned(),
                _ => "/elsewhere".to_owned(),
            };
            let content_type = match (selector >> 3) & 3 {
                0 => Some("text/xml; charset=utf-8"),
                1 => Some("application/soap+xml; charset=utf-8"),
                2 => Some(
                    "application/soap+xml; charset=utf-8; action=\"http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/SubscribeRequest\"",
                ),
                _ => None,
            };
            let mut body = replace(body, "http://sink", &base);
            if let Some(pp) = pull_points.last() {
                body = replace(&body, "$PP", pp);
            }
            if let Some(sub) = subscriptions.last() {
                body = replace(&body, "$SUB", sub);
            }
            if pushes_elsewhere(&body, &sink_authority) {
                continue;
            }

            let mut request = Request::post(path);
            if let Some(content_type) = content_type {
                request = request.header(header::CONTENT_TYPE, content_type);
            }
            let request = request.body(Body::from(body)).expect("request");
            let response = within("WS-N request", app.clone().oneshot(request)).await.expect("infallible");
            let status = response.status();
            let bytes = within("WS-N response body", response.into_body().collect())
                .await
                .expect("response body")
                .to_bytes();
            if bytes.is_empty() {
                continue;
            }
            if let Err(e) = parse_request(&bytes, &generous()) {
                panic!(
                    "the endpoint answered {status} with a body its own parser refuses: {e}\n{}",
                    String::from_utf8_lossy(&bytes)
                );
            }
            let text = String::from_utf8_lossy(&bytes);
            ids_after(&text, "/wsn/subscriptions/", &mut subscriptions);
            ids_after(&text, "/wsn/pullpoints/", &mut pull_points);
        }
        // Let push deliveries started by the last requests reach the sink before shutdown.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        stop(&ctx, "WS-N endpoint").await;
    });
});
