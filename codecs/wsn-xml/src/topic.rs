//! WS-Topics 1.3 topic expressions and their mapping to tolk's canonical, MQTT-style topic
//! space.
//!
//! # Forward: expression → canonical topic or filter
//!
//! The namespace is *not* part of the canonical topic: `tns:a/b` with `tns` bound to N maps
//! to the topic `a/b`, and N travels on the side ([`MappedTopic::namespace`]) so a reply can
//! re-emit the topic in the namespace the client used. Two WS-N topics that differ only by
//! namespace therefore meet in the same core topic.
//!
//! | Expression (dialect)                 | Canonical        | Meaning                          |
//! |--------------------------------------|------------------|----------------------------------|
//! | `tns:a` (Simple)                     | `a`              | root topic                       |
//! | `tns:a/b/c` (Concrete)               | `a/b/c`          | exact topic                      |
//! | `tns:a/*` (Full)                     | `a/+`            | any child of `a`                 |
//! | `tns:a/*/c` (Full)                   | `a/+/c`          | `*` stands for one level         |
//! | `tns:*` (Full)                       | `+`              | any root topic                   |
//! | `tns:a//.` (Full)                    | `a/#`            | `a` and all its descendants      |
//! | `tns:a//*` (Full)                    | `a/+/#`          | all descendants of `a`, not `a`  |
//! | `tns:a/*//.` (Full)                  | `a/+/#`          | `//.` may follow any step        |
//! | `tns:a | tns:b/*` (Full)             | `a`, `b/+`       | a union is several filters       |
//!
//! Refused with [`TopicError::Unsupported`] because MQTT filters cannot say them: `//` followed
//! by a name (`tns:a//b`: `b` at any depth), `//` anywhere but before the last step, a leading
//! `//`, `.` other than in `//.`, and a child step whose prefix is bound to a different
//! namespace than the root's. Wildcards (`*`, `//`, `|`) in the Simple or Concrete dialect are
//! [`TopicError::Invalid`]. A Simple expression with `/` steps is read as Concrete: clients do
//! send that, and it has only one possible meaning.
//!
//! Prefix resolution follows XML Schema's QName rule (the default namespace applies to an
//! unprefixed root step). A prefix with no binding in scope is accepted and maps to the same
//! canonical topic with no namespace, because zeep sends `tns1:…` text without declaring
//! `tns1`; the namespace, not the topic, is what is unknown then.
//!
//! # Levels and names
//!
//! Topic levels must be XML NCNames in a topic expression, but any UTF-8 string in MQTT. The
//! two are bridged with the `_xHHHH_` escape of .NET's `XmlConvert.EncodeLocalName`: a
//! character that is not allowed at its position becomes `_xHHHH_` (or `_xHHHHHHHH_` beyond
//! U+FFFF, uppercase hex), and a literal `_` that would read as such an escape becomes `_x005F_`. An empty
//! level (MQTT `a//b`) is written `_x0000_`. Decoding never produces `/`, `+`, `#` or NUL, so
//! an expression cannot smuggle extra levels or wildcards into the core.
//!
//! # Reverse: canonical topic → expression
//!
//! [`TopicExpression::from_topic`] writes `tns:a/b` with `tns` bound to the given namespace
//! (dialect Simple for one level, Concrete otherwise); [`TopicExpression::from_filter`] writes
//! the Full-dialect form of an MQTT filter, the inverse of the table above.

/// URI of the Simple dialect (WS-Topics 1.3 §7.1); also the reading of a missing `Dialect`.
pub const DIALECT_SIMPLE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple";
/// URI of the Concrete dialect (WS-Topics 1.3 §7.2).
pub const DIALECT_CONCRETE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete";
/// URI of the Full dialect (WS-Topics 1.3 §7.3).
pub const DIALECT_FULL: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full";

/// Prefix used when tolk writes a topic expression itself.
pub const TOPIC_PREFIX: &str = "tns";

