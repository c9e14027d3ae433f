//! The access-control list: Mosquitto's `acl_file` format, plus two lines for named queues and
//! AMQP exchanges.
//!
//! ```text
//! # Before any `user` line: rules for anonymous clients.
//! topic read public/#
//!
//! user alice
//! topic readwrite sensors/#
//! topic deny sensors/secret/#
//! queue readwrite orders.*
//!
//! # For every client; %u is its user name, %c its client id.
//! pattern write devices/%c/#
//! ```
//!
//! - `topic [read|write|readwrite|deny] FILTER` (no access word: readwrite) applies to the
//!   clients of the section it is in: anonymous ones before the first `user NAME` line, then
//!   that user's.
//! - `pattern [read|write|readwrite|deny] FILTER` applies to every client, wherever it stands,
//!   with `%u` and `%c` replaced. A client whose name or id holds `/`, `+` or `#` gets no rights
//!   from a pattern that names it, so that it cannot widen the pattern.
//! - tolk's extension: `queue ACCESS GLOB` and `exchange ACCESS GLOB`, where ACCESS is also
//!   `configure` or `all` (read, write and configure) and `*` in GLOB stands for any characters.
//!   They sit in sections like `topic` lines.
//!
//! A `deny` rule wins over every grant. Once a file is set, whatever no rule grants is refused:
//! topics, queues and exchanges alike.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tolk_core::access::{Access, Resource, Right};
use tolk_core::topic;

const READ: u8 = 1;
const WRITE: u8 = 2;
const CONFIGURE: u8 = 4;
const DENY: u8 = 0;

/// One rule on the topic space or on named resources.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// READ | WRITE | CONFIGURE bits; DENY (0) refuses.
    access: u8,
    /// A topic filter (`topic`, `pattern`) or a name glob (`queue`, `exchange`).
    target: String,
}

/// The rules of one section (anonymous clients, or one user).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Section {
    topics: Vec<Rule>,
    queues: Vec<Rule>,
    exchanges: Vec<Rule>,
}

/// A parsed ACL file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclFile {
    anonymous: Section,
    users: HashMap<String, Section>,
    patterns: Vec<Rule>,
}

/// Why an ACL file was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AclError {
    /// The file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A line is not one of the forms above.
    #[error("line {line}: {why}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

fn access_word(word: &str, extended: bool) -> Option<u8> {
    Some(match word {
        "read" => READ,
        "write" => WRITE,
        "readwrite" => READ | WRITE,
        "deny" => DENY,
        "configure" if extended => CONFIGURE,
        "all" if extended => READ | WRITE | CONFIGURE,
        _ => return None,
    })
}

impl AclFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<AclFile, AclError> {
        AclFile::parse(&std::fs::read_to_string(path)?)
    }

    /// Parses the text of an ACL file.
    pub fn parse(text: &str) -> Result<AclFile, AclError> {
        let mut file = AclFile::default();
        let mut user: Option<String> = None;
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| AclError::Line { line: index + 1, why: why.to_owned() };
            let (keyword, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            if keyword == "user" {
                if rest.is_empty() {
                    return Err(bad("`user` needs a name"));
                }
                file.users.entry(rest.to_owned()).or_default();
                user = Some(rest.to_owned());
                continue;
            }
            let extended = matches!(keyword, "queue" | "exchange");
            if !extended && !matches!(keyword, "topic" | "pattern") {
                return Err(bad(&format!(
                    "unknown keyword {keyword:?} (expected user, topic, pattern, queue or exchange)"
                )));
            }
            // Like Mosquitto: the access word is optional for topics, and the rest of the line
            // (spaces included) is the filter.
            let (first, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let (access, target) = match access_word(first, extended) {
                Some(access) if !after.trim().is_empty() => (access, after.trim()),
                _ if extended => {
                    return Err(bad("expected `queue|exchange read|write|readwrite|configure|all|deny NAME`"));
                }
                _ => (READ | WRITE, rest),
            };
            if target.is_empty() {
                return Err(bad("missing topic"));
            }
            if !extended {
                let checked =
                    if keyword == "pattern" { target.replace("%u", "u").replace("%c", "c") } else { target.to_owned() };
                topic::validate_filter(&checked).map_err(|e| bad(&format!("invalid topic filter {target:?}: {e}")))?;
            }
            let rule = Rule { access, target: target.to_owned() };
            if keyword == "pattern" {
                file.patterns.push(rule);
                continue;
            }
            let section = match &user {
                Some(name) => file.users.entry(name.clone()).or_default(),
                None => &mut file.anonymous,
            };
            match keyword {
                "topic" => section.topics.push(rule),
                "queue" => section.queues.push(rule),
                _ => section.exchanges.push(rule),
            }
        }
        Ok(file)
    }

    /// The rules one client is held to.
    fn compile(&self, username: Option<&str>, client_id: Option<&str>) -> Section {
        let mut rules = match username {
            Some(name) => self.users.get(name).cloned().unwrap_or_default(),
            None => self.anonymous.clone(),
        };
        for pattern in &self.patterns {
            let mut target = pattern.target.clone();
            for (marker, value) in [("%u", username), ("%c", client_id)] {
                if target.contains(marker) {
                    // A grant naming what this client lacks (or could abuse) gives it nothing;
                    // a deny then covers every name, so that it can only refuse more.
                    match (value.filter(|v| safe_in_pattern(v)), pattern.access) {
                        (Some(value), _) => target = target.replace(marker, value),
                        (None, DENY) => target = target.replace(marker, "+"),
                        (None, _) => target.clear(),
                    }
                }
            }
            if !target.is_empty() && topic::validate_filter(&target).is_ok() {
                rules.topics.push(Rule { access: pattern.access, target });
            }
        }
        rules
    }
}

