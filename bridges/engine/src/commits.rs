//! What a kind acknowledges to its remote only once it is on disk here: messages from the
//! remote, each with the store commit of what it left here, taken in the order they came.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;

use tolk_core::store::{Durable, StoreError};

/// Messages from the remote waiting for the store before they are acknowledged, in order.
pub struct AwaitingStore<T>(VecDeque<(Option<Durable>, T)>);

impl<T> Default for AwaitingStore<T> {
    fn default() -> Self {
        AwaitingStore(VecDeque::new())
    }
}

impl<T> AwaitingStore<T> {
    /// `message`, to acknowledge once `commit` is done (at once when nothing was kept).
    pub fn push(&mut self, commit: Option<Durable>, message: T) {
        self.0.push_back((commit, message));
    }

    /// The oldest message, once its commit is done, with the commit's outcome. Pending while
    /// there is none; cancel-safe (nothing is taken until it is ready).
    pub async fn next(&mut self) -> (Result<(), StoreError>, T) {
        let outcome = poll_fn(|cx| match self.0.front_mut() {
            None => Poll::Pending,
            Some((None, _)) => Poll::Ready(Ok(())),
            Some((Some(durable), _)) => Pin::new(durable).poll(cx),
        })
        .await;
        let (_, message) = self.0.pop_front().expect("a commit came from the front");
        (outcome, message)
    }
}
