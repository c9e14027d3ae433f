//! A double-ended queue that takes one pointer until its first push, for queues that sit in
//! every connection's task and stay empty in most: the deliveries between encoding and the
//! socket ([`crate::drive::Egress`]; a publisher or an idle sensor never has one), MQTT's
//! retained messages waiting for window space and its QoS 1/2 deliveries in flight. A
//! `VecDeque` is four words; this is one.
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

    /// How many elements it holds.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |deque| deque.len())
    }

    /// The elements, front first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().flat_map(|deque| deque.iter())
    }

    /// The elements, front first, to change in place.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.0.iter_mut().flat_map(|deque| deque.iter_mut())
    }

    /// Removes the element at `index` (counted from the front), if there is one.
    pub fn remove(&mut self, index: usize) -> Option<T> {
        self.0.as_mut()?.remove(index)
    }

    /// Removes everything, front first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.0.iter_mut().flat_map(|deque| deque.drain(..))
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for LazyDeque<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> IntoIterator for LazyDeque<T> {
    type Item = T;
    type IntoIter = std::collections::vec_deque::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.map(|deque| *deque).unwrap_or_default().into_iter()
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
        assert_eq!(q.len(), 3);
        for x in q.iter_mut() {
            *x *= 10;
        }
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![10, 20, 30]);
        assert_eq!(q.remove(1), Some(20));
        assert_eq!(q.remove(5), None);
        assert_eq!(q.pop_front(), Some(10));
        q.push_back(40);
        assert_eq!(q.drain().collect::<Vec<_>>(), vec![30, 40]);
        assert!(q.is_empty());
        assert!(q.0.is_some(), "kept once allocated");
        q.push_back(50);
        assert_eq!(q.into_iter().collect::<Vec<_>>(), vec![50]);
        assert_eq!(LazyDeque::<u8>::default().into_iter().count(), 0);
    }
}
