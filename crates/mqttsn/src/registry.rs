//! The gateway's topic-id registry: topic name ↔ normal topic id (MQTT-SN 1.2 §6.5, §6.10), and
//! its on-disk form.
//!
//! **Design: one global registry, ids never reused.** The spec lets each client have its own
//! ids, but a client keeps its ids across a gateway restart and may publish with one without
//! registering again (the most reported bug of existing gateways is refusing such a PUBLISH or,
//! worse, routing it to another topic). So an id must mean the same topic for every client and
//! forever: ids are allocated from one counter, stored in `mqttsn-topic-ids.json` in the data
//! directory, and never freed. A client may therefore publish with any id the registry holds,
//! whoever registered it. The cost is a bounded, append-only table (`max_topic_ids`).
//!
//! This module knows nothing of sessions or sockets; the endpoint hands new ids to the
//! persister (`persist`), which writes the file.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use foldhash::fast::RandomState;
use serde::{Deserialize, Serialize};
use tolk_core::topic;

/// File name of the registry inside the data directory.
pub const REGISTRY_FILE: &str = "mqttsn-topic-ids.json";

/// Most ids the registry can hold: 1..=65534 (0x0000 and 0xFFFF are reserved, §5.3.11).
pub const MAX_TOPIC_IDS: usize = 65_534;

/// Format version of the file, bumped if its shape ever changes.
const FORMAT_VERSION: u32 = 1;

/// The registry is at its configured size and the name is new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegistryFull;

/// Topic names and their gateway-assigned ids.
///
/// Public (through `translate`) because the translate functions take it, for the translation
/// benchmarks.
pub struct TopicRegistry {
    by_name: HashMap<Arc<str>, u16, RandomState>,
    by_id: HashMap<u16, Arc<str>, RandomState>,
    /// The next id to hand out: every id at or above it is unused, so the ids from a mark on
    /// are exactly those registered since the mark was read.
    next_id: u32,
    max: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    version: u32,
    topics: BTreeMap<u16, String>,
}

impl TopicRegistry {
    /// An empty registry holding at most `max` names. Public for the translation benchmarks.
    pub fn new(max: usize) -> Self {
        TopicRegistry {
            by_name: HashMap::default(),
            by_id: HashMap::default(),
            next_id: 1,
            max: max.min(MAX_TOPIC_IDS),
        }
    }

    /// Loads the registry from `path`, or starts empty when the file does not exist. A file that
    /// exists but cannot be read is an error: starting empty would hand out its ids again for
    /// other topics, and clients that kept them would publish to the wrong place.
    pub(crate) fn load(path: &Path, max: usize) -> io::Result<Self> {
        let mut registry = TopicRegistry::new(max);
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(registry),
            Err(e) => return Err(annotate(path, e)),
        };
        let invalid = |what: String| annotate(path, io::Error::new(io::ErrorKind::InvalidData, what));
        let file: RegistryFile = serde_json::from_slice(&text).map_err(|e| invalid(e.to_string()))?;
        if file.version != FORMAT_VERSION {
            return Err(invalid(format!("unknown format version {}", file.version)));
        }
        for (id, name) in file.topics {
            if id == 0 || id == u16::MAX {
                return Err(invalid(format!("reserved topic id {id}")));
            }
            if let Err(e) = topic::validate_name(&name) {
                return Err(invalid(format!("topic id {id}: {name:?}: {e}")));
            }
            let name: Arc<str> = name.into();
            if registry.by_name.insert(name.clone(), id).is_some() {
                return Err(invalid(format!("topic {name:?} appears twice")));
            }
            registry.by_id.insert(id, name);
            registry.next_id = registry.next_id.max(u32::from(id) + 1);
        }
        // Ids already handed out stay valid even if the limit was lowered since.
        Ok(registry)
    }

    /// The id of a registered name.
    pub(crate) fn id(&self, name: &str) -> Option<u16> {
        self.by_name.get(name).copied()
    }

    /// The name behind an id.
    pub(crate) fn name(&self, id: u16) -> Option<&Arc<str>> {
        self.by_id.get(&id)
    }

    /// The id of `name`, allocating the next free one if it is new. The caller has validated
    /// the name.
    pub(crate) fn get_or_insert(&mut self, name: &str) -> Result<u16, RegistryFull> {
        if let Some(id) = self.id(name) {
            return Ok(id);
        }
        if self.by_id.len() >= self.max || self.next_id > u32::from(u16::MAX - 1) {
            return Err(RegistryFull);
        }
        let id = self.next_id as u16;
        self.next_id += 1;
        let name: Arc<str> = name.into();
        self.by_name.insert(name.clone(), id);
        self.by_id.insert(id, name);
        Ok(id)
    }

    /// Number of registered names.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The mark to pass to [`TopicRegistry::added_since`] later.
    pub(crate) fn next_id(&self) -> u32 {
        self.next_id
    }

    /// The ids registered since `mark` was read from [`TopicRegistry::next_id`]: O(new ids).
    pub(crate) fn added_since(&self, mark: u32) -> Vec<(u16, Arc<str>)> {
        (mark..self.next_id)
            .filter_map(|id| u16::try_from(id).ok())
            .filter_map(|id| Some((id, self.by_id.get(&id)?.clone())))
            .collect()
    }

    /// Every registered id, for the persister's own copy.
    pub(crate) fn entries(&self) -> BTreeMap<u16, Arc<str>> {
        self.by_id.iter().map(|(&id, name)| (id, name.clone())).collect()
    }
}

