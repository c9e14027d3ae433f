//! The broker's configuration file: one TOML document whose sections belong to the core, the
//! HTTP server and each protocol front end. Defaults live in `default-config.toml` (embedded,
//! printed by `--print-default-config`), and a test keeps that file and the `Default` impls equal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tolk_core::frontend::{FrontEnd, Socket};
use tolk_core::transcode::{ContentTypeRule, TranscodeRule, Transcoder};
use tolk_core::{Metrics, RouterConfig};

/// The documented default configuration, as shipped.
pub const DEFAULT_CONFIG: &str = include_str!("../default-config.toml");

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory for state that must survive a restart.
    pub data_dir: PathBuf,
    /// This broker's name on the path of bridged messages (loops are found by it) and in the
    /// bridges' client ids; default: the host name.
    pub node_name: Option<String>,
    /// Logging.
    pub log: LogConfig,
    /// Shutdown behaviour.
    pub shutdown: ShutdownConfig,
    /// Router limits.
    pub core: RouterConfig,
    /// The HTTP server (metrics, health, latency API).
    pub http: HttpConfig,
    /// The AMQP 0.9.1 front end.
    pub amqp: tolk_amqp::AmqpConfig,
    /// The MQTT front end.
    pub mqtt: tolk_mqtt::MqttConfig,
    /// The MQTT-SN gateway.
    pub mqttsn: tolk_mqttsn::MqttSnConfig,
    /// The STOMP front end.
    pub stomp: tolk_stomp::StompConfig,
    /// The WS-Notification endpoint (served on the HTTP port).
    pub wsn: tolk_wsn::WsnConfig,
    /// The XMPP listener and its publish-subscribe service.
    pub xmpp: tolk_xmpp::XmppConfig,
    /// Certificates for the listeners with a `tls_bind`; absent: no TLS.
    pub tls: Option<tolk_tls::TlsConfig>,
    /// Users (a mosquitto_passwd file); absent: every client may connect.
    pub auth: Option<tolk_auth::AuthConfig>,
    /// The durable store in `data_dir/store`.
    pub storage: tolk_store::StorageConfig,
    /// Bridges to other brokers, one `[[bridge]]` table each.
    pub bridge: Vec<tolk_bridge::BridgeConfig>,
    /// Many nodes, one topic space, over NATS JetStream; absent: this node is on its own.
    pub cluster: Option<tolk_cluster::ClusterConfig>,
    /// Payload re-encoding for subscribers, one `[[transcode]]` table per rule; the first rule
    /// that matches a subscriber wins (docs/encodings.md).
    pub transcode: Vec<TranscodeRule>,
    /// What payloads on some topics are, for publishers whose protocol cannot say (MQTT 3.1.1,
    /// MQTT-SN), one `[[content_type]]` table each.
    pub content_type: Vec<ContentTypeRule>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("data"),
            node_name: None,
            log: LogConfig::default(),
            shutdown: ShutdownConfig::default(),
            core: RouterConfig::default(),
            http: HttpConfig::default(),
            amqp: tolk_amqp::AmqpConfig::default(),
            mqtt: tolk_mqtt::MqttConfig::default(),
            mqttsn: tolk_mqttsn::MqttSnConfig::default(),
            stomp: tolk_stomp::StompConfig::default(),
            wsn: tolk_wsn::WsnConfig::default(),
            xmpp: tolk_xmpp::XmppConfig::default(),
            tls: None,
            auth: None,
            storage: tolk_store::StorageConfig::default(),
            bridge: Vec::new(),
            cluster: None,
            transcode: Vec::new(),
            content_type: Vec::new(),
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// Minimum level (`info`), or per-module directives after it (`info,tolk_mqtt=debug`), as in
    /// `RUST_LOG`, which overrides it when set.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "info".into() }
    }
}

/// `[shutdown]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// Longest wait for connections to finish after a stop signal.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { drain_timeout: Duration::from_secs(5) }
    }
}

