//! Writes the topic-id registry to disk off the endpoint task. The endpoint hands over the ids
//! registered since its last turn (a few, usually none); this task keeps its own copy of the
//! table and writes the whole file once per burst of registrations, and the last state at
//! shutdown.
//!
//! The endpoint never serialises the table: with 10,000 ids that is a few hundred kilobytes of
//! JSON, and doing it for every REGISTER made connecting a fleet quadratic and stalled the
//! socket. The window between a REGACK and the write is the price of not blocking the socket
//! on disk I/O; it is a few milliseconds, and only a crash inside it loses an id.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::registry::{TopicRegistry, file_bytes, write_atomically};

/// Ids registered since the last hand-over.
type Added = Vec<(u16, Arc<str>)>;

/// The endpoint's side: hand over new ids; dropping it makes the task write what is left and
/// end.
pub(crate) struct Persister {
    /// Unbounded, yet bounded by the registry: each id is sent once.
    tx: mpsc::UnboundedSender<Added>,
    /// The registry's `next_id` at the last hand-over.
    handed_up_to: u32,
}

impl Persister {
    /// Starts the writer for `path`, with the table `registry` already holds (the file's).
    pub(crate) fn spawn(path: PathBuf, registry: &TopicRegistry, tracker: &TaskTracker) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tracker.spawn(run(path, registry.entries(), rx));
        Persister { tx, handed_up_to: registry.next_id() }
    }

    /// Hands the writer the ids registered since the last call; one comparison when there are
    /// none.
    pub(crate) fn publish(&mut self, registry: &TopicRegistry) {
        let next = registry.next_id();
        if next != self.handed_up_to {
            let added = registry.added_since(self.handed_up_to);
            self.handed_up_to = next;
            // The writer ends only after the endpoint drops this sender.
            let _ = self.tx.send(added);
        }
    }
}

async fn run(path: PathBuf, mut topics: BTreeMap<u16, Arc<str>>, mut rx: mpsc::UnboundedReceiver<Added>) {
    // `recv` hands out what was sent before the sender was dropped, then `None`.
    while let Some(added) = rx.recv().await {
        topics.extend(added);
        while let Ok(more) = rx.try_recv() {
            topics.extend(more);
        }
        let snapshot = topics.clone();
        let target = path.clone();
        match tokio::task::spawn_blocking(move || write_atomically(&target, &file_bytes(&snapshot))).await {
            Ok(Ok(())) => debug!(path = %path.display(), topics = topics.len(), "MQTT-SN topic id registry saved"),
            Ok(Err(e)) => warn!(path = %path.display(), error = %e, "cannot save the MQTT-SN topic id registry"),
            Err(e) => warn!(error = %e, "MQTT-SN topic id registry writer failed"),
        }
    }
}
