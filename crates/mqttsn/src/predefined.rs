//! Pre-defined topic ids (MQTT-SN 1.2 §3, §6.6): ids both sides know in advance, from the
//! configuration, globally and per client id. A separate namespace from registered (normal) ids:
//! the TopicIdType flag says which one a PUBLISH uses.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use foldhash::fast::RandomState;

use crate::config::MqttSnConfig;

/// One client's view of the pre-defined ids: the global table overlaid with its own.
///
/// Public (through `translate`) because the translate functions take it, for the translation
/// benchmarks (which use the empty table).
#[derive(Debug, Default)]
pub struct PredefinedTopics {
    by_id: HashMap<u16, Arc<str>, RandomState>,
    by_name: HashMap<Arc<str>, u16, RandomState>,
}

impl PredefinedTopics {
    fn build<'a>(tables: impl IntoIterator<Item = &'a BTreeMap<u16, String>>) -> Self {
        let mut topics = PredefinedTopics::default();
        for table in tables {
            for (&id, name) in table {
                topics.by_id.insert(id, name.as_str().into());
            }
        }
        // The reverse map picks the lowest id when two ids name the same topic.
        let mut pairs: Vec<_> = topics.by_id.iter().map(|(&id, name)| (id, name.clone())).collect();
        pairs.sort_unstable_by_key(|(id, _)| std::cmp::Reverse(*id));
        topics.by_name = pairs.into_iter().map(|(id, name)| (name, id)).collect();
        topics
    }

    /// The topic behind a pre-defined id.
    pub(crate) fn name(&self, id: u16) -> Option<&Arc<str>> {
        self.by_id.get(&id)
    }

    /// The pre-defined id of a topic, if it has one.
    pub(crate) fn id(&self, name: &str) -> Option<u16> {
        self.by_name.get(name).copied()
    }
}

/// The global table and each configured client's merged table, built once at start.
pub(crate) struct PredefinedCatalog {
    global: Arc<PredefinedTopics>,
    per_client: HashMap<String, Arc<PredefinedTopics>, RandomState>,
}

impl PredefinedCatalog {
    /// Builds every table from a validated configuration.
    pub(crate) fn new(config: &MqttSnConfig) -> Self {
        let per_client = config
            .clients
            .iter()
            .map(|(client_id, client)| {
                (client_id.clone(), Arc::new(PredefinedTopics::build([&config.predefined, &client.predefined])))
            })
            .collect();
        PredefinedCatalog { global: Arc::new(PredefinedTopics::build([&config.predefined])), per_client }
    }

    /// The table for clients without a connection (QoS −1) or without their own table.
    pub(crate) fn global(&self) -> &Arc<PredefinedTopics> {
        &self.global
    }

    /// The table of one client id.
    pub(crate) fn for_client(&self, client_id: &str) -> Arc<PredefinedTopics> {
        self.per_client.get(client_id).unwrap_or(&self.global).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    #[test]
    fn client_tables_overlay_the_global_one() {
        let config = MqttSnConfig {
            predefined: BTreeMap::from([(1, "g/one".into()), (2, "g/two".into())]),
            clients: BTreeMap::from([(
                "c".into(),
                ClientConfig { predefined: BTreeMap::from([(2, "c/two".into())]), user: None },
            )]),
            ..MqttSnConfig::default()
        };
        let catalog = PredefinedCatalog::new(&config);
        let c = catalog.for_client("c");
        assert_eq!(c.name(1).map(|n| &**n), Some("g/one"));
        assert_eq!(c.name(2).map(|n| &**n), Some("c/two"));
        assert_eq!(c.id("g/two"), None);
        assert_eq!(catalog.for_client("other").name(2).map(|n| &**n), Some("g/two"));
        assert_eq!(catalog.global().id("g/one"), Some(1));
    }
}
