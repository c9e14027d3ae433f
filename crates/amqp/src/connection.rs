//! The per-connection task: one `tokio::select!` over reading bytes, writing queued frames,
//! draining the core outbox in batches, queue-deletion notices, the session's timers and
//! shutdown. All protocol decisions are the session's; this loop only moves bytes and time.
//!
//! Reading and writing run concurrently, so a client that publishes while not reading cannot
//! deadlock the two sides; reading (and taking deliveries) pauses while more than
//! [`HIGH_WATER`] bytes wait to be written, so memory stays bounded by a client that does not read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tolk_core::listener::Connection;
use tolk_core::{CloseReason, Protocol};

use crate::context::Shared;
use crate::session::AmqpSession;

/// Output bytes above which the connection stops reading and taking deliveries.
pub const HIGH_WATER: usize = 256 * 1024;
/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8 * 1024;
/// Deliveries taken from the outbox per wake-up.
const DELIVERY_BATCH: usize = 64;
/// How long the last frames (a close, a close-ok) may take to be written before the socket is
/// closed anyway.
const FINAL_FLUSH: Duration = Duration::from_secs(2);

/// Runs one accepted connection to its end.
pub async fn run(shared: Arc<Shared>, connection: Connection) -> CloseReason {
    let Connection { mut stream, peer, shutdown, router } = connection;
    let core = router.open_session(Protocol::Amqp);
    let mut deletions = shared.registry.queue_deletions();
    let mut deletions_open = true;
    let mut session = AmqpSession::new(shared, core, peer, Instant::now());
    let (reader, mut writer) = stream.split();
    // Empty until bytes arrive, and released once they are all handled: an idle connection
    // holds no read buffer.
    let mut input = BytesMut::new();
    let mut batch = Vec::with_capacity(DELIVERY_BATCH);
    let mut shutting_down = false;
    // One timer for the connection's life, moved to each new deadline: a deadline that only
    // moves later (heartbeats) costs an atomic store, not a timer-wheel insertion per event.
    let mut timer = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
    loop {
        if let Some(reason) = session.finished() {
            let flush = async {
                writer.write_all(session.pending_output()).await?;
                writer.shutdown().await
            };
            let _ = tokio::time::timeout(FINAL_FLUSH, flush).await;
            return reason;
        }
        if input.is_empty() && input.capacity() > 0 {
            input = BytesMut::new();
        }
        let backlog = session.pending_output().len();
        let deadline = session.poll_timeout();
        if let Some(at) = deadline {
            timer.as_mut().reset(at.into());
        }
        // While a subscriber of this connection's messages is full, stop reading: TCP then
        // slows the publisher down instead of the subscriber being dropped.
        let congested = session.core().is_congesting();
        tokio::select! {
            _ = shutdown.cancelled(), if !shutting_down => {
                shutting_down = true;
                session.begin_shutdown(Instant::now());
            }
            // Waits for readability without a buffer; one is allocated only when bytes are there.
            ready = reader.readable(), if backlog < HIGH_WATER && !congested => {
                input.reserve(READ_CHUNK);
                match ready.and_then(|()| reader.try_read_buf(&mut input)) {
                    Ok(0) => session.handle_eof(!input.is_empty()),
                    Ok(_) => session.handle_bytes(&mut input, Instant::now()),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => session.handle_io_error(&e),
                }
            }
            written = writer.write(session.pending_output()), if backlog > 0 => match written {
                Ok(0) => session.handle_io_error(&std::io::ErrorKind::WriteZero.into()),
                Ok(n) => session.advance_output(n, Instant::now()),
                Err(e) => session.handle_io_error(&e),
            },
            drained = session.receiver().drain(&mut batch, DELIVERY_BATCH), if session.wants_deliveries() && backlog < HIGH_WATER => {
                match drained {
                    Ok(_) => session.handle_deliveries(&mut batch, Instant::now()),
                    Err(_) => session.handle_overflow(Instant::now()),
                }
            }
            changed = deletions.changed(), if deletions_open => match changed {
                Ok(()) => session.handle_queue_deletions(),
                Err(_) => deletions_open = false,
            },
            () = session.core().relieve_congestion(), if congested => session.handle_bytes(&mut input, Instant::now()),
            () = timer.as_mut(), if deadline.is_some() => {
                if congested {
                    session.excuse_silence(Instant::now());
                }
                session.handle_timeout(Instant::now())
            }
        }
    }
}
