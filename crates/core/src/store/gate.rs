//! A [`Store`] for tests: it holds every commit until the test completes it, so that the order
//! of "written" and "acknowledged" is the test's to decide.

use std::sync::Mutex;

use super::{Change, Completion, Durable, Record, Space, Store, StoreError};

/// Holds every commit until [`Gate::complete_all`].
#[derive(Default)]
pub struct Gate {
    waiting: Mutex<Vec<(Vec<Change>, Completion)>>,
}

impl Gate {
    /// Ends every commit held with `result`; returns how many there were.
    pub fn complete_all(&self, result: Result<(), StoreError>) -> usize {
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        let n = waiting.len();
        for (_, completion) in waiting {
            completion.complete(result.clone());
        }
        n
    }

    /// How many commits are held.
    pub fn held(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Store for Gate {
    fn commit(&self, changes: Vec<Change>) -> Durable {
        let (completion, durable) = Durable::pending();
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).push((changes, completion));
        durable
    }

    fn load(&self, _: Space) -> Result<Vec<Record>, StoreError> {
        Ok(Vec::new())
    }
}
