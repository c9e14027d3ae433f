//! The broker's durable store: [`tolk_core::store::Store`] on fjall (see README.md for why).
//!
//! One writer thread owns every write. Commits queue up on a channel; the writer takes all that
//! are waiting, applies them as one fjall batch, and with `sync = "always"` syncs the journal
//! once before it answers every one of them: group commit, so that many publishers share an
//! fsync and a lone one waits for just its own. `batch` answers at once and syncs every
//! `sync_interval`; `off` leaves syncing to the OS. fsync blocks, so it never runs on the
//! async runtime.
//!
//! `max_bytes` caps what the store holds on disk: beyond it a commit that adds records is
//! refused with [`StoreError::Full`] (removals always pass, so that acknowledgements can free
//! room). A torn last write after a power cut is fjall's to detect: its journal entries carry
//! checksums, and recovery drops an incomplete tail.

mod config;

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tolk_core::store::{Change, Completion, Durable, Record, Space, Store, StoreError};

pub use config::{StorageConfig, SyncPolicy};

/// Most commits applied in one batch, so that a flood cannot make one batch unbounded.
const MAX_GROUP: usize = 1024;
/// How often the size on disk is read again for `max_bytes`.
const SIZE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// One commit on its way to the writer: the changes, and whom to tell.
type Pending = (Vec<Change>, Completion);

/// The store in `data_dir/store`, with its writer thread.
pub struct FjallStore {
    spaces: HashMap<Space, fjall::Keyspace>,
    commits: Mutex<Option<Sender<Pending>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl FjallStore {
    /// Opens (or creates) the store under `dir`, recovering what the journal holds.
    pub fn open(dir: &Path, config: &StorageConfig) -> Result<Arc<FjallStore>, StoreError> {
        let engine = |e: fjall::Error| StoreError::Engine(e.to_string());
        let db = fjall::Database::builder(dir)
            .cache_size(config.cache_bytes)
            .worker_threads(1)
            .manual_journal_persist(true)
            .open()
            .map_err(engine)?;
        let mut spaces = HashMap::new();
        for &space in Space::ALL {
            spaces.insert(space, db.keyspace(space.name(), fjall::KeyspaceCreateOptions::default).map_err(engine)?);
        }
        let (tx, rx) = mpsc::channel();
        let writer = Writer { db, spaces: spaces.clone(), config: config.clone() };
        let handle = std::thread::Builder::new()
            .name("tolk-store".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::Engine(format!("cannot start the store's writer: {e}")))?;
        Ok(Arc::new(FjallStore { spaces, commits: Mutex::new(Some(tx)), writer: Mutex::new(Some(handle)) }))
    }

    /// Stops taking commits, waits for the writer to apply and sync what it has, and returns.
    /// Later commits fail with [`StoreError::Closed`].
    pub fn close(&self) {
        drop(self.commits.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(handle) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = handle.join();
        }
    }
}

impl Store for FjallStore {
    fn commit(&self, changes: Vec<Change>) -> Durable {
        if changes.is_empty() {
            return Durable::ready(Ok(()));
        }
        let (reply, durable) = Durable::pending();
        let sent = match &*self.commits.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(tx) => tx.send((changes, reply)).is_ok(),
            None => false,
        };
        if sent { durable } else { Durable::ready(Err(StoreError::Closed)) }
    }

    fn load(&self, space: Space) -> Result<Vec<Record>, StoreError> {
        let keyspace = &self.spaces[&space];
        keyspace
            .iter()
            .map(|kv| {
                let (k, v) = kv.into_inner().map_err(|e| StoreError::Engine(e.to_string()))?;
                Ok((k.to_vec(), v.to_vec()))
            })
            .collect()
    }
}

impl Drop for FjallStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread's state.
struct Writer {
    db: fjall::Database,
    spaces: HashMap<Space, fjall::Keyspace>,
    config: StorageConfig,
}

impl Writer {
    fn run(self, commits: Receiver<Pending>) {
        let mut unsynced = false;
        let mut size = self.db.disk_space().unwrap_or(0);
        let mut size_read = Instant::now();
        loop {
            // With `batch`, wake up for the periodic sync even when nothing comes.
            let first = match (self.config.sync, unsynced) {
                (SyncPolicy::Batch, true) => match commits.recv_timeout(self.config.sync_interval) {
                    Ok(commit) => commit,
                    Err(RecvTimeoutError::Timeout) => {
                        if let Err(e) = self.sync() {
                            tracing::error!(error = %e, "the store could not sync its journal");
                        }
                        unsynced = false;
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                _ => match commits.recv() {
                    Ok(commit) => commit,
                    Err(_) => break,
                },
            };
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match commits.try_recv() {
                    Ok(commit) => group.push(commit),
                    Err(_) => break,
                }
            }
            if size_read.elapsed() >= SIZE_CHECK_EVERY {
                size = self.db.disk_space().unwrap_or(size);
                size_read = Instant::now();
            }
            let full = size >= self.config.max_bytes;
            let mut batch = self.db.batch();
            let mut replies = Vec::with_capacity(group.len());
            for (changes, reply) in group {
                let adds = changes.iter().any(|c| matches!(c, Change::Put { .. }));
                if full && adds {
                    reply.complete(Err(StoreError::Full));
                    continue;
                }
                for change in changes {
                    match change {
                        Change::Put { space, key, value } => {
                            size += (key.len() + value.len()) as u64;
                            batch.insert(&self.spaces[&space], key, value);
                        }
                        Change::Delete { space, key } => batch.remove(&self.spaces[&space], key),
                        Change::DeletePrefix { space, prefix } => {
                            // What is committed now; a key put earlier in this same group is
                            // not seen, and the core drops such strays at its next start.
                            let keyspace = &self.spaces[&space];
                            for kv in keyspace.prefix(&prefix) {
                                match kv.into_inner() {
                                    Ok((key, _)) => batch.remove(keyspace, key),
                                    Err(e) => tracing::error!(error = %e, "the store could not read keys to delete"),
                                }
                            }
                        }
                    }
                }
                replies.push(reply);
            }
            let mut result = batch.commit().map_err(|e| StoreError::Engine(e.to_string()));
            if result.is_ok() {
                match self.config.sync {
                    SyncPolicy::Always => result = self.sync(),
                    SyncPolicy::Batch => unsynced = true,
                    SyncPolicy::Off => {}
                }
            }
            if let Err(e) = &result {
                tracing::error!(error = %e, "the store could not write; what it was given is not durable");
            }
            for reply in replies {
                reply.complete(result.clone());
            }
        }
        if self.config.sync != SyncPolicy::Off {
            let _ = self.sync();
        }
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.db.persist(fjall::PersistMode::SyncData).map_err(|e| StoreError::Engine(e.to_string()))
    }
}
