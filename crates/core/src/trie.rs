//! The subscription trie: filters stored level by level so that matching a topic costs one
//! hash lookup per level plus the wildcard branches, whatever the number of subscriptions.
//!
//! Generic over the stored value so it can be tested against the reference matcher in
//! [`crate::topic`] without any routing machinery.

use std::collections::HashMap;

use foldhash::fast::RandomState;

/// One level of the trie.
struct Node<V> {
    /// Exact-level children. `foldhash` is seeded per process, so filter names chosen by a
    /// client cannot be crafted into hash collisions.
    children: HashMap<Box<str>, Node<V>, RandomState>,
    /// The `+` child.
    plus: Option<Box<Node<V>>>,
    /// Values of filters ending here with `/#` (or `#` at the root).
    hash: Vec<V>,
    /// Values of filters ending exactly here.
    exact: Vec<V>,
}

impl<V> Default for Node<V> {
    fn default() -> Self {
        Node { children: HashMap::default(), plus: None, hash: Vec::new(), exact: Vec::new() }
    }
}

impl<V> Node<V> {
    fn is_empty(&self) -> bool {
        self.children.is_empty() && self.plus.is_none() && self.hash.is_empty() && self.exact.is_empty()
    }
}

/// Topic filters mapped to values, matched against topic names. Filters must be valid
/// (see [`crate::topic::validate_filter`]); topics must be valid names.
pub struct Trie<V> {
    root: Node<V>,
    len: usize,
}

impl<V> Default for Trie<V> {
    fn default() -> Self {
        Trie { root: Node::default(), len: 0 }
    }
}

impl<V> Trie<V> {
    /// Number of values stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value list for `filter`, creating the path to it.
    fn slot_mut(&mut self, filter: &str) -> &mut Vec<V> {
        let mut node = &mut self.root;
        let mut levels = filter.split('/').peekable();
        while let Some(level) = levels.next() {
            if level == "#" {
                return &mut node.hash;
            }
            node = match level {
                "+" => node.plus.get_or_insert_with(Default::default),
                _ => node.children.entry(level.into()).or_default(),
            };
            if levels.peek().is_none() {
                return &mut node.exact;
            }
        }
        unreachable!("split yields at least one level")
    }

    /// Adds `value` under `filter`, or replaces the first stored value for which `same` is true.
    /// Returns the replaced value.
    pub fn upsert(&mut self, filter: &str, value: V, same: impl Fn(&V) -> bool) -> Option<V> {
        let slot = self.slot_mut(filter);
        if let Some(existing) = slot.iter_mut().find(|v| same(v)) {
            return Some(std::mem::replace(existing, value));
        }
        slot.push(value);
        self.len += 1;
        None
    }

    /// Removes the values under `filter` for which `remove` is true, pruning empty branches.
    /// Returns how many were removed.
    pub fn remove(&mut self, filter: &str, remove: impl Fn(&V) -> bool) -> usize {
        let levels: Vec<&str> = filter.split('/').collect();
        let removed = Self::remove_at(&mut self.root, &levels, &remove);
        self.len -= removed;
        removed
    }

    fn remove_at(node: &mut Node<V>, levels: &[&str], remove: &impl Fn(&V) -> bool) -> usize {
        let retain = |values: &mut Vec<V>| {
            let before = values.len();
            values.retain(|v| !remove(v));
            before - values.len()
        };
        match levels {
            [] => unreachable!("filters have at least one level"),
            ["#"] => retain(&mut node.hash),
            [level, rest @ ..] => {
                let child = match *level {
                    "+" => node.plus.as_deref_mut(),
                    _ => node.children.get_mut(*level),
                };
                let Some(child) = child else { return 0 };
                let removed =
                    if rest.is_empty() { retain(&mut child.exact) } else { Self::remove_at(child, rest, remove) };
                if child.is_empty() {
                    match *level {
                        "+" => node.plus = None,
                        _ => {
                            node.children.remove(*level);
                        }
                    }
                }
                removed
            }
        }
    }

    /// Calls `visit` for every value whose filter matches `topic`. Allocates nothing.
    #[inline]
    pub fn for_each_match(&self, topic: &str, mut visit: impl FnMut(&V)) {
        // MQTT-4.7.2-1: a leading wildcard must not match a topic starting with '$'.
        let dollar = topic.starts_with('$');
        Self::walk(&self.root, Some(topic), !dollar, &mut visit);
    }

