//! One `[[bridge]]` table of the configuration file.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::rule::TopicRule;

/// What kind of broker the remote is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An MQTT broker (Mosquitto, another tolk, EMQX…), as an MQTT client.
    Mqtt,
    /// An AMQP 0.9.1 broker (RabbitMQ), through an exchange.
    Amqp,
    /// A WS-Notification broker, by subscribing with our own consumer and sending Notify.
    Wsn,
}

impl Kind {
    /// The name used in configuration, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mqtt => "mqtt",
            Kind::Amqp => "amqp",
            Kind::Wsn => "wsn",
        }
    }
}

/// One bridge to a remote broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// Names the bridge in logs, metrics, `/api/bridges` and its spool.
    pub name: String,
    /// The remote's kind.
    pub kind: Kind,
    /// Where the remote is: `mqtt://host:port`, `mqtts://…`, `amqp://user:pass@host:port/vhost`,
    /// `amqps://…`, `http(s)://host:port/path`.
    pub url: String,
    /// User name at the remote.
    #[serde(default)]
    pub username: Option<String>,
    /// Password at the remote.
    #[serde(default)]
    pub password: Option<String>,
    /// Topic rules in Mosquitto's `topic` line syntax (see [`TopicRule`]).
    pub topics: Vec<String>,
    /// Bridges a message may have crossed and still be sent out (1: only what was published
    /// here, or arrived without crossing a bridge).
    #[serde(default = "default_hop_limit")]
    pub hop_limit: u8,
    /// Bytes the spool keeps for the remote while it is down or slow; beyond them publishers
    /// are refused as for a full queue.
    #[serde(default = "default_spool_max_bytes")]
    pub spool_max_bytes: usize,
    /// Messages sent to the remote and not yet acknowledged, at most.
    #[serde(default = "default_max_inflight")]
    pub max_inflight: u16,
    /// A remote that acknowledges nothing for this long while messages wait is dropped, and
    /// the connection made again; what it had not acknowledged is sent again.
    #[serde(default = "default_ack_timeout", with = "humantime_serde")]
    pub ack_timeout: Duration,
    /// The first wait before connecting again; doubled after each failure up to
    /// `reconnect_max`, with jitter.
    #[serde(default = "default_reconnect_min", with = "humantime_serde")]
    pub reconnect_min: Duration,
    /// The longest wait before connecting again.
    #[serde(default = "default_reconnect_max", with = "humantime_serde")]
    pub reconnect_max: Duration,
    /// Keep-alive towards the remote (MQTT), or its heartbeat (AMQP).
    #[serde(default = "default_keep_alive", with = "humantime_serde")]
    pub keep_alive: Duration,
    /// The client id at the remote (MQTT); default `tolk-<node>-<name>`. The remote keeps its
    /// session under it while the bridge is away.
    #[serde(default)]
    pub client_id: Option<String>,
    /// MQTT protocol level towards the remote: 5, or 4 for MQTT 3.1.1 remotes (then no `out`
    /// rule may meet an `in` rule at the remote: 3.1.1 has no No Local).
    #[serde(default = "default_mqtt_version")]
    pub mqtt_version: u8,
    /// The remote's exchange (AMQP).
    #[serde(default = "default_exchange")]
    pub exchange: String,
    /// PEM certificates to trust for `mqtts://` and `amqps://`; default: the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Where the remote reaches this broker's HTTP port (`http://gw1.lan:8080`), for WS-N
    /// bridges with `in` rules: their consumer is served there, at `/bridges/<name>/<key>`.
    #[serde(default)]
    pub local_url: Option<String>,
    /// The remote's name on the path of the messages it brings in (default: this bridge's
    /// name). Set it to the remote tolk's `node_name` to make loops through it detectable
    /// on either side.
    #[serde(default)]
    pub remote_node: Option<String>,
}

fn default_hop_limit() -> u8 {
    1
}

fn default_spool_max_bytes() -> usize {
    64 * 1024 * 1024
}

fn default_max_inflight() -> u16 {
    64
}

fn default_ack_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_reconnect_min() -> Duration {
    Duration::from_secs(1)
}

