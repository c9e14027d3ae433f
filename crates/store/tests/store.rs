//! The store on a real directory: what is committed is there after a reopen, many commits
//! share syncs and all complete, a full store refuses additions but not removals, and a torn
//! last write is skipped.

use std::path::{Path, PathBuf};

use tolk_core::store::{Change, Space, Store, StoreError};
use tolk_store::{FjallStore, StorageConfig};

fn put(key: &str, value: &str) -> Change {
    Change::Put { space: Space::Retained, key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec() }
}

fn records(store: &FjallStore) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = store
        .load(Space::Retained)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap()))
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn commits_survive_a_reopen_and_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::default();
    {
        let store = FjallStore::open(dir.path(), &config).unwrap();
        let commits: Vec<_> = (0..200).map(|i| store.commit(vec![put(&format!("t/{i:03}"), "v")])).collect();
        for commit in commits {
            commit.await.unwrap();
        }
        store
            .commit(vec![Change::Delete { space: Space::Retained, key: b"t/000".to_vec() }, put("t/001", "w")])
            .await
            .unwrap();
        store.close();
        assert_eq!(store.commit(vec![put("late", "x")]).await, Err(StoreError::Closed));
    }
    let store = FjallStore::open(dir.path(), &config).unwrap();
    let all = records(&store);
    assert_eq!(all.len(), 199);
    assert_eq!(all[0], ("t/001".to_owned(), "w".to_owned()));
}

#[tokio::test]
async fn a_full_store_refuses_additions_and_takes_removals() {
    let dir = tempfile::tempdir().unwrap();
    let store = FjallStore::open(dir.path(), &StorageConfig::default()).unwrap();
    store.commit(vec![put("kept", "v")]).await.unwrap();
    store.close();
    drop(store);
    let tiny = StorageConfig { max_bytes: 1, ..StorageConfig::default() };
    let store = FjallStore::open(dir.path(), &tiny).unwrap();
    assert_eq!(store.commit(vec![put("more", "v")]).await, Err(StoreError::Full));
    store.commit(vec![Change::Delete { space: Space::Retained, key: b"kept".to_vec() }]).await.unwrap();
    assert!(records(&store).is_empty());
}

/// The files under `dir`, largest modification time last.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                found.push(entry.path());
            }
        }
    }
    found
}

#[tokio::test]
async fn a_torn_last_write_is_skipped_and_what_came_before_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::default();
    {
        let store = FjallStore::open(dir.path(), &config).unwrap();
        store.commit(vec![put("first", "kept")]).await.unwrap();
        store.commit(vec![put("second", &"x".repeat(4096))]).await.unwrap();
        store.close();
    }
    // The journal holds both records, the second last; cut it in the middle of the second, as
    // a power cut during its write would.
    let journal = files(dir.path())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "jnl"))
        .unwrap_or_else(|| panic!("no journal among {:?}", files(dir.path())));
    let len = std::fs::metadata(&journal).unwrap().len();
    let data = std::fs::read(&journal).unwrap();
    let end = data.iter().rposition(|&b| b == b'x').expect("the second record in the journal") as u64;
    assert!(end < len);
    std::fs::OpenOptions::new().write(true).open(&journal).unwrap().set_len(end - 100).unwrap();
    let store = FjallStore::open(dir.path(), &config).unwrap();
    assert_eq!(records(&store), vec![("first".to_owned(), "kept".to_owned())]);
    store.commit(vec![put("third", "after")]).await.unwrap();
    assert_eq!(records(&store).len(), 2);
}
