//! The `[cluster]` table of the configuration file.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Joining a cluster of tolk nodes over NATS JetStream. Absent: this node is on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The NATS servers to try, `nats://host:4222` or `tls://host:4222`; the client also
    /// learns the rest of the NATS cluster from the first it reaches.
    pub nats_urls: Vec<String>,
    /// This node's name: its JetStream consumer is `tolk-<node_name>`, and its messages carry
    /// it. Default: the top-level `node_name`, or the host name. Unique within the cluster.
    #[serde(default)]
    pub node_name: Option<String>,
    /// User name at NATS (with `password`).
    #[serde(default)]
    pub user: Option<String>,
    /// Password at NATS.
    #[serde(default)]
    pub password: Option<String>,
    /// A NATS authentication token (instead of a user and password).
    #[serde(default)]
    pub token: Option<String>,
    /// Certificate authorities to trust for `tls://` servers, beside the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A client certificate for servers that verify clients (with `key_file`).
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// First token of every subject and stream name this cluster uses: subjects
    /// `<prefix>.0.<topic>` (at most once) and `<prefix>.1.<topic>` (at least once), stream
    /// `<PREFIX>`, retained bucket `<prefix>_retained`. Clusters sharing a NATS differ here.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// Copies JetStream keeps of each message and retained value (default: 3 when the NATS
    /// cluster has three servers or more, listed here or learnt from them, else 1).
    #[serde(default)]
    pub replicas: Option<usize>,
    /// How long the stream keeps a message for nodes that are away.
    #[serde(default = "default_max_age", with = "humantime_serde")]
    pub max_age: Duration,
    /// Bytes the stream keeps at most (the oldest go first).
    #[serde(default = "default_stream_max_bytes")]
    pub stream_max_bytes: i64,
    /// Bytes kept here for NATS while it is unreachable; beyond them at-least-once publishers
    /// are refused as for a full queue.
    #[serde(default = "default_spool_max_bytes")]
    pub spool_max_bytes: usize,
    /// Messages sent to JetStream and not yet acknowledged, at most.
    #[serde(default = "default_max_inflight")]
    pub max_inflight: u16,
    /// A JetStream acknowledgement not back after this long ends the connection; what was
    /// not acknowledged is sent again (JetStream drops the duplicates by message id).
    #[serde(default = "default_ack_timeout", with = "humantime_serde")]
    pub ack_timeout: Duration,
    /// The first wait before connecting again; doubled after each failure up to
    /// `reconnect_max`, with jitter.
    #[serde(default = "default_reconnect_min", with = "humantime_serde")]
    pub reconnect_min: Duration,
    /// The longest wait before connecting again.
    #[serde(default = "default_reconnect_max", with = "humantime_serde")]
    pub reconnect_max: Duration,
}

fn default_prefix() -> String {
    "tolk".into()
}
fn default_max_age() -> Duration {
    Duration::from_secs(24 * 3600)
}
fn default_stream_max_bytes() -> i64 {
    1 << 30
}
fn default_spool_max_bytes() -> usize {
    64 << 20
}
fn default_max_inflight() -> u16 {
    256
}
fn default_ack_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_reconnect_min() -> Duration {
    Duration::from_millis(200)
}
fn default_reconnect_max() -> Duration {
    Duration::from_secs(10)
}

/// Why a build without the `nats` feature refuses `[cluster]`.
pub(crate) const NOT_BUILT: &str = "this build of tolk has no cluster: it was built without the `cluster` feature, \
     as the Raspberry Pi packages are for now (docs/deploy-pi.md, \"Binary size\")";

/// A `[cluster]` setting that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("[cluster] {0}")]
pub struct ConfigError(String);

/// Whether `name` can be one NATS subject token and a consumer or stream name.
fn nats_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl ClusterConfig {
    /// Checks the settings; `node` is the name this node will use.
    pub fn validate(&self, node: &str) -> Result<(), ConfigError> {
        let fail = |what: &str| Err(ConfigError(what.to_owned()));
        if self.nats_urls.is_empty() {
            return fail("nats_urls: give at least one NATS server");
        }
        if let Some(url) = self.nats_urls.iter().find(|u| !(u.starts_with("nats://") || u.starts_with("tls://"))) {
            return fail(&format!("nats_urls: {url:?} is not nats:// or tls://"));
        }
        if !nats_name(node) {
            return fail(&format!(
                "node_name {node:?}: letters, digits, '-' and '_' only (it names a JetStream consumer)"
            ));
        }
        if !nats_name(&self.prefix) {
            return fail("prefix: letters, digits, '-' and '_' only");
        }
        if self.token.is_some() && (self.user.is_some() || self.password.is_some()) {
            return fail("token and user/password: give one of them");
        }
        if self.user.is_some() != self.password.is_some() {
            return fail("user and password go together");
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            return fail("cert_file and key_file go together");
        }
        if !matches!(self.replicas(0), 1..=5) {
            return fail("replicas: 1 to 5");
        }
        if self.max_inflight == 0 {
            return fail("max_inflight: at least 1");
        }
        if cfg!(not(feature = "nats")) {
            return fail(NOT_BUILT);
        }
        Ok(())
    }

    /// The replicas to ask JetStream for, with `servers` NATS servers known in the cluster.
    pub fn replicas(&self, servers: usize) -> usize {
        self.replicas.unwrap_or(if servers.max(self.nats_urls.len()) >= 3 { 3 } else { 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> ClusterConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_follow_the_servers_listed() {
        let one = config("nats_urls = [\"nats://a:4222\"]");
        assert_eq!((one.replicas(1), one.prefix.as_str(), one.max_inflight), (1, "tolk", 256));
        assert_eq!(one.replicas(3), 3, "three servers learnt from the one listed");
        let three = config("nats_urls = [\"nats://a\", \"nats://b\", \"tls://c\"]");
        assert_eq!(three.replicas(0), 3);
        assert!(three.validate("gw-1").is_ok());
    }

    #[test]
    fn bad_settings_are_named() {
        let ok = config("nats_urls = [\"nats://a\"]");
        for (config, node, what) in [
            (ClusterConfig { nats_urls: vec![], ..ok.clone() }, "n", "nats_urls"),
            (ClusterConfig { nats_urls: vec!["http://a".into()], ..ok.clone() }, "n", "nats_urls"),
            (ok.clone(), "a.b", "node_name"),
            (ClusterConfig { user: Some("u".into()), ..ok.clone() }, "n", "user"),
            (ClusterConfig { replicas: Some(7), ..ok.clone() }, "n", "replicas"),
        ] {
            let e = config.validate(node).unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
    }
}
