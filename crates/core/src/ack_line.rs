//! Acknowledgements that wait for the store, kept in the order the publishes came.
//!
//! A front end that tells publishers "kept" (MQTT PUBACK, AMQP confirms, STOMP RECEIPT) may
//! send that only once what the publish left in the store is durable. The core session holds
//! the pending commits ([`Session::await_durable`]); an [`AckLine`] holds the front end's
//! acknowledgement for each, one for one, so that when the connection driver reports the
//! oldest commit done ([`crate::drive::ProtocolSession::handle_durable`]) the front end sends
//! the oldest acknowledgement. An acknowledgement for a publish that stored nothing still waits
//! behind earlier ones, because these protocols acknowledge in order.

use std::collections::VecDeque;

use crate::router::Session;
use crate::store::Durable;

/// Acknowledgements of one connection, each waiting for one commit of its core session.
pub struct AckLine<T> {
    /// Boxed: most sessions never hold one.
    #[allow(clippy::box_collection, reason = "8 bytes instead of 32 in every session, most of which never hold one")]
    waiting: Option<Box<VecDeque<T>>>,
}

impl<T> Default for AckLine<T> {
    fn default() -> Self {
        AckLine { waiting: None }
    }
}

impl<T> AckLine<T> {
    /// Places the acknowledgement of a publish. With `stored` (its
    /// [`crate::PublishOutcome::durable`], or a commit the front end gave to
    /// [`Session::await_durable`]) it waits for that commit. Otherwise it is returned to be
    /// sent now, unless earlier ones are waiting: then it goes in line behind them, on an
    /// already-durable marker.
    pub fn place(&mut self, session: &Session, stored: bool, ack: T) -> Option<T> {
        if !stored && self.waiting.as_ref().is_none_or(|w| w.is_empty()) {
            return Some(ack);
        }
        if !stored {
            session.await_durable(Durable::ready(Ok(())));
        }
        self.waiting.get_or_insert_default().push_back(ack);
        None
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_none()
    }

    /// The acknowledgement whose commit just ended (the oldest).
    pub fn settled(&mut self) -> Option<T> {
        let ack = self.waiting.as_mut()?.pop_front();
        if self.waiting.as_ref().is_some_and(|w| w.is_empty()) {
            self.waiting = None;
        }
        ack
    }

    /// Drops every waiting acknowledgement and the session's pending commits (a persistent
    /// session resumed by a new connection has none of the old one's to send).
    pub fn forget(&mut self, session: &Session) {
        self.waiting = None;
        session.forget_durable();
    }
}