/// A name that can stand for `%u` or `%c` without widening the filter it is put into.
fn safe_in_pattern(value: &str) -> bool {
    !value.is_empty() && !value.contains(['/', '+', '#'])
}

impl Section {
    fn topic_denied(&self, topic: &str) -> bool {
        self.topics.iter().any(|r| r.access == DENY && topic::matches(&r.target, topic))
    }

    fn topic_granted(&self, bit: u8, topic: &str) -> bool {
        !self.topic_denied(topic) && self.topics.iter().any(|r| r.access & bit != 0 && topic::matches(&r.target, topic))
    }

    fn filter_granted(&self, filter: &str) -> bool {
        let denied = self.topics.iter().any(|r| r.access == DENY && topic::covers(&r.target, filter));
        !denied && self.topics.iter().any(|r| r.access & READ != 0 && topic::covers(&r.target, filter))
    }
}

fn resource_granted(rules: &[Rule], bit: u8, name: &str) -> bool {
    let matching = || rules.iter().filter(|r| glob_matches(&r.target, name));
    !matching().any(|r| r.access == DENY) && matching().any(|r| r.access & bit != 0)
}

/// `*` matches any run of characters, everything else itself. Iterative, with one point of
/// back-tracking, so that a hostile name costs at most |pattern| × |name| steps.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The ACL in force, reloadable. Each client's [`ClientAccess`] notices a reload by its
/// generation and recompiles its rules on its next check.
#[derive(Debug)]
pub struct Acl {
    file: RwLock<Arc<AclFile>>,
    generation: AtomicU64,
}

impl Acl {
    /// An ACL with the given rules.
    pub fn new(file: AclFile) -> Arc<Acl> {
        Arc::new(Acl { file: RwLock::new(Arc::new(file)), generation: AtomicU64::new(0) })
    }

    /// Puts new rules in force for new and connected clients alike.
    pub fn replace(&self, file: AclFile) {
        *self.file.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(file);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The rights of one client.
    pub fn client(self: &Arc<Self>, username: Option<&str>, client_id: Option<&str>) -> ClientAccess {
        let generation = self.generation.load(Ordering::Acquire);
        let rules = self.file.read().unwrap_or_else(|e| e.into_inner()).compile(username, client_id);
        ClientAccess {
            acl: self.clone(),
            username: username.map(str::to_owned),
            client_id: client_id.map(str::to_owned),
            compiled: RwLock::new((generation, Arc::new(rules))),
        }
    }
}

/// One client's compiled rules.
#[derive(Debug)]
pub struct ClientAccess {
    acl: Arc<Acl>,
    username: Option<String>,
    client_id: Option<String>,
    compiled: RwLock<(u64, Arc<Section>)>,
}

impl ClientAccess {
    fn rules(&self) -> Arc<Section> {
        let current = self.acl.generation.load(Ordering::Acquire);
        {
            let compiled = self.compiled.read().unwrap_or_else(|e| e.into_inner());
            if compiled.0 == current {
                return compiled.1.clone();
            }
        }
        let file = self.acl.file.read().unwrap_or_else(|e| e.into_inner()).clone();
        let rules = Arc::new(file.compile(self.username.as_deref(), self.client_id.as_deref()));
        *self.compiled.write().unwrap_or_else(|e| e.into_inner()) = (current, rules.clone());
        rules
    }
}

impl Access for ClientAccess {
    fn may_publish(&self, topic: &str) -> bool {
        self.rules().topic_granted(WRITE, topic)
    }

    fn may_subscribe(&self, filter: &str) -> bool {
        self.rules().filter_granted(filter)
    }

    fn may_read(&self, topic: &str) -> bool {
        self.rules().topic_granted(READ, topic)
    }

