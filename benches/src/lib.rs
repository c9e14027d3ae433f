//! Shared set-up for tolk's benchmarks: subscription populations shaped like a gateway's.

pub mod translation_fixtures;

use std::sync::Arc;

use tolk_core::{Message, Metrics, Origin, Protocol, QoS, Router, RouterConfig, Session, SubscriptionOptions};

/// A router holding `background` non-matching filters (four in five exact, one in five with
/// wildcards, spread over 1,000 sessions) plus `matching` subscriptions that all match
/// [`HOT_TOPIC`] (alternately exact and wildcard), each on its own session.
pub struct Population {
    /// The router under test.
    pub router: Router,
    /// Sessions whose subscriptions match the hot topic; drain them between batches.
    pub matching: Vec<Session>,
    _background: Vec<Session>,
}

/// The topic published in the routing benchmarks.
pub const HOT_TOPIC: &str = "site/7/building/3/floor/2/temp";

/// Builds a population (see [`Population`]).
pub fn population(background: usize, matching: usize) -> Population {
    let config = RouterConfig { outbox_capacity: 4096, ..RouterConfig::default() };
    let router = Router::new(config, Arc::new(Metrics::new()));
    let options = SubscriptionOptions::default();
    let sessions: Vec<Session> = (0..1000).map(|_| router.open_session(Protocol::Mqtt)).collect();
    for i in 0..background {
        let filter = match i % 5 {
            0 => format!("site/{}/+/{}/#", i % 100, i),
            1..=3 => format!("site/{}/building/{}/floor/{}/hum", i % 100, i, i % 10),
            _ => format!("fleet/{}/device/{}/status", i % 1000, i),
        };
        sessions[i % sessions.len()].subscribe(&filter, i as u64, options).unwrap();
    }
    let hot = ["site/7/building/3/floor/2/temp", "site/7/+/3/floor/+/temp", "site/7/building/#"];
    let matching = (0..matching)
        .map(|i| {
            let session = router.open_session(Protocol::Mqtt);
            session.subscribe(hot[i % hot.len()], 0, options).unwrap();
            session
        })
        .collect();
    Population { router, matching, _background: sessions }
}

/// A QoS 1 message on [`HOT_TOPIC`] with a 64-byte payload.
pub fn hot_message() -> Arc<Message> {
    let origin = Origin { protocol: Protocol::Mqtt, session: tolk_core::SessionId(0), client_id: "bench".into() };
    let mut message = Message::new(HOT_TOPIC, vec![0u8; 64], origin);
    message.qos = QoS::AtLeastOnce;
    Arc::new(message)
}
