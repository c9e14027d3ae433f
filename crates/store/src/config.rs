//! The `[storage]` section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// When a commit is synced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncPolicy {
    /// Before it is acknowledged, sharing one fsync with every commit waiting at that moment:
    /// what was acknowledged survives a power cut.
    Always,
    /// Every `sync_interval`; acknowledged at once. A power cut loses at most the last
    /// interval (a crash of the broker alone loses nothing: the OS has the writes).
    Batch,
    /// Never by the broker; the OS writes back when it likes (Linux: within about 30 s).
    Off,
}

/// Settings of the durable store (`data_dir/store`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// Keep state on disk. Off: nothing survives a restart.
    pub enabled: bool,
    /// When commits reach the disk.
    pub sync: SyncPolicy,
    /// With `sync = "batch"`, how often.
    #[serde(with = "humantime_serde")]
    pub sync_interval: Duration,
    /// Most bytes the store may take on disk; beyond it new records are refused (publishers
    /// get their protocol's refusal) while removals still pass.
    pub max_bytes: u64,
    /// Memory for the engine's block cache, in bytes.
    pub cache_bytes: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            enabled: true,
            sync: SyncPolicy::Always,
            sync_interval: Duration::from_millis(100),
            max_bytes: 1 << 30,
            cache_bytes: 4 << 20,
        }
    }
}
