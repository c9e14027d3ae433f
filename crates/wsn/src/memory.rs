//! Pull points' share of the broker's memory budget: the one place that charges and releases
//! the bytes they hold.
//!
//! A held notification costs what the core charges every holder
//! ([`tolk_core::budget::message_cost`]: payload, topic and properties plus 384 bytes for the
//! `Message`, the `Delivery` and the allocator's rounding), counted into the broker-wide
//! budget as `MemoryKind::PullPoint`, which `/metrics` shows as
//! `tolk_memory_bytes{kind="pullpoint"}`. On top of the broker's budget, all pull points
//! together stay under `pull_point.total_max_bytes`. A message held by three pull points is
//! charged three times: that over-counts fan-out (the payload is shared), the safe side.

use std::sync::Arc;

use tolk_core::{DropReason, MemoryBudget, MemoryKind};

/// The bytes held by an endpoint's pull points, within their total.
pub(crate) struct PullPointBytes {
    budget: Arc<MemoryBudget>,
    total_max: usize,
}

impl PullPointBytes {
    pub(crate) fn new(budget: Arc<MemoryBudget>, total_max: usize) -> Self {
        PullPointBytes { budget, total_max }
    }

    /// Bytes held in pull points' buffers now.
    fn held(&self) -> usize {
        self.budget.metrics().memory().held(MemoryKind::PullPoint)
    }

    /// Charges `bytes`, or says why not: `QueueFull` when the pull points' total would pass
    /// `total_max_bytes`, `MemoryFull` when the broker's budget is used up. Concurrent charges
    /// may overshoot the total by what they add at the same instant (a message per thread).
    pub(crate) fn try_charge(&self, bytes: usize) -> Result<(), DropReason> {
        if self.held().saturating_add(bytes) > self.total_max {
            return Err(DropReason::QueueFull);
        }
        if !self.budget.try_charge(MemoryKind::PullPoint, bytes) {
            return Err(DropReason::MemoryFull);
        }
        Ok(())
    }

    /// Gives back `bytes` charged earlier.
    pub(crate) fn release(&self, bytes: usize) {
        self.budget.release(MemoryKind::PullPoint, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tolk_core::Metrics;

    #[test]
    fn the_total_and_the_budget_both_bound_charges() {
        let metrics = Arc::new(Metrics::new());
        let budget = Arc::new(MemoryBudget::new(1500, metrics.clone()));
        let bytes = PullPointBytes::new(budget.clone(), 1000);
        assert_eq!(bytes.try_charge(600), Ok(()));
        assert_eq!(bytes.try_charge(401), Err(DropReason::QueueFull));
        budget.charge(MemoryKind::Outbox, 800);
        assert_eq!(bytes.try_charge(200), Err(DropReason::MemoryFull), "600 + 800 + 200 is over the budget");
        bytes.release(600);
        assert_eq!(metrics.memory().held(MemoryKind::PullPoint), 0);
        assert_eq!(bytes.try_charge(usize::MAX), Err(DropReason::QueueFull), "no overflow");
    }
}
