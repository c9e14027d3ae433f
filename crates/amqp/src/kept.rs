//! The durable part of the exchange registry as kept in the store (`[storage]`): exchanges
//! declared durable, and the bindings between durable things (a durable or built-in exchange
//! to a durable queue or exchange), as RabbitMQ keeps them. The registry writes the whole of
//! it as one record whenever it changes (declarations and bindings are rare next to messages)
//! and reads it back at start (`ExchangeRegistry::attach_store`). Durable queues and their
//! `amq.topic` bindings are the core's to keep.

use amq_protocol::types::FieldTable;
use serde::{Deserialize, Serialize};

/// The record's key in the store's `resources` space.
pub(crate) const KEY: &[u8] = b"amqp:topology";

/// Every durable exchange and binding.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct KeptTopology {
    pub exchanges: Vec<KeptExchange>,
    pub bindings: Vec<KeptBinding>,
}

/// A declared durable exchange.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct KeptExchange {
    pub name: String,
    /// `direct`, `fanout`, `topic` or `headers`.
    pub kind: String,
    pub auto_delete: bool,
    pub internal: bool,
}

/// A binding from exchange `source` to a queue or an exchange.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct KeptBinding {
    pub source: String,
    /// `true`: `target` names a queue; `false`: an exchange.
    pub to_queue: bool,
    pub target: String,
    pub key: String,
    pub arguments: FieldTable,
}
