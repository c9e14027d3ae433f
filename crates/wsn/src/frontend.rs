//! [`WsnFrontEnd`]: builds the endpoint from its configuration and hands the broker the routes
//! to merge into its HTTP app. It binds no socket of its own. To refuse consumers that are the
//! broker itself it reads the HTTP server's bound address from the context
//! ([`FrontEndContext::http_addr`]), which the broker sets once that server listens. Its
//! background tasks (one push task per push subscription, one forwarding task per pull point,
//! the expiry sweeper) run on the context's task tracker and stop at broker shutdown.

use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started};
use tracing::info;

use crate::config::WsnConfig;
use crate::endpoint::Endpoint;

/// The WS-Notification front end: OASIS WS-BaseNotification 1.3 over SOAP 1.1/1.2 on the
/// broker's HTTP server.
pub struct WsnFrontEnd {
    config: WsnConfig,
}

impl WsnFrontEnd {
    /// A front end with this configuration (nothing runs until it is started).
    pub fn new(config: WsnConfig) -> Self {
        WsnFrontEnd { config }
    }

    /// The configuration in force.
    pub fn config(&self) -> &WsnConfig {
        &self.config
    }

    /// The endpoint's routes (`POST {path}`, `{path}/subscriptions/{id}`,
    /// `{path}/pullpoints/{id}`), and its sweeper spawned on `ctx.tracker`, stopping on
    /// `ctx.shutdown`.
    fn routes(&self, ctx: &FrontEndContext) -> axum::Router {
        let endpoint = Arc::new(Endpoint::new(self.config.clone(), ctx));
        crate::restore::restore(&endpoint);
        let sweeper = endpoint.clone();
        ctx.tracker.spawn(async move {
            let period = sweeper.config.expiry_check_interval.max(std::time::Duration::from_millis(1));
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = sweeper.shutdown.cancelled() => break,
                    _ = tick.tick() => sweeper.sweep(),
                }
            }
            sweeper.registry.clear();
        });
        info!(path = %endpoint.base_path, "WS-Notification endpoint ready");
        crate::http::router(endpoint)
    }
}

impl FrontEnd for WsnFrontEnd {
    fn name(&self) -> &'static str {
        "wsn"
    }

    /// None: it is served on the broker's HTTP port.
    fn listens(&self) -> Vec<Listen> {
        Vec::new()
    }

    /// Its routes; disabled, nothing. An invalid configuration (see [`WsnConfig::validate`])
    /// is an error naming the setting.
    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        let started = if !self.config.enabled {
            Ok(Started::default())
        } else {
            match self.config.validate() {
                Ok(()) => Ok(Started { addrs: Vec::new(), routes: Some(self.routes(&ctx)) }),
                Err(e) => Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)),
            }
        };
        Box::pin(async move { started })
    }
}