/// Topic expression dialect, from the `Dialect` attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Root topics only (`tns:a`).
    Simple,
    /// Exact paths (`tns:a/b`).
    Concrete,
    /// XPath-like paths with `*`, `//`, `.` and `|`.
    Full,
    /// Any other URI (e.g. XPath 1.0); not mappable, answered with
    /// `TopicExpressionDialectUnknownFault`.
    Other(String),
}

impl Dialect {
    /// Reads the `Dialect` attribute. A missing attribute means Simple (tolk's rule; the
    /// schema requires the attribute, but clients omit it for plain topic names).
    pub fn from_uri(uri: Option<&str>) -> Self {
        match uri.map(str::trim) {
            None | Some(DIALECT_SIMPLE) => Dialect::Simple,
            Some(DIALECT_CONCRETE) => Dialect::Concrete,
            Some(DIALECT_FULL) => Dialect::Full,
            Some(other) => Dialect::Other(other.to_owned()),
        }
    }

    /// The dialect URI to write in a `Dialect` attribute.
    pub fn uri(&self) -> &str {
        match self {
            Dialect::Simple => DIALECT_SIMPLE,
            Dialect::Concrete => DIALECT_CONCRETE,
            Dialect::Full => DIALECT_FULL,
            Dialect::Other(uri) => uri,
        }
    }
}

/// One namespace binding a topic expression relies on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamespaceBinding {
    /// The prefix; `None` for the default namespace.
    pub prefix: Option<String>,
    /// The namespace URI.
    pub namespace: String,
}

/// A `wsnt:TopicExpression` or `wsnt:Topic`: dialect, text, and the namespace bindings its
/// prefixes refer to (taken from the element's scope, limited to the prefixes the text uses,
/// sorted by prefix).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicExpression {
    /// The dialect.
    pub dialect: Dialect,
    /// The expression text, whitespace-trimmed.
    pub text: String,
    /// Bindings for the prefixes used in `text`.
    pub namespaces: Vec<NamespaceBinding>,
}

/// A canonical topic (or filter) with the WS-N namespace kept on the side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MappedTopic {
    /// Canonical MQTT-style topic name or filter (`a/b`, `a/+`, `a/#`).
    pub topic: String,
    /// Namespace of the root topic, when known.
    pub namespace: Option<String>,
    /// Prefix the client used for it, to re-emit the same text.
    pub prefix: Option<String>,
}

/// Why a topic expression cannot be mapped, or a topic cannot be written as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The dialect is not Simple, Concrete or Full.
    #[error("unknown topic expression dialect {0:?}")]
    UnknownDialect(String),
    /// The expression does not follow its dialect's grammar.
    #[error("topic expression {expression:?} is invalid: {reason}")]
    Invalid {
        /// The expression text.
        expression: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Valid WS-Topics, but with no MQTT-filter equivalent (see the module docs).
    #[error("topic expression {expression:?} uses {construct}, which tolk cannot map to a topic filter")]
    Unsupported {
        /// The expression text.
        expression: String,
        /// The construct that cannot be mapped.
        construct: &'static str,
    },
    /// A single concrete topic was needed (e.g. the Topic of a Notify) but the expression has
    /// wildcards or several paths.
    #[error("topic expression {expression:?} is not a single concrete topic")]
    NotConcrete {
        /// The expression text.
        expression: String,
    },
    /// A canonical topic or filter that has no topic-expression form.
    #[error("topic {topic:?} cannot be written as a topic expression: {reason}")]
    NotRepresentable {
        /// The canonical topic or filter.
        topic: String,
        /// Why.
        reason: &'static str,
    },
}

impl TopicExpression {
    /// Builds an expression from its parts, keeping only the bindings `text` uses (the
    /// constructor the parser uses, with the element's whole scope).
    pub fn new(dialect: Dialect, text: &str, in_scope: &[NamespaceBinding]) -> Self {
        let text = text.trim().to_owned();
        let mut namespaces: Vec<NamespaceBinding> = Vec::new();
        for prefix in prefixes_used(&text) {
            // The last binding of a prefix in scope order is the one in force.
            let binding = in_scope.iter().rev().find(|b| b.prefix.as_deref() == prefix);
            if let Some(b) = binding.filter(|b| !namespaces.contains(b)) {
                namespaces.push(b.clone());
            }
        }
        namespaces.sort();
        TopicExpression { dialect, text, namespaces }
    }

