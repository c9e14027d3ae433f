//! A Subscribe's Filter turned into core topic filters.
//!
//! Each TopicExpression maps to one or more MQTT-style filters (a Full-dialect union `a | b` is
//! several) through `wsn-xml`. WS-BaseNotification 1.3 §4.2 ANDs the components of a Filter,
//! so several TopicExpressions mean the *intersection* of what they match; the intersection of
//! two MQTT filters is itself an MQTT filter (or nothing), computed level by level here. A
//! Filter with no TopicExpression matches every topic (`#`). Filters that another filter of the
//! same subscription already covers are left out, so one message is not delivered twice.

use tolk_core::topic;
use wsn_xml::{FaultKind, Subscribe};

use crate::fault::Refusal;

/// A core filter with the WS-N namespace of the expression it came from, used to write the
/// Topic of outgoing notifications in the namespace the subscriber used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicFilter {
    /// Canonical MQTT-style filter.
    pub filter: String,
    /// Namespace of the expression's root topic, when it was declared.
    pub namespace: Option<String>,
}

/// The core filters a Subscribe asks for, or the fault refusing it.
pub(crate) fn filters_of(subscribe: &Subscribe, max_filters: usize) -> Result<Vec<TopicFilter>, Refusal> {
    if !subscribe.other_filters.is_empty() {
        let names: Vec<String> = subscribe.other_filters.iter().map(ToString::to_string).collect();
        return Err(Refusal::new(
            FaultKind::InvalidFilter { unknown_filters: subscribe.other_filters.clone() },
            format!("only TopicExpression filters are supported, not {}", names.join(", ")),
        ));
    }
    let mut result = vec![TopicFilter { filter: "#".to_owned(), namespace: None }];
    for expression in &subscribe.topic_expressions {
        let mapped = expression.to_filters().map_err(|e| Refusal::new(e.fault_kind(), e.to_string()))?;
        let mut next = Vec::new();
        for have in &result {
            for m in &mapped {
                if let Some(filter) = intersect(&have.filter, &m.topic) {
                    let namespace = m.namespace.clone().or_else(|| have.namespace.clone());
                    next.push(TopicFilter { filter, namespace });
                    if next.len() > max_filters {
                        return Err(too_many(max_filters));
                    }
                }
            }
        }
        result = next;
    }
    for f in &result {
        topic::validate_filter(&f.filter).map_err(|e| {
            Refusal::new(FaultKind::InvalidTopicExpression, format!("topic filter {:?} is not usable: {e}", f.filter))
        })?;
    }
    let result = without_covered(result);
    if result.is_empty() {
        return Err(Refusal::new(
            FaultKind::InvalidTopicExpression,
            "the TopicExpressions of this Filter have no topic in common, so it could never match",
        ));
    }
    Ok(result)
}

fn too_many(max: usize) -> Refusal {
    Refusal::new(FaultKind::InvalidTopicExpression, format!("the Filter expands to more than {max} topic filters"))
}

/// The filter matching exactly the topics both `a` and `b` match, if any.
pub(crate) fn intersect(a: &str, b: &str) -> Option<String> {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.split('/').collect(), b.split('/').collect());
    let mut out: Vec<&str> = Vec::with_capacity(la.len().max(lb.len()));
    let mut i = 0;
    loop {
        match (la.get(i).copied(), lb.get(i).copied()) {
            // `#` matches the parent level and everything below: the rest of the other filter.
            (Some("#"), _) => {
                out.extend_from_slice(lb.get(i..).unwrap_or_default());
                break;
            }
            (_, Some("#")) => {
                out.extend_from_slice(la.get(i..).unwrap_or_default());
                break;
            }
            (None, None) => break,
            (None, Some(_)) | (Some(_), None) => return None,
            (Some("+"), Some(level)) | (Some(level), Some("+")) => out.push(level),
            (Some(x), Some(y)) if x == y => out.push(x),
            _ => return None,
        }
        i += 1;
    }
    // A filter starting with a wildcard does not match `$` topics (MQTT-4.7.2-1), so neither
    // does an intersection with it.
    let wild_start = |f: &str| f.starts_with('+') || f.starts_with('#');
    if out.first().is_some_and(|l| l.starts_with('$')) && (wild_start(a) || wild_start(b)) {
        return None;
    }
    Some(out.join("/"))
}

/// Whether every topic `inner` matches is matched by `outer` as well.
pub(crate) fn covers(outer: &str, inner: &str) -> bool {
    if inner.starts_with('$') && (outer.starts_with('+') || outer.starts_with('#')) {
        return false;
    }
    let mut o = outer.split('/');
    let mut n = inner.split('/');
    loop {
        match (o.next(), n.next()) {
            (Some("#"), _) => return true,
            (None, None) => return true,
            (Some("+"), Some(level)) if level != "#" => {}
            (Some(x), Some(y)) if x == y => {}
            _ => return false,
        }
    }
}