    fn walk(node: &Node<V>, rest: Option<&str>, wildcards: bool, visit: &mut impl FnMut(&V)) {
        if wildcards {
            node.hash.iter().for_each(&mut *visit);
        }
        let Some(rest) = rest else {
            node.exact.iter().for_each(visit);
            return;
        };
        let (level, tail) = match rest.split_once('/') {
            Some((level, tail)) => (level, Some(tail)),
            None => (rest, None),
        };
        if let Some(child) = node.children.get(level) {
            Self::walk(child, tail, true, visit);
        }
        if wildcards && let Some(plus) = &node.plus {
            Self::walk(plus, tail, true, visit);
        }
    }

    /// Every stored value (for administrative listings), in no particular order.
    pub fn values(&self) -> Vec<&V> {
        fn collect<'a, V>(node: &'a Node<V>, out: &mut Vec<&'a V>) {
            out.extend(node.exact.iter().chain(node.hash.iter()));
            node.plus.iter().for_each(|p| collect(p, out));
            node.children.values().for_each(|c| collect(c, out));
        }
        let mut out = Vec::with_capacity(self.len);
        collect(&self.root, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::matches;
    use proptest::prelude::*;

    fn matching(trie: &Trie<(String, u32)>, topic: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        trie.for_each_match(topic, |v| out.push(v.clone()));
        out.sort();
        out
    }

    #[test]
    fn hash_matches_parent_level_and_dollar_topics_are_protected() {
        let mut t = Trie::default();
        for (i, f) in ["a/#", "#", "+/b", "$SYS/#", "a/b", "+"].iter().enumerate() {
            t.upsert(f, (f.to_string(), i as u32), |_| false);
        }
        let names = |topic| matching(&t, topic).into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert_eq!(names("a"), ["#", "+", "a/#"]);
        assert_eq!(names("a/b"), ["#", "+/b", "a/#", "a/b"]);
        assert_eq!(names("$SYS/x"), ["$SYS/#"]);
        assert_eq!(names("$SYS"), ["$SYS/#"]);
    }

    #[test]
    fn upsert_replaces_and_remove_prunes() {
        let mut t = Trie::default();
        assert!(t.upsert("a/+/c", ("x".to_string(), 1), |v| v.0 == "x").is_none());
        assert_eq!(t.upsert("a/+/c", ("x".to_string(), 2), |v| v.0 == "x"), Some(("x".to_string(), 1)));
        assert_eq!(t.len(), 1);
        assert_eq!(matching(&t, "a/b/c"), [("x".to_string(), 2)]);
        assert_eq!(t.remove("a/+/c", |v| v.0 == "x"), 1);
        assert_eq!(t.remove("a/+/c", |_| true), 0);
        assert!(t.is_empty());
        assert!(t.root.is_empty(), "empty branches are pruned");
    }

    fn level() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), Just("a".into()), Just("b".into()), Just("$s".into()), Just("aa".into())]
    }

    fn topic() -> impl Strategy<Value = String> {
        prop::collection::vec(level(), 1..5).prop_map(|l| l.join("/")).prop_filter("non-empty", |t| !t.is_empty())
    }

    fn filter() -> impl Strategy<Value = String> {
        let flevel = prop_oneof![3 => level(), 1 => Just("+".to_string())];
        (prop::collection::vec(flevel, 1..5), any::<bool>())
            .prop_map(|(mut l, hash)| {
                if hash {
                    l.push("#".into());
                }
                l.join("/")
            })
            .prop_filter("non-empty", |f| !f.is_empty())
    }

    proptest! {
        /// The trie agrees with the reference matcher on random topics and filters, including
        /// empty levels, `$` levels, `+` and `#`.
        #[test]
        fn trie_agrees_with_reference_matcher(
            filters in prop::collection::vec(filter(), 1..40),
            topics in prop::collection::vec(topic(), 1..20),
        ) {
            let mut t = Trie::default();
            for (i, f) in filters.iter().enumerate() {
                crate::topic::validate_filter(f).unwrap();
                t.upsert(f, (f.clone(), i as u32), |_| false);
            }
            for topic in &topics {
                let mut expected: Vec<(String, u32)> = filters.iter().enumerate()
                    .filter(|(_, f)| matches(f, topic))
                    .map(|(i, f)| (f.clone(), i as u32))
                    .collect();
                expected.sort();
                prop_assert_eq!(matching(&t, topic), expected, "topic {:?}", topic);
            }
            for (i, f) in filters.iter().enumerate() {
                prop_assert_eq!(t.remove(f, |v| v.1 == i as u32), 1);
            }
            prop_assert!(t.root.is_empty());
        }
    }
}