fn default_reconnect_max() -> Duration {
    Duration::from_secs(60)
}

fn default_keep_alive() -> Duration {
    Duration::from_secs(60)
}

fn default_mqtt_version() -> u8 {
    5
}

fn default_exchange() -> String {
    "amq.topic".to_owned()
}

/// Why a `[[bridge]]` table was refused.
#[derive(Debug, thiserror::Error)]
#[error("bridge {name:?}: {reason}")]
pub struct ConfigError {
    name: String,
    reason: String,
}

impl BridgeConfig {
    /// A bridge with the defaults (for tests and examples).
    pub fn new(name: &str, kind: Kind, url: &str, topics: &[&str]) -> Self {
        BridgeConfig {
            name: name.to_owned(),
            kind,
            url: url.to_owned(),
            username: None,
            password: None,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            hop_limit: default_hop_limit(),
            spool_max_bytes: default_spool_max_bytes(),
            max_inflight: default_max_inflight(),
            ack_timeout: default_ack_timeout(),
            reconnect_min: default_reconnect_min(),
            reconnect_max: default_reconnect_max(),
            keep_alive: default_keep_alive(),
            client_id: None,
            mqtt_version: default_mqtt_version(),
            exchange: default_exchange(),
            ca_file: None,
            local_url: None,
            remote_node: None,
        }
    }

