//! The `[wsn]` section of the broker configuration: where the endpoint lives on the broker's HTTP
//! server, how big a request may be, how many subscriptions and pull points may exist, their
//! lifetimes, and how push delivery to consumers behaves. Field docs are the user documentation.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::allow::AllowEntry;

/// Settings of the WS-Notification (WS-BaseNotification 1.3) endpoint. It is served by the
/// broker's HTTP server (`[http] bind`), not on a port of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WsnConfig {
    /// Serve the WS-Notification endpoint.
    pub enabled: bool,
    /// URL path of the NotificationBroker endpoint (Notify, Subscribe, GetCurrentMessage,
    /// CreatePullPoint). Subscriptions live under `<path>/subscriptions/<id>` and pull points
    /// under `<path>/pullpoints/<id>`.
    pub path: String,
    /// Scheme, host and port that clients use to reach the broker, e.g.
    /// `"http://gateway.example:8080"`. It starts every address the broker hands out
    /// (subscription managers, pull points). Unset = taken from each request's `Host` header,
    /// which is right unless the broker sits behind a proxy or NAT.
    pub public_base_url: Option<String>,
    /// Largest request body accepted, in bytes. A bigger request is answered `413` with a SOAP
    /// fault, without reading the rest of it.
    pub max_body_bytes: usize,
    /// Time a client has to send its whole request body; a slower request is answered `408`,
    /// so that stalled uploads cannot hold request slots.
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: Duration,
    /// Requests processed at once; more are answered `503` at once, so a flood of large bodies
    /// cannot use more than `max_concurrent_requests × max_body_bytes` of memory.
    pub max_concurrent_requests: usize,
    /// Most subscriptions at once (push and pull together); Subscribe beyond it is answered with
    /// SubscribeCreationFailedFault.
    pub max_subscriptions: usize,
    /// Most topic filters one subscription may expand to (a Full-dialect union `a | b | c`, or
    /// several TopicExpressions, which are intersected); more is answered with
    /// InvalidTopicExpressionFault.
    pub max_filters_per_subscription: usize,
    /// Lifetime of a subscription whose Subscribe has no InitialTerminationTime.
    #[serde(with = "humantime_serde")]
    pub default_subscription_lifetime: Duration,
    /// Longest lifetime granted by Subscribe or Renew. A longer request (or none, `xsi:nil`, on
    /// Renew) is granted this much; the response says the termination time actually set.
    #[serde(with = "humantime_serde")]
    pub max_subscription_lifetime: Duration,
    /// How often expired subscriptions and idle pull points are looked for and removed.
    #[serde(with = "humantime_serde")]
    pub expiry_check_interval: Duration,
    /// Make every message received by Notify the retained (last-value) message of its topic, so
    /// that GetCurrentMessage answers for topics that only WS-N producers publish to. Off by
    /// default: GetCurrentMessage then answers from what MQTT (and other) publishers retained,
    /// and MQTT subscribers are not handed WS-N messages as retained ones.
    pub retain_notify: bool,
    /// Hand consumers JSON payloads (content type `application/json`) as XML elements, in the
    /// W3C XPath 3.1 `json-to-xml` form (`<map xmlns="http://www.w3.org/2005/xpath-functions">`),
    /// rather than as escaped text. A `[[transcode]]` rule for `wsn` that matches first wins.
    pub json_as_xml: bool,
    /// Push delivery to consumers (subscriptions whose consumer is an HTTP address).
    pub push: PushConfig,
    /// Pull points (CreatePullPoint / GetMessages).
    pub pull_point: PullPointConfig,
}