/// `[http]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Serve HTTP at all.
    pub enabled: bool,
    /// Address and port.
    pub bind: SocketAddr,
    /// Address and port of HTTPS (conventionally 8443), with the `[tls]` certificates: every
    /// route of the HTTP port, WebSocket endpoints as wss. None: no HTTPS.
    pub tls_bind: Option<SocketAddr>,
    /// Most HTTP connections open at once (metrics scrapers, WS-N clients and consumers'
    /// callbacks); more are accepted and closed at once.
    pub max_connections: usize,
    /// Most HTTP connections open at once from one IP address.
    pub max_connections_per_address: usize,
    /// Time a client has to send a request's headers, counted from when the connection is
    /// ready for the next request: an idle keep-alive connection is closed after it too, so
    /// idle sockets cannot use up the file descriptors that every protocol needs.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// Time a whole request may take, body and answer included, e.g. "60s".
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Ask for a user (HTTP Basic, checked against `[auth]`) on `/metrics` and `/api/*`;
    /// `/healthz` stays open. Prometheus scrapes with `basic_auth`.
    pub require_auth: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            enabled: true,
            bind: SocketAddr::from(([0, 0, 0, 0], 8080)),
            tls_bind: None,
            max_connections: 1024,
            max_connections_per_address: 64,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            require_auth: false,
        }
    }
}

