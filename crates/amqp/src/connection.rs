//! One AMQP connection: its session, run by the core's connection driver
//! ([`tolk_core::drive`]), which also watches the exchange registry's queue-deletion signal
//! for it (consumers of a queue deleted elsewhere are cancelled).

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;

use tolk_core::drive::{DriveLimits, Signal, drive};
use tolk_core::listener::Connection;
use tolk_core::{CloseReason, Protocol};

use crate::context::Shared;
use crate::session::AmqpSession;

/// 8 KiB per read (the driver pauses reading above 256 KiB of unwritten output). No write
/// timeout: a consumer that does not read fills its prefetch and the high-water mark, and its
/// queue serves other consumers.
pub const LIMITS: DriveLimits = DriveLimits::new(8 * 1024, None);

/// Runs one accepted connection to its end. Not an `async fn`: the session is made here and
/// moved into the driver's future, which is all the connection's task holds.
pub fn run(shared: Arc<Shared>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
    let Connection { stream, peer, shutdown, router } = connection;
    let core = router.open_session(Protocol::Amqp);
    let deletions = shared.registry.queue_deletions();
    let identity = stream.identity();
    let session = AmqpSession::new(shared, core, peer, Instant::now()).with_identity(identity);
    drive(session, stream, BytesMut::new(), shutdown, Some(Signal(deletions)), LIMITS)
}
