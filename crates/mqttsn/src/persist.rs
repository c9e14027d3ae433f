//! Writes the topic-id registry to disk off the endpoint task. The endpoint publishes a snapshot
//! after each change; this task writes the newest one (a burst of registrations is one write) and
//! the last one at shutdown.
//!
//! The window between a REGACK and the write is the price of not blocking the socket on disk
//! I/O; it is a few milliseconds, and only a crash inside it loses an id.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::registry::write_atomically;

/// One version of the registry file.
#[derive(Clone, Default)]
pub(crate) struct Snapshot {
    /// The registry version it was taken at.
    pub(crate) version: u64,
    /// The file contents.
    pub(crate) bytes: Arc<Vec<u8>>,
}

/// The endpoint's side: publish snapshots; dropping it makes the task write the last one and end.
pub(crate) struct Persister {
    tx: watch::Sender<Snapshot>,
    published: u64,
}

impl Persister {
    /// Starts the writer for `path`; `version` is what the file already holds.
    pub(crate) fn spawn(path: PathBuf, version: u64, tracker: &TaskTracker) -> Self {
        let (tx, rx) = watch::channel(Snapshot { version, bytes: Arc::default() });
        tracker.spawn(run(path, rx, version));
        Persister { tx, published: version }
    }

    /// Hands over a snapshot if `version` is newer than the last one; `snapshot` is only called
    /// then.
    pub(crate) fn publish(&mut self, version: u64, snapshot: impl FnOnce() -> Vec<u8>) {
        if version != self.published {
            self.published = version;
            self.tx.send_replace(Snapshot { version, bytes: Arc::new(snapshot()) });
        }
    }
}

async fn run(path: PathBuf, mut rx: watch::Receiver<Snapshot>, mut written: u64) {
    loop {
        let closed = rx.changed().await.is_err();
        let snapshot = rx.borrow_and_update().clone();
        if snapshot.version != written {
            let target = path.clone();
            let bytes = snapshot.bytes.clone();
            match tokio::task::spawn_blocking(move || write_atomically(&target, &bytes)).await {
                Ok(Ok(())) => {
                    written = snapshot.version;
                    debug!(path = %path.display(), version = written, "MQTT-SN topic id registry saved");
                }
                Ok(Err(e)) => warn!(path = %path.display(), error = %e, "cannot save the MQTT-SN topic id registry"),
                Err(e) => warn!(error = %e, "MQTT-SN topic id registry writer failed"),
            }
        }
        if closed {
            return;
        }
    }
}