impl Config {
    /// Reads and checks a configuration file. Errors name the file, the field and the problem.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read config file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("config file {}", path.display()))
    }

    /// Parses and checks configuration text.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what serde cannot: sizes that must be positive, listeners that clash.
    fn validate(&self) -> anyhow::Result<()> {
        if self.log.level.parse::<tracing_subscriber::filter::Targets>().is_err() {
            bail!(
                "log.level {:?}: a level (info), or a level and module=level directives (info,tolk_mqtt=debug)",
                self.log.level
            );
        }
        let core = &self.core;
        for (field, value) in [
            ("core.outbox_capacity", core.outbox_capacity),
            ("core.outbox_max_bytes", core.outbox_max_bytes),
            ("core.offline_max_bytes", core.offline_max_bytes),
            ("core.queue_max_length", core.queue_max_length),
            ("core.queue_max_bytes", core.queue_max_bytes),
            ("core.consumer_credit", core.consumer_credit),
            ("core.memory_budget_bytes", core.memory_budget_bytes),
            ("core.max_topic_levels", core.max_topic_levels),
            ("core.max_topic_bytes", core.max_topic_bytes),
            ("mqtt.max_connections_per_address", self.mqtt.max_connections_per_address),
            ("stomp.max_connections_per_address", self.stomp.max_connections_per_address),
            ("amqp.max_connections_per_address", self.amqp.max_connections_per_address),
            ("xmpp.max_connections_per_address", self.xmpp.max_connections_per_address),
            ("http.max_connections", self.http.max_connections),
            ("http.max_connections_per_address", self.http.max_connections_per_address),
        ] {
            if value == 0 {
                bail!("{field}: must be at least 1");
            }
        }
        if core.max_topic_bytes > tolk_core::topic::MAX_TOPIC_LEN {
            bail!("core.max_topic_bytes: at most {} (MQTT's own limit)", tolk_core::topic::MAX_TOPIC_LEN);
        }
        for (field, value) in
            [("http.header_timeout", self.http.header_timeout), ("http.request_timeout", self.http.request_timeout)]
        {
            if value.is_zero() {
                bail!("{field}: must be longer than 0");
            }
        }
        self.mqttsn.validate()?;
        self.wsn.validate().map_err(anyhow::Error::msg)?;
        self.xmpp.validate().map_err(anyhow::Error::msg)?;
        if self.wsn.enabled && !self.http.enabled {
            bail!("wsn.enabled: WS-Notification is served on the HTTP port; enable [http] or disable [wsn]");
        }
        let tls_binds = [
            ("http.tls_bind", self.http.enabled && self.http.tls_bind.is_some()),
            ("mqtt.tls_bind", self.mqtt.enabled && self.mqtt.tls_bind.is_some()),
            ("stomp.tls_bind", self.stomp.enabled && self.stomp.tls_bind.is_some()),
            ("amqp.tls_bind", self.amqp.enabled && self.amqp.tls_bind.is_some()),
            ("xmpp.tls_bind", self.xmpp.enabled && self.xmpp.tls_bind.is_some()),
        ];
        match &self.tls {
            None => {
                if let Some((setting, _)) = tls_binds.iter().find(|(_, set)| *set) {
                    bail!("{setting} is set, but there is no [tls] section with cert_file and key_file");
                }
            }
            // The files are read now, so that --check-config finds a missing or bad one.
            Some(tls) => drop(tolk_tls::Tls::load(tls.clone())?),
        }
        if self.http.require_auth && self.auth.as_ref().is_none_or(|a| a.password_file.is_none()) {
            bail!("http.require_auth: needs users, an [auth] section with password_file");
        }
        if let Some(auth) = &self.auth {
            // The file is read now, so that --check-config finds a missing or bad one.
            drop(tolk_auth::Users::load(auth.clone()).map_err(anyhow::Error::msg)?);
        }
        if let Some(name) = &self.node_name
            && (name.is_empty() || name.contains([',', ' ']))
        {
            bail!("node_name: not empty, and no ',' or ' ' (it goes on the paths of bridged messages)");
        }
        // The .proto files are compiled now, so that --check-config finds a bad one.
        drop(self.transcoder(Arc::new(Metrics::new()))?);
        self.bridges().validate()?;
        if let Some(cluster) = &self.cluster {
            if let (Some(top), Some(theirs)) = (&self.node_name, &cluster.node_name)
                && top != theirs
            {
                bail!("cluster.node_name: {theirs:?} differs from node_name {top:?}; give one of them");
            }
            cluster.validate(&self.node_name())?;
        }
        let mut seen: HashMap<(Socket, u16), &str> = HashMap::new();
        let http = [("http.bind", Some(self.http.bind)), ("http.tls_bind", self.http.tls_bind)]
            .into_iter()
            .filter_map(|(setting, addr)| Some((setting, Socket::Tcp, addr?)))
            .filter(|_| self.http.enabled);
        let listens = self.front_ends().into_iter().flat_map(|f| f.listens()).map(|l| (l.setting, l.socket, l.addr));
        for (name, transport, addr) in http.into_iter().chain(listens) {
            if addr.port() == 0 {
                continue;
            }
            if let Some(other) = seen.insert((transport, addr.port()), name) {
                bail!("{name}: port {} is already used by {other}", addr.port());
            }
        }
        Ok(())
    }

    /// The `[[transcode]]` rules compiled, followed by the built-in one for WS-N
    /// (`[wsn] json_as_xml`); `None` when there is nothing to re-encode.
    pub fn transcoder(&self, metrics: Arc<Metrics>) -> anyhow::Result<Option<Transcoder>> {
        let mut rules = self.transcode.clone();
        if self.wsn.enabled && self.wsn.json_as_xml {
            rules.push(tolk_core::transcode::wsn_json_as_xml());
        }
        if rules.is_empty() {
            return Ok(None);
        }
        Ok(Some(Transcoder::new(&rules, &self.content_type, metrics)?))
    }

    /// The enabled protocol front ends, built from their sections.
    pub fn front_ends(&self) -> Vec<Box<dyn FrontEnd>> {
        let mut front_ends: Vec<Box<dyn FrontEnd>> = Vec::new();
        if self.amqp.enabled {
            front_ends.push(Box::new(tolk_amqp::AmqpFrontEnd::new(self.amqp.clone())));
        }
        if self.mqtt.enabled {
            front_ends.push(Box::new(tolk_mqtt::MqttFrontEnd::new(self.mqtt.clone())));
        }
        if self.mqttsn.enabled {
            front_ends.push(Box::new(tolk_mqttsn::MqttSnFrontEnd::new(self.mqttsn.clone())));
        }
        if self.stomp.enabled {
            front_ends.push(Box::new(tolk_stomp::StompFrontEnd::new(self.stomp.clone())));
        }
        if self.http.enabled && self.wsn.enabled {
            front_ends.push(Box::new(tolk_wsn::WsnFrontEnd::new(self.wsn.clone())));
        }
        if self.xmpp.enabled {
            front_ends.push(Box::new(tolk_xmpp::XmppFrontEnd::new(self.xmpp.clone())));
        }
        if !self.bridge.is_empty() {
            front_ends.push(Box::new(self.bridges()));
        }
        if let Some(cluster) = &self.cluster {
            front_ends.push(Box::new(tolk_cluster::Cluster::new(cluster.clone(), self.node_name())));
        }
        front_ends
    }

    /// The `[[bridge]]` tables with the bridge kinds this binary has.
    fn bridges(&self) -> tolk_bridge::Bridges {
        tolk_bridge::Bridges::new(
            self.bridge.clone(),
            vec![tolk_bridge_mqtt::runner(), tolk_bridge_amqp::runner(), tolk_bridge_wsn::runner()],
        )
    }

    /// `node_name` (or `[cluster] node_name`), or the host name when neither is set.
    pub fn node_name(&self) -> String {
        if let Some(name) = self.node_name.as_ref().or(self.cluster.as_ref().and_then(|c| c.node_name.as_ref())) {
            return name.clone();
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().replace([',', ' '], "-"))
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "tolk".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_default_file_equals_built_in_defaults() {
        assert_eq!(Config::parse(DEFAULT_CONFIG).unwrap(), Config::default());
    }

    #[test]
    fn empty_file_means_defaults() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
    }

    #[test]
    fn errors_name_the_field_and_the_problem() {
        let err = format!("{:#}", Config::parse("[http]\nbind = \"nowhere\"\n").unwrap_err());
        assert!(err.contains("bind") && err.contains("line 2"), "{err}");
        let err = format!("{:#}", Config::parse("[core]\nbogus = 1\n").unwrap_err());
        assert!(err.contains("unknown field `bogus`"), "{err}");
        let err = format!("{:#}", Config::parse("[core]\noutbox_capacity = 0\n").unwrap_err());
        assert!(err.contains("core.outbox_capacity: must be at least 1"), "{err}");
        let err = format!("{:#}", Config::parse("[shutdown]\ndrain_timeout = \"soon\"\n").unwrap_err());
        assert!(err.contains("drain_timeout"), "{err}");
    }

    #[test]
    fn bridge_tables_parse_and_bad_ones_say_why() {
        let text = r#"
node_name = "gw1"

[[bridge]]
name = "site"
kind = "mqtt"
url = "mqtts://site:8883"
topics = ["sensors/# out 1", "cmd/# in 1 greenhouse/ ''"]
ack_timeout = "5s"
"#;
        let config = Config::parse(text).unwrap();
        assert_eq!(config.node_name(), "gw1");
        assert_eq!(config.bridge[0].ack_timeout, Duration::from_secs(5));
        assert_eq!(config.front_ends().last().map(|f| f.name()), Some("bridges"));
        for (bad, says) in [
            (text.replace("sensors/# out 1", "sensors/# sideways"), "direction"),
            (text.replace("mqtts://", "amqp://"), "mqtt:// or mqtts://"),
            (text.replace("kind = \"mqtt\"", "kind = \"wsn\"").replace("mqtts://", "http://"), "needs local_url"),
            (text.replace("kind = \"mqtt\"", "kind = \"wsn\"").replace("mqtts://", "https://"), "not available yet"),
            (text.replace("node_name = \"gw1\"", "node_name = \"a,b\""), "node_name"),
        ] {
            let err = format!("{:#}", Config::parse(&bad).unwrap_err());
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn a_cluster_table_starts_the_cluster_under_one_node_name() {
        let text = "[cluster]\nnats_urls = [\"nats://a:4222\"]\nnode_name = \"gw-2\"\n";
        let config = Config::parse(text).unwrap();
        assert_eq!(config.node_name(), "gw-2");
        assert_eq!(config.front_ends().last().map(|f| f.name()), Some("cluster"));
        for (bad, says) in [
            (format!("node_name = \"gw1\"\n{text}"), "differs from node_name"),
            (text.replace("gw-2", "gw.2"), "node_name"),
            (text.replace("nats://a:4222", "http://a"), "nats_urls"),
        ] {
            let err = format!("{:#}", Config::parse(&bad).unwrap_err());
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn transcode_rules_are_checked_when_the_configuration_is() {
        let text = r#"
[[transcode]]
topics = "sensors/#"
to = "application/cbor"
protocols = ["mqttsn"]

[[content_type]]
topics = "sensors/#"
type = "application/json"
"#;
        let config = Config::parse(text).unwrap();
        assert_eq!(config.transcode[0].protocols, ["mqttsn"]);
        assert!(config.transcoder(Arc::new(Metrics::new())).unwrap().is_some());
        for (bad, says) in [
            (text.replace("application/cbor", "text/csv"), "transcode[0]: content type \"text/csv\""),
            (text.replace("\"mqttsn\"", "\"coap\""), "protocol \"coap\""),
            (text.replace("type = \"application/json\"", "type = \"x\""), "content_type[0]"),
            (
                text.replace(
                    "protocols = [\"mqttsn\"]",
                    "proto = { file = \"/nonexistent.proto\", message = \"a.B\" }",
                ),
                "transcode[0]: proto: /nonexistent.proto",
            ),
        ] {
            let err = format!("{:#}", Config::parse(&bad).unwrap_err());
            assert!(err.contains(says), "{err}");
        }
    }
}