    /// The namespace bound to `prefix` (`None` = default namespace) for this expression.
    pub fn resolve_prefix(&self, prefix: Option<&str>) -> Option<&str> {
        self.namespaces.iter().find(|b| b.prefix.as_deref() == prefix).map(|b| b.namespace.as_str())
    }

    /// Maps the expression to canonical topic filters (one per `|` alternative).
    pub fn to_filters(&self) -> Result<Vec<MappedTopic>, TopicError> {
        let full = match &self.dialect {
            Dialect::Other(uri) => return Err(TopicError::UnknownDialect(uri.clone())),
            Dialect::Full => true,
            Dialect::Simple | Dialect::Concrete => false,
        };
        if self.text.is_empty() {
            return Err(self.invalid("empty expression"));
        }
        let paths: Vec<&str> = if full { self.text.split('|').map(str::trim).collect() } else { vec![&self.text] };
        paths.into_iter().map(|path| self.map_path(path, full)).collect()
    }

    /// Maps the expression to one concrete canonical topic (no wildcards, no union), as
    /// needed for the Topic of a published message.
    pub fn to_topic(&self) -> Result<MappedTopic, TopicError> {
        let mut filters = self.to_filters()?;
        match (filters.pop(), filters.is_empty()) {
            (Some(only), true) if !only.topic.split('/').any(|l| l == "+" || l == "#") => Ok(only),
            _ => Err(TopicError::NotConcrete { expression: self.text.clone() }),
        }
    }

    /// Writes a canonical topic name as an expression: `tns:a/b` with `tns` bound to
    /// `namespace` (unprefixed and unbound without one); Simple for one level, else Concrete.
    pub fn from_topic(topic: &str, namespace: Option<&str>) -> Result<Self, TopicError> {
        if topic.contains(['+', '#']) {
            return Err(TopicError::NotRepresentable { topic: topic.to_owned(), reason: "it contains wildcards" });
        }
        let levels: Vec<String> = topic.split('/').map(encode_level).collect();
        let dialect = if levels.len() == 1 { Dialect::Simple } else { Dialect::Concrete };
        Ok(Self::assemble(dialect, &levels.join("/"), namespace))
    }

    /// Writes a canonical filter as a Full-dialect expression: `+` → `*`, trailing `#` →
    /// `//.`. A filter of `#` alone has no expression: subscribe without a Filter instead.
    pub fn from_filter(filter: &str, namespace: Option<&str>) -> Result<Self, TopicError> {
        let not = |reason| TopicError::NotRepresentable { topic: filter.to_owned(), reason };
        let mut levels: Vec<&str> = filter.split('/').collect();
        let descendants = levels.last() == Some(&"#");
        if descendants {
            levels.pop();
        }
        if levels.is_empty() {
            return Err(not("'#' alone has no topic expression; omit the Filter"));
        }
        let mut text = String::new();
        for (i, level) in levels.iter().enumerate() {
            if i > 0 {
                text.push('/');
            }
            match *level {
                "+" => text.push('*'),
                l if l.contains(['+', '#']) => return Err(not("a wildcard is not a whole level or '#' is not last")),
                l => text.push_str(&encode_level(l)),
            }
        }
        if descendants {
            text.push_str("//.");
        }
        Ok(Self::assemble(Dialect::Full, &text, namespace))
    }

    fn assemble(dialect: Dialect, path: &str, namespace: Option<&str>) -> Self {
        match namespace {
            Some(ns) => TopicExpression {
                dialect,
                text: format!("{TOPIC_PREFIX}:{path}"),
                namespaces: vec![NamespaceBinding { prefix: Some(TOPIC_PREFIX.to_owned()), namespace: ns.to_owned() }],
            },
            None => TopicExpression { dialect, text: path.to_owned(), namespaces: Vec::new() },
        }
    }

