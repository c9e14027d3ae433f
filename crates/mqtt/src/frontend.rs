//! The MQTT front end as the broker sees it: declares its port, binds it, starts the shared
//! TCP accept loop with this crate's connection handler, and the reaper that expires offline
//! sessions and publishes delayed wills.

use std::future::Future;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started, Transport};
use tolk_core::listener::{Connection, ConnectionHandler, ConnectionLimits, bind_tcp, spawn_tcp};
use tolk_core::{CloseReason, Protocol};

use crate::config::MqttConfig;
use crate::connection::{self, Shared};
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
        if !self.config.enabled {
            return Vec::new();
        }
        vec![Listen { name: "mqtt", transport: Transport::Tcp, addr: self.config.bind }]
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            if !self.config.enabled {
                return Ok(Started::default());
            }
            let listener = bind_tcp("mqtt", self.config.bind).await?;
            let addr = listener.local_addr()?;
            let registry = Arc::new(Registry::new(self.config.max_sessions));
            let reaper = registry.clone();
            let shutdown = ctx.shutdown.clone();
            ctx.tracker.spawn(async move { reaper.run_reaper(shutdown).await });
            let limits = ConnectionLimits {
                max_connections: self.config.max_connections,
                max_per_address: self.config.max_connections_per_address,
            };
            let shared = Arc::new(Shared { config: Arc::new(self.config), registry, auth: ctx.auth.clone() });
            spawn_tcp(listener, Arc::new(Handler(shared)), limits, &ctx);
            tracing::info!(%addr, "MQTT 3.1.1/5.0 listening");
            Ok(Started::listening(vec![addr]))
        })
    }
}
