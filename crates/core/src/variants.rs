//! What a message's payload was re-encoded to ([`crate::transcode`]), kept with the message.
//! Generic over the message type so that the message model does not import the transcoder.

use std::sync::{Arc, Mutex, MutexGuard};

/// What a message was converted to, by rule: kept with the message so that every subscriber
/// after the first gets the same conversion. Empty for almost every message, and then 16
/// bytes. A copy of a message (which may then be changed) starts empty, and it never makes a
/// message unequal to another.
pub(crate) struct Variants<T>(Mutex<Option<Box<Converted<T>>>>);

/// Conversions made, by rule index: `None` where the conversion failed.
type Converted<T> = Vec<(usize, Option<Arc<T>>)>;

/// The lock on a message's [`Variants`].
pub(crate) struct VariantsGuard<'a, T>(MutexGuard<'a, Option<Box<Converted<T>>>>);

impl<T> Variants<T> {
    /// Held while converting, so that a message is converted once per rule.
    pub(crate) fn lock(&self) -> VariantsGuard<'_, T> {
        VariantsGuard(self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<T> VariantsGuard<'_, T> {
    /// The conversion by rule `index`, if it was made: `Some(None)` when it failed.
    pub(crate) fn get(&self, index: usize) -> Option<Option<Arc<T>>> {
        self.0.as_ref()?.iter().find(|(i, _)| *i == index).map(|(_, v)| v.clone())
    }

    /// Records the conversion by rule `index`.
    pub(crate) fn put(&mut self, index: usize, variant: Option<Arc<T>>) {
        self.0.get_or_insert_default().push((index, variant));
    }
}

impl<T> Default for Variants<T> {
    fn default() -> Self {
        Variants(Mutex::new(None))
    }
}

impl<T> Clone for Variants<T> {
    fn clone(&self) -> Self {
        Variants::default()
    }
}

impl<T> PartialEq for Variants<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Variants<T> {}

impl<T> std::fmt::Debug for Variants<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Variants")
    }
}
