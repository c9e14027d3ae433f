//! Durable state: what the broker promised to keep across a crash. One interface in the core,
//! so that no front end touches a file: the core hands the [`Store`] changes to spaces of
//! keyed records, and the store applies them in order, syncing them to disk as its policy
//! says. The engine behind it lives in `tolk-store`.
//!
//! Records are encoded here ([`record`]), so that the engine stores opaque bytes and the
//! format of a kept message is defined once, next to the message.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

#[cfg(feature = "testing")]
mod gate;
pub mod record;
mod session;

#[cfg(feature = "testing")]
pub use gate::Gate;
pub use session::{KeptSession, SessionKeeper, load_sessions};

/// A set of records with one meaning; each space is one keyspace (or table) of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// The retained message of each topic, keyed by topic.
    Retained,
    /// Durable named queues: their options and topic bindings, keyed by queue name.
    Queues,
    /// Persistent messages waiting in durable queues, keyed by queue and arrival
    /// ([`record::seq_key`]), so that a queue's messages load in order.
    QueueMessages,
    /// Persistent protocol sessions (MQTT clean session off): their subscriptions, expiry and
    /// will, keyed by [`record::session_key`].
    Sessions,
    /// At-least-once deliveries to persistent sessions not yet acknowledged by their client,
    /// keyed by session and arrival ([`record::seq_key`]).
    SessionMessages,
    /// Records a front end keeps in a form of its own ([`record::encode_record`]): WS-N
    /// subscriptions and pull points, keyed `<protocol>:<kind>:<id>`.
    Resources,
}

impl Space {
    /// Every space, for engines that create them at open.
    pub const ALL: &'static [Space] = &[
        Space::Retained,
        Space::Queues,
        Space::QueueMessages,
        Space::Sessions,
        Space::SessionMessages,
        Space::Resources,
    ];

    /// The space's name on disk.
    pub const fn name(self) -> &'static str {
        match self {
            Space::Retained => "retained",
            Space::Queues => "queues",
            Space::QueueMessages => "queue_messages",
            Space::Sessions => "sessions",
            Space::SessionMessages => "session_messages",
            Space::Resources => "resources",
        }
    }
}

/// One change to a space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Sets `key` to `value`.
    Put {
        /// Where.
        space: Space,
        /// The record's key.
        key: Vec<u8>,
        /// The encoded record.
        value: Vec<u8>,
    },
    /// Removes `key` (nothing if absent).
    Delete {
        /// Where.
        space: Space,
        /// The record's key.
        key: Vec<u8>,
    },
    /// Removes every key that starts with `prefix` (all of one session's messages).
    DeletePrefix {
        /// Where.
        space: Space,
        /// The keys' common start.
        prefix: Vec<u8>,
    },
}

/// Why the store could not keep something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store is at `[storage] max_bytes`: the change was not applied. Publishers are
    /// refused with their protocol's signal.
    #[error("the store is full ([storage] max_bytes)")]
    Full,
    /// The engine failed (disk full, I/O error); the change may not be durable.
    #[error("store: {0}")]
    Engine(String),
    /// The store has shut down.
    #[error("the store is closed")]
    Closed,
}

/// A stored record: its key and its encoded value.
pub type Record = (Vec<u8>, Vec<u8>);

/// The broker's durable store.
pub trait Store: Send + Sync + 'static {
    /// Applies `changes` atomically, after every change committed before. The returned
    /// [`Durable`] resolves once they are as durable as the sync policy makes them (on disk,
    /// with `sync = "always"`): acknowledge a persistent message only then. A commit is never
    /// durable later than one made after it, so waiting for the last of several suffices.
    fn commit(&self, changes: Vec<Change>) -> Durable;

    /// Every record of `space` in key order (at start, before the broker serves anyone).
    fn load(&self, space: Space) -> Result<Vec<Record>, StoreError>;
}

