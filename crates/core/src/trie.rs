//! The subscription trie: filters stored level by level so that matching a topic costs one
//! hash lookup per level plus the wildcard branches, whatever the number of subscriptions.
//!
//! Every operation is a loop over levels, never a recursion: a filter's depth is chosen by a
//! client, and a recursion as deep as a 12,000-level filter overflows the stack and aborts the
//! whole broker. Dropping a deep branch is iterative too (see `Drop for Node`).
//!
//! Generic over the stored value so it can be tested against the reference matcher in
//! [`crate::topic`] without any routing machinery.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use smallvec::SmallVec;

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

    /// The child for one filter level, if present.
    fn child(&self, level: &str) -> Option<&Node<V>> {
        match level {
            "+" => self.plus.as_deref(),
            _ => self.children.get(level),
        }
    }

    fn child_mut(&mut self, level: &str) -> Option<&mut Node<V>> {
        match level {
            "+" => self.plus.as_deref_mut(),
            _ => self.children.get_mut(level),
        }
    }

    /// Whether this node holds nothing but the one child that a removal is about to prune.
    fn is_only_a_link(&self) -> bool {
        self.hash.is_empty() && self.exact.is_empty() && self.children.len() + usize::from(self.plus.is_some()) == 1
    }
}

/// Takes a branch apart one node at a time: the default drop would recurse once per level.
impl<V> Drop for Node<V> {
    fn drop(&mut self) {
        if self.children.is_empty() && self.plus.is_none() {
            return;
        }
        let mut pending: Vec<Node<V>> = Vec::new();
        let take = |node: &mut Node<V>, pending: &mut Vec<Node<V>>| {
            pending.extend(node.children.drain().map(|(_, child)| child));
            pending.extend(node.plus.take().map(|plus| *plus));
        };
        take(self, &mut pending);
        while let Some(mut node) = pending.pop() {
            take(&mut node, &mut pending);
        }
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

/// The levels of a filter that lead to its node, and whether its values live in that node's
/// `#` list (the filter ended in `#`) or its exact list.
fn path_of(filter: &str) -> (impl Iterator<Item = &str> + Clone, bool) {
    let (path, hash) = match filter.strip_suffix('#') {
        Some("") => ("", true),
        Some(parent) if parent.ends_with('/') => (&parent[..parent.len() - 1], true),
        _ => (filter, false),
    };
    // A filter that is only `#` has no path: its values sit in the root's `#` list.
    let levels = path.split('/').take(if hash && filter == "#" { 0 } else { usize::MAX });
    (levels, hash)
}

/// A topic's first level and what follows its separator. Levels are a few bytes long, where
/// a plain loop beats the vectorised search `split_once` sets up for every level of every
/// publish.
#[inline]
fn split_level(topic: &str) -> (&str, Option<&str>) {
    match topic.bytes().position(|b| b == b'/') {
        Some(i) => (&topic[..i], Some(&topic[i + 1..])),
        None => (topic, None),
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
        let (levels, hash) = path_of(filter);
        let mut node = &mut self.root;
        for level in levels {
            node = match level {
                "+" => node.plus.get_or_insert_with(Default::default),
                _ => node.children.entry(level.into()).or_default(),
            };
        }
        if hash { &mut node.hash } else { &mut node.exact }
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
    pub fn remove(&mut self, filter: &str, mut remove: impl FnMut(&V) -> bool) -> usize {
        let (levels, hash) = path_of(filter);
        let mut node = &mut self.root;
        for level in levels.clone() {
            match node.child_mut(level) {
                Some(child) => node = child,
                None => return 0,
            }
        }
        let values = if hash { &mut node.hash } else { &mut node.exact };
        let before = values.len();
        values.retain(|v| !remove(v));
        let removed = before - values.len();
        if removed > 0 {
            self.len -= removed;
            self.prune(levels);
        }
        removed
    }

    /// Cuts off the highest node on `levels`' path below which nothing else is stored.
    fn prune<'f>(&mut self, levels: impl Iterator<Item = &'f str> + Clone) {
        // First pass, read-only: the depth of the highest node whose subtree holds nothing
        // but the path itself. Every node below it is a link with one child, and the last
        // one is empty.
        let mut cut = None;
        let mut node = &self.root;
        for (depth, level) in levels.clone().enumerate() {
            let Some(child) = node.child(level) else { return };
            if child.is_only_a_link() || child.is_empty() {
                cut.get_or_insert(depth);
            } else {
                cut = None;
            }
            node = child;
        }
        if !node.is_empty() {
            return;
        }
        let Some(cut) = cut else { return };
        // Second pass: walk to the parent of the cut and detach it; its drop is iterative.
        let mut node = &mut self.root;
        for (depth, level) in levels.enumerate() {
            if depth == cut {
                match level {
                    "+" => node.plus = None,
                    _ => {
                        node.children.remove(level);
                    }
                }
                return;
            }
            match node.child_mut(level) {
                Some(child) => node = child,
                None => return,
            }
        }
    }

    /// Calls `visit` for every value whose filter matches `topic`. Allocates nothing unless
    /// more than 16 wildcard branches are pending at once.
    #[inline]
    pub fn for_each_match(&self, topic: &str, mut visit: impl FnMut(&V)) {
        // MQTT-4.7.2-1: a leading wildcard must not match a topic starting with '$'.
        let dollar = topic.starts_with('$');
        // Depth-first over (node, what is left of the topic, whether wildcards may match).
        type Branch<'t, 'n, V> = (&'t Node<V>, Option<&'n str>, bool);
        let mut pending: SmallVec<[Branch<'_, '_, V>; 16]> = SmallVec::new();
        pending.push((&self.root, Some(topic), !dollar));
        while let Some((node, rest, wildcards)) = pending.pop() {
            if wildcards {
                node.hash.iter().for_each(&mut visit);
            }
            let Some(rest) = rest else {
                node.exact.iter().for_each(&mut visit);
                continue;
            };
            let (level, tail) = split_level(rest);
            if wildcards && let Some(plus) = &node.plus {
                pending.push((plus, tail, true));
            }
            if let Some(child) = node.children.get(level) {
                pending.push((child, tail, true));
            }
        }
    }

    /// Calls `visit` for every value stored under a topic *name* that `filter` matches: the
    /// reverse of [`Trie::for_each_match`], for stores keyed by names (retained messages).
    /// Walks only the branches the filter can reach, and no deeper than the stored names.
    pub fn for_each_matched_by(&self, filter: &str, mut visit: impl FnMut(&V)) {
        enum Step<'t, 'f, V> {
            /// Match what is left of the filter from this node (`top`: the root, where a
            /// wildcard must not match a `$` level, MQTT-4.7.2-1).
            Walk { node: &'t Node<V>, rest: &'f str, top: bool },
            /// Every name below this node.
            All(&'t Node<V>),
        }
        let mut pending = vec![Step::Walk { node: &self.root, rest: filter, top: true }];
        while let Some(step) = pending.pop() {
            let (node, rest, top) = match step {
                Step::All(node) => {
                    node.exact.iter().for_each(&mut visit);
                    pending.extend(node.children.values().map(Step::All));
                    continue;
                }
                Step::Walk { node, rest, top } => (node, rest, top),
            };
            let (level, tail) = match rest.split_once('/') {
                Some((level, tail)) => (level, Some(tail)),
                None => (rest, None),
            };
            let visible = |name: &str| !(top && name.starts_with('$'));
            match (level, tail) {
                ("#", _) => {
                    // `a/#` matches `a` itself as well as everything below it.
                    node.exact.iter().for_each(&mut visit);
                    pending.extend(node.children.iter().filter(|(n, _)| visible(n)).map(|(_, c)| Step::All(c)));
                }
                ("+", Some(tail)) => {
                    pending.extend(node.children.iter().filter(|(n, _)| visible(n)).map(|(_, c)| Step::Walk {
                        node: c,
                        rest: tail,
                        top: false,
                    }))
                }
                ("+", None) => {
                    for (_, child) in node.children.iter().filter(|(n, _)| visible(n)) {
                        child.exact.iter().for_each(&mut visit);
                    }
                }
                (name, tail) => {
                    let Some(child) = node.children.get(name) else { continue };
                    match tail {
                        Some(tail) => pending.push(Step::Walk { node: child, rest: tail, top: false }),
                        None => child.exact.iter().for_each(&mut visit),
                    }
                }
            }
        }
    }

    /// Every stored value (for administrative listings), in no particular order.
    pub fn values(&self) -> Vec<&V> {
        let mut out = Vec::with_capacity(self.len);
        let mut pending = vec![&self.root];
        while let Some(node) = pending.pop() {
            out.extend(node.exact.iter().chain(node.hash.iter()));
            pending.extend(node.plus.as_deref());
            pending.extend(node.children.values());
        }
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

    /// A filter far deeper than any limit is stored, matched, removed and dropped without
    /// recursion, on a thread with a small stack (the default drop and the old recursive walk
    /// overflowed it).
    #[test]
    fn deep_filters_need_no_stack() {
        let worker = std::thread::Builder::new().stack_size(128 * 1024);
        let handle = worker.spawn(|| {
            let deep = vec!["a"; 100_000].join("/");
            let mut t = Trie::default();
            t.upsert(&deep, ("deep".to_string(), 1), |_| false);
            t.upsert(&format!("{deep}/#"), ("deep#".to_string(), 2), |_| false);
            t.upsert("a/+/a", ("short".to_string(), 3), |_| false);
            assert_eq!(matching(&t, &deep).len(), 2, "the filter and its parent's '#'");
            assert_eq!(matching(&t, &format!("{deep}/a")).len(), 1);
            assert_eq!(t.values().len(), 3);
            assert_eq!(t.remove(&deep, |_| true), 1);
            assert_eq!(t.remove(&format!("{deep}/#"), |_| true), 1);
            assert_eq!(matching(&t, "a/b/a"), [("short".to_string(), 3)]);
            t.upsert(&deep, ("again".to_string(), 4), |_| false);
            drop(t);
        });
        handle.unwrap().join().unwrap();
    }

    #[test]
    fn pruning_keeps_branches_that_hold_other_filters() {
        let mut t = Trie::default();
        for (i, f) in ["a/b/c/d", "a/b", "a/b/#", "a/+/c", "#"].iter().enumerate() {
            t.upsert(f, (f.to_string(), i as u32), |_| false);
        }
        assert_eq!(t.remove("a/b/c/d", |_| true), 1);
        assert_eq!(matching(&t, "a/b").len(), 3, "a/b, a/b/# and # survive");
        assert_eq!(t.remove("a/b", |_| true), 1);
        assert_eq!(t.remove("a/b/#", |_| true), 1);
        assert_eq!(matching(&t, "a/x/c").len(), 2);
        assert_eq!(t.remove("a/+/c", |_| true), 1);
        assert_eq!(t.remove("#", |_| true), 1);
        assert!(t.root.is_empty());
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
        /// Stored under names, values are found by every filter that the reference matcher
        /// says matches their name, and by no other.
        #[test]
        fn reverse_walk_agrees_with_reference_matcher(
            names in prop::collection::vec(topic(), 1..40),
            filters in prop::collection::vec(filter(), 1..20),
        ) {
            let mut t = Trie::default();
            for name in &names {
                t.upsert(name, (name.clone(), 0), |_| true);
            }
            for f in &filters {
                let mut found = Vec::new();
                t.for_each_matched_by(f, |v| found.push(v.0.clone()));
                found.sort();
                let mut expected: Vec<String> = names.iter().filter(|n| matches(f, n)).cloned().collect();
                expected.sort();
                expected.dedup();
                prop_assert_eq!(found, expected, "filter {:?}", f);
            }
        }

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