/// The file contents for `topics`.
pub(crate) fn file_bytes(topics: &BTreeMap<u16, Arc<str>>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Borrowed<'a> {
        version: u32,
        topics: BTreeMap<u16, &'a str>,
    }
    let topics = topics.iter().map(|(&id, name)| (id, &**name)).collect();
    // Serialising a map of integers to strings cannot fail.
    serde_json::to_vec_pretty(&Borrowed { version: FORMAT_VERSION, topics }).unwrap_or_default()
}

fn annotate(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "MQTT-SN topic id registry {}: {e} (fix or remove the file; removing it forgets every id)",
            path.display()
        ),
    )
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, flushed to disk,
/// then renamed over the old one, so that a crash leaves either the old or the new registry.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp: PathBuf = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sequential_stable_and_bounded() {
        let mut registry = TopicRegistry::new(2);
        assert_eq!(registry.get_or_insert("a/b"), Ok(1));
        assert_eq!(registry.get_or_insert("c"), Ok(2));
        assert_eq!(registry.get_or_insert("a/b"), Ok(1));
        assert_eq!(registry.get_or_insert("d"), Err(RegistryFull));
        assert_eq!(registry.name(2).map(|n| &**n), Some("c"));
        assert_eq!(registry.next_id(), 3);
        let mut registry = TopicRegistry::new(10);
        registry.get_or_insert("a").unwrap();
        let mark = registry.next_id();
        assert_eq!(registry.added_since(mark), []);
        registry.get_or_insert("b").unwrap();
        registry.get_or_insert("a").unwrap();
        assert_eq!(registry.added_since(mark), [(2, Arc::from("b"))]);
    }

    #[test]
    fn snapshot_reloads_to_the_same_ids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REGISTRY_FILE);
        let mut registry = TopicRegistry::new(10);
        for name in ["x", "y/z", "w"] {
            registry.get_or_insert(name).unwrap();
        }
        write_atomically(&path, &file_bytes(&registry.entries())).unwrap();
        let mut loaded = TopicRegistry::load(&path, 10).unwrap();
        assert_eq!(loaded.len(), 3);
        assert_eq!(loaded.id("y/z"), Some(2));
        assert_eq!(loaded.get_or_insert("new"), Ok(4));
    }

    #[test]
    fn missing_file_is_empty_and_broken_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REGISTRY_FILE);
        assert_eq!(TopicRegistry::load(&path, 10).unwrap().len(), 0);
        for broken in [
            "not json",
            r#"{"version": 2, "topics": {}}"#,
            r#"{"version": 1, "topics": {"0": "a"}}"#,
            r#"{"version": 1, "topics": {"1": "a/#"}}"#,
            r#"{"version": 1, "topics": {"1": "a", "2": "a"}}"#,
        ] {
            std::fs::write(&path, broken).unwrap();
            let err = TopicRegistry::load(&path, 10).err().unwrap();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{broken}");
            assert!(err.to_string().contains(REGISTRY_FILE));
        }
    }
}