/// Resolves when what a publish left behind is safe: the store's commit is durable, and the
/// queue that confirms to publishers (the cluster's, [`crate::QueueOptions::confirms`]) has
/// passed the message on. The publisher is acknowledged then.
pub struct Durable {
    commit: Option<Commit>,
    confirm: Option<ConfirmWait>,
}

/// A publisher's wait on a confirming queue: for the queue's word, and then, when the queue
/// kept the message on disk instead of passing it on, for that commit.
enum ConfirmWait {
    Word(oneshot::Receiver<Durable>),
    Commit(Box<Durable>),
}

enum Commit {
    Waiting(oneshot::Receiver<Result<(), StoreError>>),
    Done(Option<Result<(), StoreError>>),
}

/// The store's half of a pending commit: how it ended, once it has.
pub struct Completion(oneshot::Sender<Result<(), StoreError>>);

impl Completion {
    /// Resolves the commit's [`Durable`] (nobody may be waiting any more: that is fine).
    pub fn complete(self, result: Result<(), StoreError>) {
        let _ = self.0.send(result);
    }
}

/// A confirming queue's half of a [`Durable`]. Dropped unsent (the queue was purged or
/// deleted), the publisher is told it failed.
pub(crate) struct Confirm(oneshot::Sender<Durable>);

impl Confirm {
    /// The message has been passed on.
    pub(crate) fn send(self) {
        let _ = self.0.send(Durable::ready(Ok(())));
    }

    /// The message is kept here instead, once `commit` is durable.
    pub(crate) fn after(self, commit: Durable) {
        let _ = self.0.send(commit);
    }
}

impl Durable {
    /// A commit whose outcome the store will give through the [`Completion`].
    pub fn pending() -> (Completion, Durable) {
        let (tx, rx) = oneshot::channel();
        (Completion(tx), Durable { commit: Some(Commit::Waiting(rx)), confirm: None })
    }

    /// A commit whose outcome is known now (nothing to store, or refused at once).
    pub fn ready(result: Result<(), StoreError>) -> Durable {
        Durable { commit: Some(Commit::Done(Some(result))), confirm: None }
    }

    /// A wait for a confirming queue to pass a message on.
    pub(crate) fn confirmation() -> (Confirm, Durable) {
        let (tx, rx) = oneshot::channel();
        (Confirm(tx), Durable { commit: None, confirm: Some(ConfirmWait::Word(rx)) })
    }

    /// Adds `later` to what `slot` waits for. Store commits are durable in order, so the later
    /// commit stands for both; a confirmation is kept beside it (a message enters at most one
    /// confirming queue).
    pub(crate) fn keep(slot: &mut Option<Durable>, later: Durable) {
        *slot = Some(match slot.take() {
            None => later,
            Some(earlier) => {
                Durable { commit: later.commit.or(earlier.commit), confirm: later.confirm.or(earlier.confirm) }
            }
        });
    }
}

impl Future for Durable {
    type Output = Result<(), StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(commit) = &mut this.commit {
            let result = match commit {
                Commit::Waiting(rx) => std::task::ready!(Pin::new(rx).poll(cx)).unwrap_or(Err(StoreError::Closed)),
                Commit::Done(result) => result.take().unwrap_or(Err(StoreError::Closed)),
            };
            this.commit = None;
            if result.is_err() {
                this.confirm = None;
                return Poll::Ready(result);
            }
        }
        if let Some(ConfirmWait::Word(word)) = &mut this.confirm {
            match std::task::ready!(Pin::new(word).poll(cx)) {
                Ok(commit) => this.confirm = Some(ConfirmWait::Commit(Box::new(commit))),
                Err(_) => {
                    this.confirm = None;
                    return Poll::Ready(Err(StoreError::Closed));
                }
            }
        }
        if let Some(ConfirmWait::Commit(commit)) = &mut this.confirm {
            // A plain commit: it has no confirmation of its own, so this never nests deeper.
            let result = std::task::ready!(Pin::new(&mut **commit).poll(cx));
            this.confirm = None;
            return Poll::Ready(result);
        }
        Poll::Ready(Ok(()))
    }
}
