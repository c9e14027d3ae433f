//! A connection's timer: a tokio timer of its own only while its deadline is near, and an
//! alarm of the router's shared wheel while it is far ([`crate::alarm`]).
//!
//! Most connections' deadlines are far (an MQTT keep-alive, a slow reader's write timeout), so
//! an idle connection keeps an empty pointer here instead of a 128-byte tokio timer, and the
//! second it filed in its outbox's padding.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::time::Sleep;

use crate::alarm::FAR;
use crate::router::Session;

/// See the module documentation. Armed while the deadline is nearer than [`FAR`], dropped
/// once it is far again.
#[derive(Default)]
pub(super) struct Timer(Option<Pin<Box<Sleep>>>);

impl Timer {
    /// Sets the deadline to `at`, the time being `now`; whether the round should poll this
    /// timer (a near deadline). A far one is met through the outbox's [`crate::Wake::Alarm`],
    /// after which the driver sets it again and it is near.
    pub(super) fn set(&mut self, at: Instant, now: Instant, core: &Session) -> bool {
        if at.saturating_duration_since(now) >= FAR && core.file_alarm(at) {
            self.0 = None;
            return false;
        }
        match &mut self.0 {
            Some(sleep) => sleep.as_mut().reset(at.into()),
            None => self.0 = Some(Box::pin(tokio::time::sleep_until(at.into()))),
        }
        true
    }

    /// Ready once a near deadline passes.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().map_or(Poll::Pending, |sleep| sleep.as_mut().poll(cx))
    }
}
