//! tolk's engine: the message model, the topic trie and router, session outboxes, named queues,
//! the retained store, and the shape every protocol front end shares.
//!
//! Nothing in here knows a wire format. Front ends translate their frames into [`Message`]s,
//! publish them through the [`Router`], and drain their [`Session`]'s outbox.

#![warn(missing_docs)]

pub mod access;
mod ack_line;
mod alarm;
pub mod auth;
pub mod budget;
mod delivery;
pub mod drive;
pub mod frontend;
pub mod hold;
pub mod interest;
mod lazy_deque;
mod lazy_vec;
pub mod listener;
mod live;
mod message;
mod outbox;
pub mod path;
mod queue;
mod retained;
mod router;
mod stamp;
pub mod store;
pub mod topic;
pub mod transcode;
mod trie;
mod variants;
mod wait;

pub use ack_line::AckLine;
pub use budget::MemoryBudget;
pub use bytestring::ByteString;
pub use delivery::{Delivery, QueueAck};
pub use lazy_deque::LazyDeque;
pub use message::{Destination, Message, Origin, Properties, QoS, SessionId};
pub use outbox::{Outbox, OutboxLimits, OutboxReceiver, Overflowed, PushOutcome, Wake, outbox};
pub use queue::{ConsumerId, ConsumerOptions, Queue, QueueOptions, QueuePush};
pub use retained::RetainOutcome;
pub use router::{
    PublishOutcome, QueueError, Restored, Router, RouterConfig, SPOOL_PREFIX, Session, SharedError, Subscription,
    SubscriptionOptions, Target,
};
pub use stamp::Stamp;
pub use tolk_metrics::{
    BridgeCounters, CloseReason, ClusterCounters, ConnectionGauge, Denial, DropReason, Encoding, Hop, MemoryKind,
    Metrics, Protocol, SpoolGauge,
};
pub use trie::Trie;
