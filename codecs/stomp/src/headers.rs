//! [`Headers`]: the ordered header list of one frame, with STOMP's lookup rule.

use std::fmt;

use crate::text::Utf8Bytes;

/// A frame's headers in wire order, duplicates kept.
///
/// STOMP 1.2 "Repeated Header Entries": if a header is repeated, only the first occurrence is
/// used, so [`Headers::get`] returns the first one; later ones stay visible through
/// [`Headers::get_all`] and [`Headers::iter`] (a server relaying a frame may need them). Names
/// are case-sensitive.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers {
    entries: Vec<(Utf8Bytes, Utf8Bytes)>,
}

impl Headers {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list with room for `capacity` headers, to build frames without regrowing.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { entries: Vec::with_capacity(capacity) }
    }

    /// Appends a header, keeping any earlier one of the same name (which therefore still wins).
    pub fn push(&mut self, name: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) {
        self.entries.push((name.into(), value.into()));
    }

    /// Makes `name` carry exactly `value`: replaces the first occurrence in place and drops the
    /// others, or appends if absent.
    pub fn set(&mut self, name: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) {
        let name = name.into();
        let value = value.into();
        match self.entries.iter().position(|(n, _)| *n == name) {
            Some(first) => {
                let mut index = 0;
                self.entries.retain(|(n, _)| {
                    let keep = index <= first || *n != name;
                    index += 1;
                    keep
                });
                if let Some(entry) = self.entries.get_mut(first) {
                    entry.1 = value;
                }
            }
            None => self.entries.push((name, value)),
        }
    }

    /// Removes every occurrence of `name`; returns how many were removed.
    pub fn remove(&mut self, name: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(n, _)| *n != name);
        before - self.entries.len()
    }

    /// The value of the first `name` header (STOMP 1.2 "Repeated Header Entries").
    pub fn get(&self, name: &str) -> Option<&str> {
        self.get_text(name).map(Utf8Bytes::as_str)
    }

    /// Like [`Headers::get`], but returns the shared text so it can be kept without copying.
    pub fn get_text(&self, name: &str) -> Option<&Utf8Bytes> {
        self.entries.iter().find(|(n, _)| *n == name).map(|(_, value)| value)
    }

    /// Every value of `name`, in wire order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries.iter().filter(move |(n, _)| *n == name).map(|(_, value)| value.as_str())
    }

    /// Whether at least one `name` header is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get_text(name).is_some()
    }

    /// All headers in wire order, duplicates included.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Utf8Bytes, &Utf8Bytes)> {
        self.entries.iter().map(|(name, value)| (name, value))
    }

    /// Number of header entries, duplicates included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the frame has no headers.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<N: Into<Utf8Bytes>, V: Into<Utf8Bytes>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        Self { entries: iter.into_iter().map(|(name, value)| (name.into(), value.into())).collect() }
    }
}

impl<N: Into<Utf8Bytes>, V: Into<Utf8Bytes>> Extend<(N, V)> for Headers {
    fn extend<I: IntoIterator<Item = (N, V)>>(&mut self, iter: I) {
        self.entries.extend(iter.into_iter().map(|(name, value)| (name.into(), value.into())));
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Headers {
        [("foo", "World"), ("bar", "x"), ("foo", "Hello")].into_iter().collect()
    }

    #[test]
    fn first_occurrence_wins() {
        // STOMP 1.2 "Repeated Header Entries": foo:World then foo:Hello → World.
        let headers = sample();
        assert_eq!(headers.get("foo"), Some("World"));
        assert_eq!(headers.get_all("foo").collect::<Vec<_>>(), ["World", "Hello"]);
        assert_eq!(headers.len(), 3);
    }

    #[test]
    fn names_are_case_sensitive() {
        assert_eq!(sample().get("FOO"), None);
    }

    #[test]
    fn set_replaces_first_and_drops_duplicates() {
        let mut headers = sample();
        headers.set("foo", "only");
        let entries: Vec<_> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        assert_eq!(entries, [("foo", "only"), ("bar", "x")]);
        headers.set("new", "1");
        assert_eq!(headers.get("new"), Some("1"));
    }

    #[test]
    fn remove_counts() {
        let mut headers = sample();
        assert_eq!(headers.remove("foo"), 2);
        assert!(!headers.contains("foo"));
        assert_eq!(headers.remove("foo"), 0);
    }
}
