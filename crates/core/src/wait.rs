//! Waiting on a [`Notify`] until a condition holds, without missing the wake-up that comes
//! between checking the condition and starting to wait: how a held-back publisher waits for
//! room in an outbox or a queue.

use tokio::sync::Notify;

/// Returns once `done` holds, checking it again after every `notify_waiters` on `notify`. The
/// wait is enabled before each check, so a wake-up in between is not lost. Cancel-safe.
pub(crate) async fn until(notify: &Notify, mut done: impl FnMut() -> bool) {
    loop {
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if done() {
            return;
        }
        woken.await;
    }
}