    /// The url as logs show it: a password in it (`amqp://user:secret@host`) is replaced by
    /// `***`.
    pub fn url_for_logs(&self) -> String {
        let Some((scheme, rest)) = self.url.split_once("://") else { return self.url.clone() };
        let authority_end = rest.find('/').unwrap_or(rest.len());
        match rest[..authority_end].rsplit_once('@') {
            Some((userinfo, _)) if userinfo.contains(':') => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                let host_and_path = &rest[userinfo.len()..];
                format!("{scheme}://{user}:***{host_and_path}")
            }
            _ => self.url.clone(),
        }
    }

    /// An error about this bridge.
    pub fn error(&self, reason: &str) -> ConfigError {
        ConfigError { name: self.name.clone(), reason: reason.to_owned() }
    }

    /// Its topic rules, parsed and checked.
    pub fn rules(&self) -> Result<Vec<TopicRule>, ConfigError> {
        let fail = |reason: String| ConfigError { name: self.name.clone(), reason };
        if self.topics.is_empty() {
            return Err(fail("no topics: give at least one rule, e.g. topics = [\"# out 1\"]".into()));
        }
        let rules = self
            .topics
            .iter()
            .map(|line| line.parse::<TopicRule>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(e.to_string()))?;
        Ok(rules)
    }

    /// MQTT 3.1.1 has no No Local and no properties: what the bridge sends to a remote topic
    /// that one of its own `in` subscriptions covers comes back, with no path to tell it by.
    /// So at 3.1.1 no `out` rule may meet an `in` rule at the remote (a `both` rule meets
    /// itself).
    fn check_no_echo(&self) -> Result<(), ConfigError> {
        let rules = self.rules()?;
        for out in rules.iter().filter(|r| r.direction.goes_out()) {
            if let Some(back) = rules
                .iter()
                .filter(|r| r.direction.comes_in())
                .find(|r| overlap(&out.remote_filter(), &r.remote_filter()))
            {
                return Err(self.error(&format!(
                    "mqtt_version = 4: \"{out}\" and \"{back}\" meet at the remote, and MQTT 3.1.1 has no No Local: what the bridge sends there would come back to it; use MQTT 5, or rules that do not meet"
                )));
            }
        }
        Ok(())
    }

    /// Checks everything that can be checked before connecting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |reason: &str| ConfigError { name: self.name.clone(), reason: reason.to_owned() };
        if self.name.is_empty() || self.name.contains(['/', '+', '#', ',']) {
            return Err(fail("a name is not empty and holds no '/', '+', '#' or ','"));
        }
        self.rules()?;
        if self.hop_limit == 0 {
            return Err(fail("hop_limit 0 would send nothing; the least is 1"));
        }
        if self.max_inflight == 0 {
            return Err(fail("max_inflight is at least 1"));
        }
        match self.mqtt_version {
            5 => {}
            4 => self.check_no_echo()?,
            _ => return Err(fail("mqtt_version is 5, or 4 for MQTT 3.1.1")),
        }
        if self.reconnect_min.is_zero() || self.reconnect_max < self.reconnect_min {
            return Err(fail("reconnect_min is above zero and at most reconnect_max"));
        }
        let schemes: &[&str] = match self.kind {
            Kind::Mqtt => &["mqtt://", "mqtts://"],
            Kind::Amqp => &["amqp://", "amqps://"],
            Kind::Wsn => &["http://", "https://"],
        };
        if !schemes.iter().any(|s| self.url.starts_with(s)) {
            return Err(fail(&format!("a {} bridge's url starts with {}", self.kind.as_str(), schemes.join(" or "))));
        }
        if self.kind == Kind::Wsn {
            if self.url.starts_with("https://") {
                return Err(fail("https:// remotes are not available yet for WS-N bridges; use http://"));
            }
            let comes_in = self.rules()?.iter().any(|r| r.direction.comes_in());
            match &self.local_url {
                None if comes_in => {
                    return Err(fail(
                        "a wsn bridge with in rules needs local_url: the address at which the remote reaches this broker's HTTP port (http://gw1.lan:8080)",
                    ));
                }
                Some(url) if !url.starts_with("http://") && !url.starts_with("https://") => {
                    return Err(fail("local_url starts with http:// or https://"));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether some topic matches both filters.
fn overlap(a: &str, b: &str) -> bool {
    let (mut a, mut b) = (a.split('/'), b.split('/'));
    loop {
        match (a.next(), b.next()) {
            (Some("#"), _) | (_, Some("#")) | (None, None) => return true,
            (Some(x), Some(y)) if x == "+" || y == "+" || x == y => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_3_1_1_bridges_may_not_let_out_and_in_meet() {
        let mut c = BridgeConfig::new("b", Kind::Mqtt, "mqtt://h", &["sensors/# out 1", "cmd/# in 1"]);
        c.mqtt_version = 4;
        assert!(c.validate().is_ok());
        for topics in [&["# both 1"][..], &["a/+/c out 1", "a/b/# in 1"], &["x out 1 here/ there/", "there/x in 1"]] {
            c.topics = topics.iter().map(|t| (*t).to_owned()).collect();
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains("No Local"), "{topics:?}: {err}");
        }
        assert!(overlap("a/#", "a") && overlap("+/b", "a/+") && !overlap("a/b", "a/c") && !overlap("a/b", "a/b/c"));
    }

    #[test]
    fn passwords_in_urls_stay_out_of_logs() {
        let mut c = BridgeConfig::new("b", Kind::Amqp, "amqp://u:p@ss@h:5672/v", &["# out 1"]);
        assert_eq!(c.url_for_logs(), "amqp://u:***@h:5672/v");
        c.url = "amqps://user@h/%2f".into();
        assert_eq!(c.url_for_logs(), "amqps://user@h/%2f");
        c.url = "http://h:80/a@b:c".into();
        assert_eq!(c.url_for_logs(), "http://h:80/a@b:c");
    }

    #[test]
    fn the_defaults_validate() {
        BridgeConfig::new("up", Kind::Mqtt, "mqtt://h:1883", &["a/# out 1"]).validate().unwrap();
    }

    #[test]
    fn bad_tables_are_refused_with_what_to_change() {
        let mut c = BridgeConfig::new("up", Kind::Mqtt, "amqp://h", &["a out"]);
        assert!(c.validate().unwrap_err().to_string().contains("mqtt:// or mqtts://"));
        c.url = "mqtt://h".into();
        c.mqtt_version = 3;
        assert!(c.validate().unwrap_err().to_string().contains("mqtt_version is 5"));
        c.mqtt_version = 5;
        c.validate().unwrap();
        c.topics.clear();
        assert!(c.validate().unwrap_err().to_string().contains("no topics"));
    }
}