/// How notifications are POSTed to consumers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PushConfig {
    /// Notifications waiting per subscription while its consumer is slow or unreachable. When
    /// full, new notifications for that subscription are dropped (counted as
    /// `outbox_full`).
    pub queue_per_consumer: usize,
    /// Most NotificationMessages in one Notify. `1` (the default) sends each notification in a
    /// Notify of its own, which every consumer understands; a higher value batches whatever is
    /// waiting, for consumers that read every NotificationMessage. UseRaw subscriptions always
    /// get one message per request.
    pub max_messages_per_notify: usize,
    /// Wait before the first retry of a failed delivery (connection refused, timeout, or a
    /// status other than 2xx); it doubles on each further failure.
    #[serde(with = "humantime_serde")]
    pub retry_initial: Duration,
    /// Longest wait between retries.
    #[serde(with = "humantime_serde")]
    pub retry_backoff_max: Duration,
    /// A consumer that has failed every delivery attempt for this long is dropped: its
    /// subscription is removed, with what was waiting for it.
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
    /// Time one delivery request may take, connecting included, before it counts as failed.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Requests in flight at once to one consumer address (scheme, host and port), across all
    /// of its subscriptions. Each subscription delivers in order, one request at a time.
    pub max_concurrent_per_consumer: usize,
    /// The consumers notifications may be POSTed to: networks in CIDR form
    /// (`"192.168.0.0/16"`), single addresses (`"10.0.0.5"`, `"fd00::7"`) or host names
    /// (`"dashboard.lan"`, matched exactly, case-insensitively). The broker POSTs to whatever
    /// address a Subscribe names, so on a network with internal services set this to the
    /// networks consumers live on. Empty (the default) allows any host. A Subscribe naming
    /// another consumer is answered with SubscribeCreationFailedFault; the address is checked
    /// again on every new connection, so a name that starts resolving elsewhere is not
    /// followed. A host name entry trusts whatever that name resolves to. Consumers that are
    /// the broker itself (its HTTP port on a loopback or local address) are always refused.
    pub consumer_allow: Vec<String>,
}

/// Pull point limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PullPointConfig {
    /// Notifications a pull point holds until GetMessages takes them; when full, new ones are
    /// dropped (counted as `queue_full`). Also the most one GetMessages returns.
    pub max_messages: usize,
    /// Most pull points at once; CreatePullPoint beyond it is answered with
    /// UnableToCreatePullPointFault.
    pub max_pull_points: usize,
    /// A pull point nobody has called (GetMessages, Notify) for this long is destroyed, with the
    /// subscriptions that deliver to it. Pull points have no termination time in WS-N 1.3, and
    /// abandoned ones must not pile up.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Bytes one pull point holds until GetMessages takes them: each notification counts its
    /// payload, topic and properties plus 384 bytes of bookkeeping. When full, new
    /// notifications are dropped (counted as `queue_full`), and a Notify sent to the pull
    /// point's own address is refused with a fault.
    pub max_bytes: usize,
    /// Bytes all pull points together hold (counted as for `max_bytes`); beyond it every pull
    /// point drops new notifications as if it were full. Bounds what abandoned pull points can
    /// take from a small gateway's memory.
    pub total_max_bytes: usize,
}

/// The path WS-N brokers conventionally use on tolk's HTTP port.
pub fn default_path() -> String {
    "/wsn".to_owned()
}

impl Default for WsnConfig {
    fn default() -> Self {
        WsnConfig {
            enabled: true,
            path: default_path(),
            public_base_url: None,
            max_body_bytes: 1024 * 1024,
            body_read_timeout: Duration::from_secs(30),
            max_concurrent_requests: 64,
            max_subscriptions: 10_000,
            max_filters_per_subscription: 32,
            default_subscription_lifetime: Duration::from_secs(3600),
            max_subscription_lifetime: Duration::from_secs(24 * 3600),
            expiry_check_interval: Duration::from_secs(1),
            retain_notify: false,
            json_as_xml: true,
            push: PushConfig::default(),
            pull_point: PullPointConfig::default(),
        }
    }
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            queue_per_consumer: 1024,
            max_messages_per_notify: 1,
            retry_initial: Duration::from_millis(500),
            retry_backoff_max: Duration::from_secs(30),
            give_up_after: Duration::from_secs(300),
            request_timeout: Duration::from_secs(10),
            max_concurrent_per_consumer: 4,
            consumer_allow: Vec::new(),
        }
    }
}

