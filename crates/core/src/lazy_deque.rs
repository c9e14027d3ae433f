//! A double-ended queue that takes one pointer until its first push, for queues that sit in
//! every connection's task and stay empty in most: the deliveries between encoding and the
//! socket ([`crate::drive::Egress`]; a publisher or an idle sensor never has one), MQTT's
//! retained messages waiting for window space. A `VecDeque` is four words; this is one.
//!
//! Once allocated it is kept, empty or not: a connection that receives reuses its buffer from
//! message to message instead of allocating one per delivery.

use std::collections::VecDeque;

/// A `VecDeque<T>` allocated on the first push.
#[allow(clippy::box_collection, reason = "8 bytes while unused instead of 32: the point of the type")]
pub struct LazyDeque<T>(Option<Box<VecDeque<T>>>);

impl<T> Default for LazyDeque<T> {
    fn default() -> Self {
        LazyDeque(None)
    }
}

impl<T> LazyDeque<T> {
    /// Appends `value`, allocating on the first push.
    pub fn push_back(&mut self, value: T) {
        self.0.get_or_insert_default().push_back(value);
    }

    /// Prepends `value`, allocating on the first push.
    pub fn push_front(&mut self, value: T) {
        self.0.get_or_insert_default().push_front(value);
    }

    /// The first element, if any.
    pub fn front(&self) -> Option<&T> {
        self.0.as_ref()?.front()
    }

    /// Removes the first element, if any.
    pub fn pop_front(&mut self) -> Option<T> {
        self.0.as_mut()?.pop_front()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|deque| deque.is_empty())
    }

    /// Removes everything, front first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.0.iter_mut().flat_map(|deque| deque.drain(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_is_one_pointer_and_it_queues_at_both_ends() {
        assert_eq!(size_of::<LazyDeque<(u64, u64)>>(), size_of::<usize>());
        let mut q = LazyDeque::default();
        assert!(q.is_empty() && q.front().is_none() && q.pop_front().is_none());
        assert!(q.0.is_none(), "nothing allocated until the first push");
        q.push_back(2);
        q.push_back(3);
        q.push_front(1);
        assert_eq!(q.front(), Some(&1));
        assert_eq!(q.pop_front(), Some(1));
        assert_eq!(q.drain().collect::<Vec<_>>(), vec![2, 3]);
        assert!(q.is_empty());
        assert!(q.0.is_some(), "kept once allocated");
    }
}
