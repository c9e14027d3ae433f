//! Answers to PUBLISHes that wait for the store: a PUBACK (or PUBREC) for a message that left
//! something on disk (retained, in a durable queue, for a persistent session) goes out once
//! the store has it, and answers after it wait behind it, so the client sees them in the order
//! it published. The endpoint awaits each commit (`take_commits`) and reports its outcome
//! (`stored`); the session sends what the line releases.

use std::collections::VecDeque;

use mqttsn_codec::Message as SnMessage;
use tolk_core::store::Durable;

struct Waiting {
    /// The commit it waits for; 0 for an answer only waiting its turn.
    seq: u64,
    done: bool,
    answer: SnMessage,
    /// Sent instead when the store fails.
    refusal: SnMessage,
}

/// A session's answers waiting for the store.
#[derive(Default)]
pub(crate) struct StoredAcks {
    line: VecDeque<Waiting>,
    last_seq: u64,
    commits: Vec<(u64, Durable)>,
}

impl StoredAcks {
    /// Places `answer`: returned to be sent now when nothing waits and `commit` is `None`;
    /// otherwise it waits (for `commit`, which the endpoint takes with
    /// [`StoredAcks::take_commits`], and for those before it). `refusal` goes instead if the
    /// store fails.
    pub(crate) fn answer(
        &mut self,
        answer: SnMessage,
        commit: Option<Durable>,
        refusal: SnMessage,
    ) -> Option<SnMessage> {
        match commit {
            None if self.line.is_empty() => Some(answer),
            None => {
                self.line.push_back(Waiting { seq: 0, done: true, answer, refusal });
                None
            }
            Some(commit) => {
                self.last_seq += 1;
                self.commits.push((self.last_seq, commit));
                self.line.push_back(Waiting { seq: self.last_seq, done: false, answer, refusal });
                None
            }
        }
    }

    /// The commits to await, each with the number [`StoredAcks::stored`] expects back.
    pub(crate) fn take_commits(&mut self) -> Vec<(u64, Durable)> {
        std::mem::take(&mut self.commits)
    }

    /// Commit `seq` ended (`ok`: durable): the answers now free to go, in order, each with
    /// whether it is the refusal.
    pub(crate) fn stored(&mut self, seq: u64, ok: bool) -> Vec<(SnMessage, bool)> {
        if let Some(waiting) = self.line.iter_mut().find(|w| w.seq == seq && !w.done) {
            waiting.done = true;
            if !ok {
                std::mem::swap(&mut waiting.answer, &mut waiting.refusal);
                waiting.seq = u64::MAX;
            }
        }
        let mut ready = Vec::new();
        while self.line.front().is_some_and(|w| w.done) {
            if let Some(w) = self.line.pop_front() {
                ready.push((w.answer, w.seq == u64::MAX));
            }
        }
        ready
    }

    /// Forgets the waiting answers (the connection they were for is gone). Numbering goes on,
    /// so that a late outcome of a forgotten commit matches nothing.
    pub(crate) fn clear(&mut self) {
        self.line.clear();
        self.commits.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(id: u16) -> SnMessage {
        SnMessage::PubRec { msg_id: id }
    }

    #[test]
    fn answers_leave_in_publish_order_once_their_commits_are_durable() {
        let mut line = StoredAcks::default();
        assert!(line.answer(ack(1), None, ack(91)).is_some(), "nothing waits: at once");
        assert!(line.answer(ack(2), Some(Durable::ready(Ok(()))), ack(92)).is_none());
        assert!(line.answer(ack(3), None, ack(93)).is_none(), "behind 2");
        assert!(line.answer(ack(4), Some(Durable::ready(Ok(()))), ack(94)).is_none());
        let seqs: Vec<u64> = line.take_commits().into_iter().map(|(s, _)| s).collect();
        assert_eq!(seqs, [1, 2]);
        assert!(line.stored(2, false).is_empty(), "4 waits for 2");
        let freed = line.stored(1, true);
        assert_eq!(freed, [(ack(2), false), (ack(3), false), (ack(94), true)]);
        assert!(line.answer(ack(5), None, ack(95)).is_some());
    }
}
