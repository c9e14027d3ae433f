//! The MQTT front end as the broker sees it: declares its port, binds it, starts the shared
//! TCP accept loop with this crate's connection handler, and the reaper that expires offline
//! sessions and publishes delayed wills.

use std::future::Future;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started};
use tolk_core::listener::{Connection, ConnectionHandler, TcpListeners, WebSocketEndpoint};
use tolk_core::{CloseReason, Protocol};

use crate::config::MqttConfig;
use crate::connection::{self, Shared};
use crate::kept;
use crate::registry::Registry;

/// MQTT 3.1.1 and 5.0 on one TCP port, over the core router.
pub struct MqttFrontEnd {
    config: MqttConfig,
}

impl MqttFrontEnd {
    /// A front end with these settings; nothing happens until [`FrontEnd::start`].
    pub fn new(config: MqttConfig) -> Self {
        MqttFrontEnd { config }
    }

    fn listeners(&self) -> TcpListeners {
        let c = &self.config;
        let limits = (c.max_connections, c.max_connections_per_address);
        TcpListeners::new("MQTT 3.1.1/5.0", ("mqtt.bind", "mqtt.tls_bind"), c.enabled, (c.bind, c.tls_bind), limits)
    }
}

struct Handler(Arc<Shared>);

impl ConnectionHandler for Handler {
    fn protocol(&self) -> Protocol {
        Protocol::Mqtt
    }

    fn handle(self: Arc<Self>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
        connection::run(self.0.clone(), connection)
    }
}

impl FrontEnd for MqttFrontEnd {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn listens(&self) -> Vec<Listen> {
        self.listeners().listens()
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            if !self.config.enabled {
                return Ok(Started::default());
            }
            let listeners = self.listeners();
            let registry = Arc::new(Registry::new(self.config.max_sessions));
            match kept::restore(&ctx.router, &*ctx.auth) {
                Ok(parked) if parked.is_empty() => {}
                Ok(parked) => {
                    let sessions = parked.into_iter().filter_map(|p| registry.restore(p).then_some(())).count();
                    tracing::info!(sessions, "persistent MQTT sessions restored from the store");
                }
                Err(e) => tracing::warn!(error = %e, "persistent MQTT sessions could not be restored"),
            }
            let shared =
                Arc::new(Shared { config: Arc::new(self.config), registry: registry.clone(), auth: ctx.auth.clone() });
            let websocket = shared.config.websocket.then(|| WebSocketEndpoint {
                path: "/mqtt",
                // MQTT 5.0 §6 and 3.1.1 §6 name `mqtt`; older clients offer `mqttv3.1`.
                subprotocols: &["mqtt", "mqttv3.1"],
                // A packet may span messages; a message larger than a packet is not needed.
                max_message_bytes: shared.config.max_packet_size_bytes as usize,
                limits: listeners.limits,
            });
            let handler = Arc::new(Handler(shared));
            let addrs = listeners.start(handler.clone(), &ctx).await?;
            let shutdown = ctx.shutdown.clone();
            ctx.tracker.spawn(async move { registry.run_reaper(shutdown).await });
            let routes = websocket.map(|endpoint| endpoint.routes(handler, &ctx));
            Ok(Started { addrs, routes })
        })
    }
}
