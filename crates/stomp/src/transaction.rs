//! Client transactions (spec "BEGIN" / "COMMIT" / "ABORT"): SEND, ACK and NACK frames that
//! name a `transaction` are held here, in order, until COMMIT applies them or ABORT drops them.
//! Open transactions die with the connection (spec: implicitly aborted). Every buffer is
//! bounded: transactions per connection, frames and body bytes per transaction.

use std::collections::HashMap;

use stomp_codec::Utf8Bytes;

use crate::error::StompError;

/// Bounds, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransactionLimits {
    /// Open transactions per connection.
    pub max_open: usize,
    /// Buffered frames per transaction.
    pub max_frames: usize,
    /// Buffered body bytes per transaction.
    pub max_bytes: usize,
}

struct Open<T> {
    items: Vec<T>,
    bytes: usize,
}

/// The open transactions of one connection, each a list of deferred actions `T`.
pub(crate) struct Transactions<T> {
    open: HashMap<Utf8Bytes, Open<T>>,
    limits: TransactionLimits,
}

fn unknown(id: &str) -> StompError {
    StompError::protocol(format!("unknown transaction '{}'", id.chars().take(64).collect::<String>()))
}

impl<T> Transactions<T> {
    /// No open transactions.
    pub fn new(limits: TransactionLimits) -> Self {
        Transactions { open: HashMap::new(), limits }
    }

    /// BEGIN: the id must not be open already.
    pub fn begin(&mut self, id: Utf8Bytes) -> Result<(), StompError> {
        if self.open.contains_key(&id) {
            return Err(StompError::protocol(format!(
                "transaction '{}' is already open",
                id.chars().take(64).collect::<String>()
            )));
        }
        if self.open.len() >= self.limits.max_open {
            return Err(StompError::limit(format!(
                "at most {} open transactions per connection",
                self.limits.max_open
            )));
        }
        self.open.insert(id, Open { items: Vec::new(), bytes: 0 });
        Ok(())
    }

    /// Defers an action carrying `bytes` of body into transaction `id`.
    pub fn defer(&mut self, id: &str, item: T, bytes: usize) -> Result<(), StompError> {
        let limits = self.limits;
        let open = self.open.get_mut(id).ok_or_else(|| unknown(id))?;
        if open.items.len() >= limits.max_frames {
            return Err(StompError::limit(format!("at most {} frames per transaction", limits.max_frames)));
        }
        if open.bytes.saturating_add(bytes) > limits.max_bytes {
            return Err(StompError::limit(format!("at most {} body bytes per transaction", limits.max_bytes)));
        }
        open.bytes += bytes;
        open.items.push(item);
        Ok(())
    }

    /// COMMIT: closes the transaction and returns its actions in the order they were sent.
    pub fn commit(&mut self, id: &str) -> Result<Vec<T>, StompError> {
        self.open.remove(id).map(|open| open.items).ok_or_else(|| unknown(id))
    }

    /// ABORT: closes the transaction and drops its actions.
    pub fn abort(&mut self, id: &str) -> Result<(), StompError> {
        self.open.remove(id).map(drop).ok_or_else(|| unknown(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txs() -> Transactions<u8> {
        Transactions::new(TransactionLimits { max_open: 2, max_frames: 2, max_bytes: 10 })
    }

    #[test]
    fn commit_returns_actions_in_order_and_abort_drops_them() {
        let mut t = txs();
        t.begin("a".into()).unwrap();
        t.defer("a", 1, 0).unwrap();
        t.defer("a", 2, 0).unwrap();
        assert_eq!(t.commit("a").unwrap(), vec![1, 2]);
        assert!(t.commit("a").is_err(), "closed by commit");
        t.begin("b".into()).unwrap();
        t.defer("b", 3, 0).unwrap();
        t.abort("b").unwrap();
        assert!(t.defer("b", 4, 0).is_err());
    }

    #[test]
    fn unknown_and_duplicate_transactions_are_errors() {
        let mut t = txs();
        assert!(t.defer("x", 1, 0).is_err());
        assert!(t.abort("x").is_err());
        t.begin("x".into()).unwrap();
        assert!(t.begin("x".into()).is_err());
    }

    #[test]
    fn bounds_are_enforced() {
        let mut t = txs();
        t.begin("a".into()).unwrap();
        t.begin("b".into()).unwrap();
        assert!(t.begin("c".into()).is_err(), "open limit");
        t.defer("a", 1, 6).unwrap();
        assert!(t.defer("a", 2, 5).is_err(), "byte limit");
        t.defer("a", 2, 4).unwrap();
        assert!(t.defer("a", 3, 0).is_err(), "frame limit");
    }
}