impl Default for PullPointConfig {
    fn default() -> Self {
        PullPointConfig {
            max_messages: 1024,
            max_pull_points: 1000,
            idle_timeout: Duration::from_secs(3600),
            max_bytes: 4 * 1024 * 1024,
            total_max_bytes: 32 * 1024 * 1024,
        }
    }
}

impl WsnConfig {
    /// Checks what serde cannot: the path must be usable as a route, the base URL must be an
    /// `http://` or `https://` URL without a path, and limits must be non-zero. The broker
    /// calls this when loading its configuration.
    pub fn validate(&self) -> Result<(), String> {
        let path = self.base_path();
        if path.contains(['{', '}', '*', '?', '#', ' ']) || path.contains("//") {
            return Err(format!("wsn.path {:?} must be a plain URL path such as \"/wsn\"", self.path));
        }
        if let Some(base) = &self.public_base_url {
            let uri: axum::http::Uri = base.parse().map_err(|e| format!("wsn.public_base_url {base:?}: {e}"))?;
            let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
            if !scheme_ok || uri.authority().is_none() || !matches!(uri.path(), "" | "/") {
                return Err(format!(
                    "wsn.public_base_url {base:?} must be scheme, host and port only, e.g. \"http://gateway:8080\""
                ));
            }
        }
        let zero = [
            ("max_body_bytes", self.max_body_bytes),
            ("max_concurrent_requests", self.max_concurrent_requests),
            ("max_filters_per_subscription", self.max_filters_per_subscription),
            ("push.queue_per_consumer", self.push.queue_per_consumer),
            ("push.max_messages_per_notify", self.push.max_messages_per_notify),
            ("push.max_concurrent_per_consumer", self.push.max_concurrent_per_consumer),
            ("pull_point.max_messages", self.pull_point.max_messages),
            ("pull_point.max_bytes", self.pull_point.max_bytes),
            ("pull_point.total_max_bytes", self.pull_point.total_max_bytes),
        ];
        if let Some((name, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(format!("wsn.{name} must be at least 1"));
        }
        for entry in &self.push.consumer_allow {
            AllowEntry::parse(entry).map_err(|e| format!("wsn.push.consumer_allow: {e}"))?;
        }
        if self.expiry_check_interval.is_zero() {
            return Err("wsn.expiry_check_interval must be more than 0s".into());
        }
        Ok(())
    }

    /// The endpoint path without a trailing `/` (empty when the endpoint is at the root), so
    /// that sub-paths can be appended.
    pub(crate) fn base_path(&self) -> String {
        let trimmed = self.path.trim().trim_end_matches('/');
        if trimmed.is_empty() || trimmed.starts_with('/') { trimmed.to_owned() } else { format!("/{trimmed}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_serve_on_wsn() {
        let config = WsnConfig::default();
        assert!(config.enabled);
        assert_eq!(config.base_path(), "/wsn");
        assert_eq!(WsnConfig { path: "/".into(), ..WsnConfig::default() }.base_path(), "");
        assert_eq!(WsnConfig { path: "x/y/".into(), ..WsnConfig::default() }.base_path(), "/x/y");
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn validation_catches_what_serde_cannot() {
        let bad_path = WsnConfig { path: "/wsn/{id}".into(), ..WsnConfig::default() };
        assert!(bad_path.validate().is_err());
        let bad_base = WsnConfig { public_base_url: Some("http://gw:8080/x".into()), ..WsnConfig::default() };
        assert!(bad_base.validate().is_err());
        let good_base = WsnConfig { public_base_url: Some("http://gw:8080".into()), ..WsnConfig::default() };
        assert_eq!(good_base.validate(), Ok(()));
        let zero =
            WsnConfig { push: PushConfig { queue_per_consumer: 0, ..PushConfig::default() }, ..WsnConfig::default() };
        assert!(zero.validate().unwrap_err().contains("queue_per_consumer"));
        let push = |allow: &[&str]| PushConfig {
            consumer_allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            ..PushConfig::default()
        };
        let bad_allow = WsnConfig { push: push(&["10.0.0.0/8", "10.0.0.0/33"]), ..WsnConfig::default() };
        assert!(bad_allow.validate().unwrap_err().contains("consumer_allow"));
    }
}