    fn may_use(&self, resource: Resource<'_>, right: Right) -> bool {
        let bit = match right {
            Right::Read => READ,
            Right::Write => WRITE,
            Right::Configure => CONFIGURE,
        };
        let rules = self.rules();
        match resource {
            Resource::Queue(name) => resource_granted(&rules.queues, bit, name),
            Resource::Exchange(name) => resource_granted(&rules.exchanges, bit, name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# anonymous
topic read public/#

user alice
topic readwrite sensors/#
topic deny sensors/secret/#
topic write cmd/alice
queue readwrite orders.*
queue deny orders.audit
exchange all alice.*

user bob
topic sensors/+/temp

pattern readwrite devices/%c/#
pattern read users/%u/inbox
";

    fn client(user: Option<&str>, id: &str) -> ClientAccess {
        Acl::new(AclFile::parse(FILE).unwrap()).client(user, Some(id))
    }

    #[test]
    fn topic_rules_follow_mosquitto() {
        let alice = client(Some("alice"), "a1");
        assert!(alice.may_publish("sensors/x/temp"));
        assert!(alice.may_publish("cmd/alice"));
        assert!(!alice.may_read("cmd/alice"));
        assert!(!alice.may_publish("sensors/secret/key"));
        assert!(!alice.may_read("sensors/secret/key"));
        assert!(!alice.may_read("public/news"), "the anonymous section is not alice's");
        // Subscriptions: only inside a read rule; a deny inside it is filtered per message.
        assert!(alice.may_subscribe("sensors/#"));
        assert!(!alice.may_subscribe("sensors/secret/#"));
        assert!(!alice.may_subscribe("#"));
        // No access word means readwrite.
        let bob = client(Some("bob"), "b1");
        assert!(bob.may_publish("sensors/k/temp") && bob.may_read("sensors/k/temp"));
        assert!(!bob.may_subscribe("sensors/#"));
        assert!(bob.may_subscribe("sensors/+/temp"));
        let anonymous = client(None, "x");
        assert!(anonymous.may_subscribe("public/#") && !anonymous.may_publish("public/a"));
        let stranger = client(Some("mallory"), "m");
        assert!(!stranger.may_read("public/news"));
    }

    #[test]
    fn patterns_substitute_and_refuse_wildcards_in_names() {
        let alice = client(Some("alice"), "a1");
        assert!(alice.may_publish("devices/a1/state"));
        assert!(!alice.may_publish("devices/a2/state"));
        assert!(alice.may_subscribe("users/alice/inbox"));
        assert!(!alice.may_read("users/bob/inbox"));
        // A client id with a wildcard would widen the pattern: it gets nothing from it.
        let sneaky = client(Some("alice"), "#");
        assert!(!sneaky.may_publish("devices/a1/state"));
        let anonymous = client(None, "dev7");
        assert!(anonymous.may_publish("devices/dev7/x"));
        assert!(!anonymous.may_read("users//inbox"));
    }

    #[test]
    fn queues_and_exchanges_need_their_own_lines() {
        let alice = client(Some("alice"), "a1");
        assert!(alice.may_use(Resource::Queue("orders.eu"), Right::Read));
        assert!(alice.may_use(Resource::Queue("orders.eu"), Right::Write));
        assert!(!alice.may_use(Resource::Queue("orders.eu"), Right::Configure));
        assert!(!alice.may_use(Resource::Queue("orders.audit"), Right::Read));
        assert!(!alice.may_use(Resource::Queue("jobs"), Right::Read));
        assert!(alice.may_use(Resource::Exchange("alice.events"), Right::Configure));
        assert!(!client(Some("bob"), "b").may_use(Resource::Queue("orders.eu"), Right::Read));
    }

    #[test]
    fn a_replaced_file_applies_to_clients_already_connected() {
        let acl = Acl::new(AclFile::parse(FILE).unwrap());
        let alice = acl.client(Some("alice"), Some("a1"));
        assert!(alice.may_publish("sensors/a"));
        acl.replace(AclFile::parse("user alice\ntopic read sensors/#\n").unwrap());
        assert!(!alice.may_publish("sensors/a"));
        assert!(alice.may_read("sensors/a"));
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, line) in [
            ("topic read a/#\nfoo bar\n", 2),
            ("user\n", 1),
            ("topic read a/#/b\n", 1),
            ("queue orders\n", 1),
            ("\n\nqueue frobnicate x\n", 3),
        ] {
            match AclFile::parse(text) {
                Err(AclError::Line { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn globs_match_without_backtracking_blowups() {
        assert!(glob_matches("orders.*", "orders.eu"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*b*c", "a-b-x-c"));
        assert!(!glob_matches("a*b*c", "a-b-x-d"));
        assert!(glob_matches("$share/g/*", "$share/g/a/#"));
        let hostile = "*a".repeat(50) + "b";
        assert!(!glob_matches(&hostile, &"a".repeat(10_000)));
    }
}
