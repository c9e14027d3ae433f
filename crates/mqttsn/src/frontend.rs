//! The [`FrontEnd`] for MQTT-SN: binds the UDP socket, loads the topic-id registry from the
//! data directory and starts the endpoint task and the registry writer. UDP has no accept loop,
//! so the shared TCP listener does not apply; the endpoint does its own connection accounting.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, Socket, StartFuture, Started};
use tracing::{Instrument, info, info_span};

use crate::config::MqttSnConfig;
use crate::endpoint::{Endpoint, EndpointSettings};
use crate::gateway::{Gateway, Limits};
use crate::persist::Persister;
use crate::predefined::PredefinedCatalog;
use crate::registry::{REGISTRY_FILE, TopicRegistry};
use crate::socket;
use crate::stats::GatewayStats;

/// The MQTT-SN 1.2 gateway, speaking to the core directly (no second MQTT hop).
pub struct MqttSnFrontEnd {
    config: MqttSnConfig,
    stats: Arc<GatewayStats>,
}

impl MqttSnFrontEnd {
    /// A gateway with these settings; nothing is bound until [`FrontEnd::start`].
    pub fn new(config: MqttSnConfig) -> Self {
        MqttSnFrontEnd { config, stats: Arc::default() }
    }

    /// The gateway's own counters (malformed datagrams, refusals...), readable while it runs.
    pub fn stats(&self) -> Arc<GatewayStats> {
        self.stats.clone()
    }
}

impl FrontEnd for MqttSnFrontEnd {
    fn name(&self) -> &'static str {
        "mqttsn"
    }

    fn listens(&self) -> Vec<Listen> {
        if !self.config.enabled {
            return Vec::new();
        }
        vec![Listen { setting: "mqttsn.bind", socket: Socket::Udp, addr: self.config.bind }]
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            let MqttSnFrontEnd { config, stats } = *self;
            if !config.enabled {
                return Ok(Started::default());
            }
            config.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            std::fs::create_dir_all(&ctx.data_dir).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot create data directory {}: {e}", ctx.data_dir.display()))
            })?;
            let registry_path = ctx.data_dir.join(REGISTRY_FILE);
            let registry = TopicRegistry::load(&registry_path, config.max_topic_ids)?;
            let (socket, granted) = socket::bind(config.bind, config.receive_buffer_bytes).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot listen for mqttsn on udp {}: {e}", config.bind))
            })?;
            if granted < config.receive_buffer_bytes {
                // Info, not a warning: the default asks for more than a stock Raspberry Pi OS
                // grants, and the gateway works with less; drops, if any, are warned about.
                info!(
                    asked = config.receive_buffer_bytes,
                    granted,
                    "the kernel granted a smaller MQTT-SN receive buffer than receive_buffer_bytes; \
                     raise net.core.rmem_max to allow it"
                );
            }
            if let Some(drops) = socket::KernelDrops::for_socket(&socket) {
                ctx.tracker.spawn(socket::count_drops(drops, ctx.router.metrics().clone(), ctx.shutdown.clone()));
            }
            if config.advertise.enabled {
                socket.set_broadcast(true)?;
            }
            let local: SocketAddr = socket.local_addr()?;
            let persister = Persister::spawn(registry_path, &registry, &ctx.tracker);
            let limits = Limits::new(&config, ctx.router.config().outbox_capacity);
            let users =
                config.clients.iter().filter_map(|(id, client)| Some((id.clone(), client.user.clone()?))).collect();
            let gateway = Gateway {
                router: ctx.router.clone(),
                registry,
                stats,
                limits: Arc::new(limits),
                auth: ctx.auth.clone(),
                users,
            };
            let settings = EndpointSettings {
                gateway_id: config.gateway_id,
                max_clients: config.max_clients,
                max_clients_per_address: config.max_clients_per_address,
                max_message_size: config.max_message_size_bytes,
                advertise: config.advertise.clone(),
            };
            let endpoint = Endpoint::new(
                socket,
                gateway,
                PredefinedCatalog::new(&config),
                settings,
                persister,
                ctx.shutdown.child_token(),
                ctx.tracker.clone(),
            );
            ctx.tracker.spawn(endpoint.run().instrument(info_span!("mqttsn", %local)));
            info!(%local, "MQTT-SN gateway listening (udp)");
            Ok(Started::listening(vec![local]))
        })
    }
}
