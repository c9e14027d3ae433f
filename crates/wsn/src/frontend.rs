//! [`WsnFrontEnd`]: builds the endpoint from its configuration and hands the broker the routes
//! to merge into its HTTP app. It binds no socket of its own (so it does not implement the TCP
//! `FrontEnd` trait), but it must be told the address the HTTP server is bound to
//! ([`WsnFrontEnd::listening_on`]), to refuse consumers that are the broker itself. Its
//! background tasks (one push task per push subscription, one forwarding task per pull point,
//! the expiry sweeper) run on the context's task tracker and stop at broker shutdown.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use tolk_core::frontend::FrontEndContext;
use tracing::{error, info};

use crate::config::WsnConfig;
use crate::endpoint::Endpoint;

/// The WS-Notification front end: OASIS WS-BaseNotification 1.3 over SOAP 1.1/1.2 on the
/// broker's HTTP server.
pub struct WsnFrontEnd {
    config: WsnConfig,
    /// The HTTP server's bound address, shared with the endpoint's consumer policy.
    http_addr: Arc<OnceLock<SocketAddr>>,
}

impl WsnFrontEnd {
    /// A front end with this configuration (nothing runs until [`WsnFrontEnd::routes`]).
    pub fn new(config: WsnConfig) -> Self {
        WsnFrontEnd { config, http_addr: Arc::default() }
    }

    /// Tells the endpoint the address its HTTP server is bound to (the bound one, so that port
    /// 0 works), once the server is listening; the first address given stays. From then on a
    /// Subscribe whose consumer resolves to that port on a loopback or local address (the
    /// broker under another name) is refused. Until then only the broker's own name, as
    /// clients reach it, is recognised, and loops are caught when the first push comes back.
    pub fn listening_on(&self, http_addr: SocketAddr) {
        let _ = self.http_addr.set(http_addr);
    }

    /// The configuration in force.
    pub fn config(&self) -> &WsnConfig {
        &self.config
    }

    /// The endpoint's routes (`POST {path}`, `{path}/subscriptions/{id}`,
    /// `{path}/pullpoints/{id}`) as a stateless `Router` to `.merge()` into the broker's HTTP
    /// app, and its background tasks spawned on `ctx.tracker`, stopping on `ctx.shutdown`.
    /// Disabled, it returns an empty router. An invalid configuration (see
    /// [`WsnConfig::validate`]) is logged and the defaults used for what is invalid, since
    /// routes cannot fail.
    pub fn routes(&self, ctx: FrontEndContext) -> axum::Router {
        if !self.config.enabled {
            return axum::Router::new();
        }
        let config = match self.config.validate() {
            Ok(()) => self.config.clone(),
            Err(e) => {
                error!("invalid [wsn] configuration: {e}; the defaults replace what is invalid");
                self.config.sanitized()
            }
        };
        let endpoint = Arc::new(Endpoint::new(config, &ctx, self.http_addr.clone()));
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