/// Drops duplicates and filters covered by another one in the list.
fn without_covered(filters: Vec<TopicFilter>) -> Vec<TopicFilter> {
    let mut kept: Vec<TopicFilter> = Vec::with_capacity(filters.len());
    for (i, f) in filters.iter().enumerate() {
        let covered = filters
            .iter()
            .enumerate()
            .any(|(j, other)| j != i && covers(&other.filter, &f.filter) && (other.filter != f.filter || j < i));
        if !covered {
            kept.push(f.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use wsn_xml::{Dialect, EndpointReference, NamespaceBinding, QName, TopicExpression};

    fn subscribe(expressions: &[(&str, Dialect)]) -> Subscribe {
        let scope = [NamespaceBinding { prefix: Some("t".into()), namespace: "urn:t".into() }];
        Subscribe {
            consumer_reference: EndpointReference::new("http://c/"),
            topic_expressions: expressions.iter().map(|(t, d)| TopicExpression::new(d.clone(), t, &scope)).collect(),
            other_filters: vec![],
            initial_termination_time: None,
            use_raw: false,
            other_policies: vec![],
        }
    }

    fn filters(expressions: &[(&str, Dialect)]) -> Result<Vec<String>, FaultKind> {
        filters_of(&subscribe(expressions), 32).map(|v| v.into_iter().map(|f| f.filter).collect()).map_err(|r| r.kind)
    }

    #[test]
    fn intersections_follow_mqtt_matching() {
        assert_eq!(intersect("a/+", "+/b").as_deref(), Some("a/b"));
        assert_eq!(intersect("a/#", "+/b/#").as_deref(), Some("a/b/#"));
        assert_eq!(intersect("a/#", "a").as_deref(), Some("a"));
        assert_eq!(intersect("#", "a/+").as_deref(), Some("a/+"));
        assert_eq!(intersect("a", "b"), None);
        assert_eq!(intersect("a/b", "a"), None);
        assert_eq!(intersect("#", "$SYS/x"), None, "# does not match $ topics");
        assert_eq!(intersect("$SYS/#", "$SYS/+").as_deref(), Some("$SYS/+"));
        assert_eq!(intersect("#", "#").as_deref(), Some("#"));
    }

    #[test]
    fn coverage_follows_mqtt_matching() {
        assert!(covers("a/#", "a/b/+"));
        assert!(covers("a/#", "a"));
        assert!(covers("+/b", "a/b"));
        assert!(!covers("a/+", "a/#"));
        assert!(!covers("#", "$SYS/a"));
        assert!(covers("#", "+/a"));
        assert!(!covers("a/b", "a/+"));
    }

    #[test]
    fn filters_of_subscribe() {
        assert_eq!(filters(&[]), Ok(vec!["#".to_owned()]));
        assert_eq!(filters(&[("t:a", Dialect::Simple)]), Ok(vec!["a".to_owned()]));
        assert_eq!(filters(&[("t:a/* | t:a/b | t:c//.", Dialect::Full)]), Ok(vec!["a/+".to_owned(), "c/#".to_owned()]));
        assert_eq!(filters(&[("t:a/*", Dialect::Full), ("t:*/b", Dialect::Full)]), Ok(vec!["a/b".to_owned()]));
        assert_eq!(
            filters(&[("t:a", Dialect::Simple), ("t:b", Dialect::Simple)]),
            Err(FaultKind::InvalidTopicExpression)
        );
        assert_eq!(
            filters(&[("t:a", Dialect::Other("urn:xpath".into()))]),
            Err(FaultKind::TopicExpressionDialectUnknown)
        );
        assert_eq!(filters(&[("t:a/*", Dialect::Concrete)]), Err(FaultKind::InvalidTopicExpression));
        let mut s = subscribe(&[]);
        s.other_filters.push(QName::new("http://docs.oasis-open.org/wsn/b-2", "MessageContent"));
        assert!(matches!(filters_of(&s, 32).unwrap_err().kind, FaultKind::InvalidFilter { .. }));
    }

    #[test]
    fn deep_topic_expressions_do_not_recurse() {
        // 100,000 levels on a 256 KiB stack: recursion per level would overflow it. Whether
        // the core accepts a filter that long is its business; answering must not crash.
        let run = || {
            let deep = format!("{}/*", vec!["t:a"; 100_000].join("/"));
            let answer = filters(&[(&deep, Dialect::Full), ("t:a//.", Dialect::Full)]);
            assert!(matches!(answer, Ok(_) | Err(FaultKind::InvalidTopicExpression)), "{answer:?}");
            assert_eq!(intersect(&"a/".repeat(100_000), &"+/".repeat(100_000)).map(|f| f.len()), Some(200_000));
        };
        std::thread::Builder::new().stack_size(256 * 1024).spawn(run).unwrap().join().unwrap();
    }

    #[test]
    fn expansion_is_bounded() {
        let many = (0..40).map(|i| format!("t:x{i}")).collect::<Vec<_>>().join(" | ");
        assert_eq!(filters(&[(&many, Dialect::Full)]), Err(FaultKind::InvalidTopicExpression));
    }
}