    fn invalid(&self, reason: &'static str) -> TopicError {
        TopicError::Invalid { expression: self.text.clone(), reason }
    }

    fn unsupported(&self, construct: &'static str) -> TopicError {
        TopicError::Unsupported { expression: self.text.clone(), construct }
    }

    fn map_path(&self, path: &str, full: bool) -> Result<MappedTopic, TopicError> {
        let steps = tokenize(path).ok_or_else(|| self.invalid("malformed path step"))?;
        let last = steps.len().saturating_sub(1);
        let mut levels: Vec<String> = Vec::with_capacity(steps.len() + 1);
        let mut root: Option<(Option<&str>, Option<&str>)> = None; // (prefix, namespace)
        for (i, step) in steps.iter().enumerate() {
            let wildcard = step.sep == Some(Sep::Descendant) || !matches!(step.name, StepName::Name(_));
            if wildcard && !full {
                return Err(self.invalid("wildcards need the Full dialect"));
            }
            // The namespace of this step: unprefixed root steps take the default namespace
            // (XML Schema QName rule); unprefixed child steps are in the root's namespace.
            let ns = match (step.prefix, &root) {
                (None, Some((_, root_ns))) => *root_ns,
                (prefix, _) => self.resolve_prefix(prefix),
            };
            match &root {
                None => root = Some((step.prefix, ns)),
                Some((root_prefix, root_ns)) => {
                    let same = match (ns, root_ns) {
                        (Some(a), Some(b)) => a == *b,
                        (None, None) => step.prefix.is_none() || step.prefix == *root_prefix,
                        _ => false,
                    };
                    if !same {
                        return Err(self.unsupported("a child topic in another namespace than its root"));
                    }
                }
            }
            match (step.sep, &step.name) {
                (Some(Sep::Descendant), _) if i == 0 => {
                    return Err(self.unsupported("a leading '//' (a topic at any depth)"));
                }
                (Some(Sep::Descendant), _) if i != last => {
                    return Err(self.unsupported("'//' before a step that is not the last"));
                }
                (Some(Sep::Descendant), StepName::SelfNode) => levels.push("#".to_owned()),
                (Some(Sep::Descendant), StepName::Any) => {
                    levels.push("+".to_owned());
                    levels.push("#".to_owned());
                }
                (Some(Sep::Descendant), StepName::Name(_)) => {
                    return Err(self.unsupported("'//name' (a named topic at any depth)"));
                }
                (_, StepName::SelfNode) => return Err(self.unsupported("'.' other than in '//.'")),
                (_, StepName::Any) => levels.push("+".to_owned()),
                (_, StepName::Name(name)) => levels.push(decode_level(name)),
            }
        }
        let (prefix, namespace) = root.ok_or_else(|| self.invalid("empty path"))?;
        Ok(MappedTopic {
            topic: levels.join("/"),
            namespace: namespace.map(str::to_owned),
            prefix: prefix.map(str::to_owned),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sep {
    Child,
    Descendant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepName<'a> {
    Name(&'a str),
    Any,
    SelfNode,
}

#[derive(Debug, Clone, Copy)]
struct Step<'a> {
    /// `None` for the first step of a path without a leading separator.
    sep: Option<Sep>,
    prefix: Option<&'a str>,
    name: StepName<'a>,
}

/// Splits one path (no `|`) into steps; `None` on any syntax error.
fn tokenize(path: &str) -> Option<Vec<Step<'_>>> {
    let mut steps = Vec::new();
    let mut rest = path;
    loop {
        let sep = if let Some(r) = rest.strip_prefix("//") {
            rest = r;
            Some(Sep::Descendant)
        } else if let Some(r) = rest.strip_prefix('/') {
            rest = r;
            Some(Sep::Child)
        } else if steps.is_empty() {
            None
        } else {
            return None;
        };
        let end = rest.find('/').unwrap_or(rest.len());
        let (token, tail) = rest.split_at(end);
        rest = tail;
        let (prefix, local) = match token.split_once(':') {
            Some((p, l)) if is_ncname(p) => (Some(p), l),
            Some(_) => return None,
            None => (None, token),
        };
        let name = match local {
            "*" => StepName::Any,
            "." if prefix.is_none() => StepName::SelfNode,
            l if is_ncname(l) => StepName::Name(l),
            _ => return None,
        };
        steps.push(Step { sep, prefix, name });
        if rest.is_empty() {
            return Some(steps);
        }
    }
}

/// Prefixes used by the QNames of an expression (`None` = an unprefixed name, which depends
/// on the default namespace), each once, in order of first use. The set keeps this linear: an
/// expression can hold a hundred thousand distinct prefixes, and a scan of the list per token
/// would make one request cost minutes of CPU.
pub(crate) fn prefixes_used(text: &str) -> Vec<Option<&str>> {
    let mut used: Vec<Option<&str>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for token in text.split(['/', '|']).map(str::trim).filter(|t| !t.is_empty()) {
        let prefix = match token.split_once(':') {
            Some((p, _)) => Some(p),
            None if token == "*" || token == "." => continue,
            None => None,
        };
        if seen.insert(prefix) {
            used.push(prefix);
        }
    }
    used
}

/// XML 1.0 (5th ed.) §2.3 `NameStartChar`, without `:`.
fn is_name_start(c: char) -> bool {
    matches!(c,
        'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}' | '\u{F8}'..='\u{2FF}'
        | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}' | '\u{200C}'..='\u{200D}' | '\u{2070}'..='\u{218F}'
        | '\u{2C00}'..='\u{2FEF}' | '\u{3001}'..='\u{D7FF}' | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
}

/// XML 1.0 (5th ed.) §2.3 `NameChar`, without `:`.
fn is_name_char(c: char) -> bool {
    is_name_start(c) || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

/// Namespaces in XML 1.0 §3 `NCName`: an XML name without colons.
pub fn is_ncname(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_name_start) && chars.all(is_name_char)
}

/// The written form of an empty level.
const EMPTY_LEVEL: &str = "_x0000_";

/// Parses `_xHHHH_` / `_xHHHHHHHH_` at the start of `s`: the character and the escape length.
fn escape_at(s: &str) -> Option<(char, usize)> {
    let hex = s.strip_prefix("_x")?;
    for digits in [4usize, 8] {
        let (Some(h), Some(b'_')) = (hex.get(..digits), hex.as_bytes().get(digits)) else { continue };
        let hex_digits = h.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some(c) = hex_digits.then(|| u32::from_str_radix(h, 16).ok().and_then(char::from_u32)).flatten() {
            return Some((c, digits + 3));
        }
    }
    None
}

/// Canonical level → NCName (see the module docs).
pub fn encode_level(level: &str) -> String {
    if level.is_empty() {
        return EMPTY_LEVEL.to_owned();
    }
    let mut out = String::with_capacity(level.len());
    for (i, c) in level.char_indices() {
        let allowed = if i == 0 { is_name_start(c) } else { is_name_char(c) };
        let literal_escape = c == '_' && level.get(i..).and_then(escape_at).is_some();
        if allowed && !literal_escape {
            out.push(c);
        } else if (c as u32) <= 0xFFFF {
            out.push_str(&format!("_x{:04X}_", c as u32));
        } else {
            out.push_str(&format!("_x{:08X}_", c as u32));
        }
    }
    out
}

/// NCName → canonical level, undoing [`encode_level`]. Escapes that would decode to `/`,
/// `+`, `#` or NUL are left as written.
pub fn decode_level(name: &str) -> String {
    if name == EMPTY_LEVEL {
        return String::new();
    }
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while let Some(rest) = name.get(i..).filter(|r| !r.is_empty()) {
        match escape_at(rest) {
            Some((c, len)) if !matches!(c, '/' | '+' | '#' | '\0') => {
                out.push(c);
                i += len;
            }
            _ => {
                let c = rest.chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn expr(dialect: Dialect, text: &str) -> TopicExpression {
        let scope = [
            NamespaceBinding { prefix: Some("tns".into()), namespace: "urn:n".into() },
            NamespaceBinding { prefix: Some("other".into()), namespace: "urn:o".into() },
            NamespaceBinding { prefix: Some("same".into()), namespace: "urn:n".into() },
            NamespaceBinding { prefix: None, namespace: "urn:default".into() },
        ];
        TopicExpression::new(dialect, text, &scope)
    }

    fn filters(dialect: Dialect, text: &str) -> Result<Vec<String>, TopicError> {
        expr(dialect, text).to_filters().map(|v| v.into_iter().map(|m| m.topic).collect())
    }

    #[test]
    fn supported_forms() {
        use Dialect::*;
        let cases: &[(Dialect, &str, &[&str])] = &[
            (Simple, "tns:a", &["a"]),
            (Simple, "tns:a/b", &["a/b"]),
            (Concrete, "tns:a/b/c", &["a/b/c"]),
            (Concrete, "tns:a/same:b", &["a/b"]),
            (Full, "tns:a", &["a"]),
            (Full, "tns:a/*", &["a/+"]),
            (Full, "tns:a/*/c", &["a/+/c"]),
            (Full, "tns:*", &["+"]),
            (Full, "tns:a//.", &["a/#"]),
            (Full, "tns:a//*", &["a/+/#"]),
            (Full, "tns:a/*//.", &["a/+/#"]),
            (Full, "tns:a | tns:b/*", &["a", "b/+"]),
            (Full, "tns:a/tns:*", &["a/+"]),
            (Concrete, "tns:sensors/_x0031_/temp", &["sensors/1/temp"]),
        ];
        for (dialect, text, want) in cases {
            assert_eq!(filters(dialect.clone(), text).unwrap(), *want, "{text}");
        }
    }

    #[test]
    fn namespace_is_kept_on_the_side() {
        let m = expr(Dialect::Concrete, "tns:a/b").to_topic().unwrap();
        assert_eq!(m, MappedTopic { topic: "a/b".into(), namespace: Some("urn:n".into()), prefix: Some("tns".into()) });
        let m = expr(Dialect::Simple, "plain").to_topic().unwrap();
        assert_eq!(m.namespace.as_deref(), Some("urn:default"));
        // zeep sends undeclared prefixes: same topic, unknown namespace.
        let m = expr(Dialect::Full, "tns1:RuleEngine//.").to_filters().unwrap();
        assert_eq!(m[0].topic, "RuleEngine/#");
        assert_eq!(m[0].namespace, None);
        assert_eq!(m[0].prefix.as_deref(), Some("tns1"));
    }

    #[test]
    fn refused_forms() {
        use Dialect::*;
        let unsupported = ["tns:a//b", "//tns:a", "tns:a//./b", "tns:a/.", "tns:a/other:b", "//.", "tns:a//*/b"];
        for text in unsupported {
            assert!(matches!(filters(Full, text), Err(TopicError::Unsupported { .. })), "{text}");
        }
        for (dialect, text) in [
            (Concrete, "tns:a/*"),
            (Simple, "tns:*"),
            (Concrete, "tns:a//."),
            (Concrete, "tns:a|tns:b"),
            (Full, ""),
            (Full, "tns:a/"),
            (Full, "tns:a///b"),
            (Full, "tns:1a"),
            (Full, "a:b:c"),
            (Full, "tns:a b"),
            (Full, "tns:a|"),
        ] {
            assert!(matches!(filters(dialect, text), Err(TopicError::Invalid { .. })), "{text}");
        }
        assert!(matches!(filters(Other("urn:x".into()), "tns:a"), Err(TopicError::UnknownDialect(_))));
        assert!(matches!(expr(Full, "tns:a/*").to_topic(), Err(TopicError::NotConcrete { .. })));
        assert!(matches!(expr(Full, "tns:a|tns:b").to_topic(), Err(TopicError::NotConcrete { .. })));
    }

    #[test]
    fn only_used_bindings_are_kept() {
        let e = expr(Dialect::Full, "other:x | tns:y/*");
        assert_eq!(e.namespaces.len(), 2);
        assert_eq!(e.resolve_prefix(Some("other")), Some("urn:o"));
        assert_eq!(expr(Dialect::Simple, "tns:a").namespaces.len(), 1);
    }

    #[test]
    fn reverse_mapping() {
        let e = TopicExpression::from_topic("sensors/1/temp", Some("urn:n")).unwrap();
        assert_eq!(e.text, "tns:sensors/_x0031_/temp");
        assert_eq!(e.dialect, Dialect::Concrete);
        assert_eq!(e.to_topic().unwrap().topic, "sensors/1/temp");
        let e = TopicExpression::from_topic("solo", None).unwrap();
        assert_eq!((e.text.as_str(), &e.dialect, e.namespaces.len()), ("solo", &Dialect::Simple, 0));
        assert!(TopicExpression::from_topic("a/+", None).is_err());
        for (filter, text) in
            [("a/+/c", "tns:a/*/c"), ("a/#", "tns:a//."), ("+", "tns:*"), ("+/#", "tns:*//."), ("a/+/#", "tns:a/*//.")]
        {
            let e = TopicExpression::from_filter(filter, Some("urn:n")).unwrap();
            assert_eq!(e.text, text);
            assert_eq!(e.to_filters().unwrap()[0].topic, filter);
        }
        for bad in ["#", "a/#/b", "a+/b", "a/b#"] {
            assert!(TopicExpression::from_filter(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn level_escapes() {
        for (level, name) in [
            ("", "_x0000_"),
            ("1", "_x0031_"),
            ("room 1", "room_x0020_1"),
            ("$SYS", "_x0024_SYS"),
            ("a:b", "a_x003A_b"),
            ("_x0031_", "_x005F_x0031_"),
            ("plain_name", "plain_name"),
            ("température", "température"),
            ("😀", "😀"),
            ("\u{F0000}", "_x000F0000_"),
        ] {
            assert_eq!(encode_level(level), name, "{level}");
            assert!(is_ncname(name), "{name}");
            assert_eq!(decode_level(name), level, "{name}");
        }
        assert_eq!(decode_level("a_x002F_b"), "a_x002F_b");
        assert_eq!(decode_level("a_x002B_"), "a_x002B_");
        assert_eq!(decode_level("_x41"), "_x41");
    }

    proptest! {
        #[test]
        fn level_encoding_round_trips(level in "[^/+#\u{0}]{0,12}") {
            let name = encode_level(&level);
            prop_assert!(is_ncname(&name));
            prop_assert_eq!(decode_level(&name), level);
        }

        #[test]
        fn topic_round_trips(levels in proptest::collection::vec("[^/+#\u{0}]{0,6}", 1..5)) {
            let topic = levels.join("/");
            let e = TopicExpression::from_topic(&topic, Some("urn:n")).unwrap();
            let back = e.to_topic().unwrap();
            prop_assert_eq!(back.topic, topic);
            prop_assert_eq!(back.namespace.as_deref(), Some("urn:n"));
        }

        #[test]
        fn filter_round_trips(levels in proptest::collection::vec(prop_oneof!["[a-z0-9 ]{0,4}", Just("+".to_string())], 1..5), hash in any::<bool>()) {
            let mut filter = levels.join("/");
            if hash { filter.push_str("/#"); }
            let e = TopicExpression::from_filter(&filter, None).unwrap();
            let back = e.to_filters().unwrap();
            prop_assert_eq!(back.len(), 1);
            prop_assert_eq!(&back[0].topic, &filter);
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,40}", dialect in 0..4u8) {
            let d = match dialect { 0 => Dialect::Simple, 1 => Dialect::Concrete, 2 => Dialect::Full, _ => Dialect::Other("x".into()) };
            let e = TopicExpression::new(d, &text, &[]);
            let _ = e.to_filters();
            let _ = e.to_topic();
        }
    }
}
