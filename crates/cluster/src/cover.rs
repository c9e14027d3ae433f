//! The fewest filters that cover what local subscribers want, none overlapping another.
//!
//! NATS hands a client a message once per matching subscription, and refuses a JetStream
//! consumer whose filter subjects overlap. So the node subscribes to a set in which no two
//! filters can match the same topic: a filter another covers is left out, and two that
//! overlap are joined into one that covers both (`a/+` and `+/b` become `+/+`). What this lets
//! in beyond the wanted topics is filtered again by the router, which matches exactly.
//!
//! Filters without wildcards (most of them, at the scale of many devices) are only checked
//! against the wildcard ones, so the cost is the number of filters times the wildcard ones.

/// Whether some topic matches both filters.
fn overlap(a: &str, b: &str) -> bool {
    let (mut x, mut y) = (a.split('/'), b.split('/'));
    loop {
        match (x.next(), y.next()) {
            (Some("#"), _) | (_, Some("#")) => return true,
            (None, None) => return true,
            // `a/#` matches `a`: the shorter one may still meet a `#` next.
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(p), Some(q)) if p == q || p == "+" || q == "+" => {}
            _ => return false,
        }
    }
}

/// Whether every topic `inner` matches is matched by `outer`.
fn covers(outer: &str, inner: &str) -> bool {
    let (mut x, mut y) = (outer.split('/'), inner.split('/'));
    loop {
        match (x.next(), y.next()) {
            (Some("#"), _) => return true,
            (None, None) => return true,
            (Some("+"), Some(q)) if q != "#" => {}
            (Some(p), Some(q)) if p == q => {}
            _ => return false,
        }
    }
}

/// The narrowest filter covering both.
fn join(a: &str, b: &str) -> String {
    let (x, y): (Vec<&str>, Vec<&str>) = (a.split('/').collect(), b.split('/').collect());
    let mut out: Vec<&str> = Vec::with_capacity(x.len().max(y.len()));
    for (p, q) in x.iter().zip(&y) {
        if *p == "#" || *q == "#" {
            out.push("#");
            return out.join("/");
        }
        out.push(if p == q { p } else { "+" });
    }
    if x.len() != y.len() {
        out.push("#");
    }
    out.join("/")
}

fn has_wildcard(filter: &str) -> bool {
    filter.split('/').any(|level| level == "+" || level == "#")
}

/// The set to subscribe to for `wanted` (sorted, for stable diffs).
pub fn cover(wanted: &[String]) -> Vec<String> {
    let mut wild: Vec<String> = Vec::new();
    for filter in wanted.iter().filter(|f| has_wildcard(f)) {
        let mut filter = filter.clone();
        if wild.iter().any(|w| covers(w, &filter)) {
            continue;
        }
        // Joining may make a filter that overlaps others it did not before: repeat.
        while let Some(at) = wild.iter().position(|w| overlap(w, &filter)) {
            filter = join(&wild.swap_remove(at), &filter);
        }
        wild.push(filter);
    }
    let exact: Vec<String> =
        wanted.iter().filter(|f| !has_wildcard(f) && !wild.iter().any(|w| covers(w, f))).cloned().collect();
    let mut all: Vec<String> = wild.into_iter().chain(exact).collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(filters: &[&str]) -> Vec<String> {
        cover(&filters.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn covered_filters_are_left_out() {
        assert_eq!(set(&["a/b", "a/+", "a/#", "c"]), ["a/#", "c"]);
        assert_eq!(set(&["#", "a/+/c", "x"]), ["#"]);
        assert_eq!(set(&["a/b", "a/b/c"]), ["a/b", "a/b/c"]);
    }

    #[test]
    fn overlapping_filters_are_joined() {
        assert_eq!(set(&["a/+", "+/b"]), ["+/+"]);
        assert_eq!(set(&["a/+/c", "a/b/#"]), ["a/+/#"]);
        assert_eq!(set(&["a/#", "a"]), ["a/#"]);
        assert_eq!(set(&["x/+", "y/+"]), ["x/+", "y/+"]);
    }

    #[test]
    fn the_result_never_overlaps_itself() {
        let wanted = ["a/+/c", "+/b/c", "a/b/+", "d/#", "+/+/+/e", "d", "q/w/e", "a/x/y/e"];
        let got = set(&wanted);
        for (i, f) in got.iter().enumerate() {
            for g in &got[i + 1..] {
                assert!(!overlap(f, g), "{f} and {g} in {got:?}");
            }
        }
        for w in wanted {
            assert!(got.iter().any(|g| covers(g, w)), "{w} not covered by {got:?}");
        }
    }

    #[test]
    fn overlap_and_cover_follow_mqtt_matching() {
        assert!(overlap("a/#", "a"));
        assert!(!overlap("a/+", "a"));
        assert!(covers("a/#", "a"));
        assert!(!covers("a/+", "a/#"));
        assert!(covers("+/#", "a/+/c"));
        assert_eq!(join("a/b", "a/b/c"), "a/b/#");
        assert_eq!(join("a/x/c", "a/y/c"), "a/+/c");
    }
}
