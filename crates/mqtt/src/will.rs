//! The last will: kept from CONNECT, published when the connection ends without a normal
//! DISCONNECT (MQTT-3.1.2-8), after the MQTT 5 Will Delay Interval or at session end, whichever
//! comes first (§3.1.3.2.2).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmqtt_codec::v5::LastWill;
use tolk_core::Origin;

use crate::translate;

/// A will waiting for its connection to end.
#[derive(Debug, Clone)]
pub struct Will {
    /// Topic, payload, QoS, retain and MQTT 5 properties as the client gave them.
    pub last_will: LastWill,
    /// MQTT 5 Will Delay Interval (0 for 3.1.1).
    pub delay: Duration,
}

/// When a will is to be published, decided as the connection ends.
#[derive(Debug)]
pub enum WillTiming {
    /// Publish it now.
    Now(Will),
    /// Keep it with the offline session and publish it at this instant unless the client
    /// reconnects first.
    At(Will, Instant),
}

impl Will {
    /// The will from a CONNECT, if it has one.
    pub fn from_connect(last_will: Option<LastWill>) -> Option<Will> {
        last_will.map(|w| {
            let delay = Duration::from_secs(u64::from(w.will_delay_interval_sec.unwrap_or(0)));
            Will { last_will: w, delay }
        })
    }

    /// Applies the delay rule: a delayed will waits at most until the session expires; a
    /// session that ends with its connection publishes at once.
    pub fn timing(self, session_expiry: Duration, now: Instant) -> WillTiming {
        let wait = self.delay.min(session_expiry);
        if wait.is_zero() { WillTiming::Now(self) } else { WillTiming::At(self, now + wait) }
    }

    /// Publishes the will through `session`, as a message from `client_id`.
    pub fn publish(&self, session: &tolk_core::Session, client_id: &Arc<str>, now: Instant) {
        let origin = Origin { protocol: session.protocol(), session: session.id(), client_id: client_id.clone() };
        let message = translate::will_message(&self.last_will, origin, now);
        tracing::debug!(client_id = %client_id, topic = %message.topic, "publishing will");
        session.router().metrics().protocol(session.protocol()).messages_in.fetch_add(1, Ordering::Relaxed);
        session.publish(Arc::new(message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmqtt_codec::types::QoS;

    fn will(delay: u32) -> Will {
        Will::from_connect(Some(LastWill {
            qos: QoS::AtMostOnce,
            retain: false,
            topic: "w".into(),
            message: "gone".into(),
            will_delay_interval_sec: Some(delay),
            correlation_data: None,
            message_expiry_interval: None,
            content_type: None,
            user_properties: Vec::new(),
            is_utf8_payload: None,
            response_topic: None,
        }))
        .unwrap()
    }

    #[test]
    fn delay_is_cut_by_session_expiry() {
        let now = Instant::now();
        assert!(matches!(will(0).timing(Duration::from_secs(60), now), WillTiming::Now(_)));
        assert!(matches!(will(30).timing(Duration::ZERO, now), WillTiming::Now(_)));
        let WillTiming::At(_, at) = will(30).timing(Duration::from_secs(10), now) else { panic!() };
        assert_eq!(at, now + Duration::from_secs(10));
        let WillTiming::At(_, at) = will(5).timing(Duration::from_secs(10), now) else { panic!() };
        assert_eq!(at, now + Duration::from_secs(5));
    }
}
