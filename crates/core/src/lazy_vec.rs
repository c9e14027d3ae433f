//! A vector that takes one pointer while empty, for lists that most owners never fill: a
//! session's queue consumers (only AMQP and STOMP subscribers to queues, and MQTT shared
//! subscriptions, have any), and the connection driver's batch of deliveries (a publisher or
//! an idle sensor never gets one). A `Vec` is three words in every session and every
//! connection's task; this is one.

use std::ops::{Deref, DerefMut};

/// A `Vec<T>` allocated on the first push (its header and its buffer), and read as a slice.
#[allow(clippy::box_collection, reason = "8 bytes while empty instead of 24: the point of the type")]
pub struct LazyVec<T>(Option<Box<Vec<T>>>);

impl<T> Default for LazyVec<T> {
    fn default() -> Self {
        LazyVec(None)
    }
}

impl<T> LazyVec<T> {
    /// Appends `value`, allocating on the first push.
    pub fn push(&mut self, value: T) {
        self.0.get_or_insert_default().push(value);
    }

    /// Lends the vector to `f`. While there is none, `f` gets an empty one (no allocation),
    /// which is kept once `f` gives it room: a buffer that `f` fills and drains is then reused
    /// from call to call.
    pub fn with_vec<R>(&mut self, f: impl FnOnce(&mut Vec<T>) -> R) -> R {
        if let Some(vec) = &mut self.0 {
            return f(vec);
        }
        let mut vec = Vec::new();
        let result = f(&mut vec);
        if vec.capacity() > 0 {
            self.0 = Some(Box::new(vec));
        }
        result
    }

    /// Removes the element at `index` and puts the last one in its place (see
    /// [`Vec::swap_remove`]); the vector is released once empty.
    pub fn swap_remove(&mut self, index: usize) -> T {
        let vec = self.0.as_mut().expect("swap_remove on an empty LazyVec");
        let value = vec.swap_remove(index);
        if vec.is_empty() {
            self.0 = None;
        }
        value
    }
}

impl<T> Deref for LazyVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl<T> DerefMut for LazyVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.0.as_deref_mut().map_or(&mut [], Vec::as_mut_slice)
    }
}

impl<T> IntoIterator for LazyVec<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.map(|vec| *vec).unwrap_or_default().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_one_pointer_and_fills_and_empties_like_a_vec() {
        assert_eq!(size_of::<LazyVec<(u64, u64)>>(), size_of::<usize>());
        let mut v = LazyVec::default();
        assert!(v.is_empty());
        v.push(1);
        v.push(2);
        v.push(3);
        assert_eq!(&*v, &[1, 2, 3]);
        v[0] = 10;
        assert_eq!(v.swap_remove(0), 10);
        assert_eq!(&*v, &[3, 2]);
        assert_eq!(v.swap_remove(1), 2);
        assert_eq!(v.swap_remove(0), 3);
        assert!(v.0.is_none(), "released once empty");
        v.push(4);
        assert_eq!(v.into_iter().collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn a_lent_vector_is_kept_only_once_it_has_room() {
        let mut v = LazyVec::<u32>::default();
        assert_eq!(v.with_vec(|vec| vec.len()), 0);
        assert!(v.0.is_none(), "nothing put in it: nothing allocated");
        v.with_vec(|vec| vec.extend([1, 2]));
        let buffer = v.with_vec(|vec| {
            vec.clear();
            vec.as_ptr()
        });
        assert!(v.is_empty());
        assert_eq!(v.with_vec(|vec| vec.as_ptr()), buffer, "the buffer is reused");
    }
}
