//! The workload of a durable broker queue, run against each candidate store in a temporary
//! directory under `$STORE_DIR` (default: the system temp dir, which must be a real disk):
//!
//! 1. `durable`: MESSAGES messages of PAYLOAD bytes are appended under sequence-number keys,
//!    committed durably (fsync) every BATCH messages, then acknowledged (deleted) in batches of
//!    the same size, also durably. Reported: messages per second for append + delete, bytes the
//!    process wrote (`/proc/self/io`, so what reached the kernel, per message) and the size
//!    left on disk.
//! 2. `recovery`: RECOVER messages are written (one sync at the end), the store is closed, and
//!    the time to open it again and read every message back is measured.
//!
//! Usage: cargo run --release -- [MESSAGES] [PAYLOAD] [RECOVER]; ENGINES="redb fjall sqlite"
//! picks engines (run one per process for a clean RSS figure).
//! Each configuration runs in a fresh directory; BATCH takes 1 (an fsync per message) and 64
//! (group commit).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn written_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

/// One engine, reduced to what a broker queue needs.
trait Store {
    /// Writes the messages durably in one commit.
    fn append(&mut self, batch: &[(u64, Vec<u8>)]);
    /// Removes the keys durably in one commit.
    fn remove(&mut self, keys: &[u64]);
    /// Writes without syncing (for loading the recovery test), then one sync.
    fn load(&mut self, batch: &[(u64, Vec<u8>)], sync: bool);
    /// Reads every message; returns how many.
    fn scan(&self) -> usize;
}

struct Redb(redb::Database);
const TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("messages");

impl Redb {
    fn open(path: &Path) -> Self {
        Redb(redb::Database::create(path.join("store.redb")).unwrap())
    }
    fn write(&mut self, durability: redb::Durability, f: impl FnOnce(&mut redb::Table<u64, &[u8]>)) {
        let mut tx = self.0.begin_write().unwrap();
        tx.set_durability(durability).unwrap();
        {
            let mut table = tx.open_table(TABLE).unwrap();
            f(&mut table);
        }
        tx.commit().unwrap();
    }
}

impl Store for Redb {
    fn append(&mut self, batch: &[(u64, Vec<u8>)]) {
        self.write(redb::Durability::Immediate, |t| {
            for (k, v) in batch {
                t.insert(k, v.as_slice()).unwrap();
            }
        });
    }
    fn remove(&mut self, keys: &[u64]) {
        self.write(redb::Durability::Immediate, |t| {
            for k in keys {
                t.remove(k).unwrap();
            }
        });
    }
    fn load(&mut self, batch: &[(u64, Vec<u8>)], sync: bool) {
        let durability = if sync { redb::Durability::Immediate } else { redb::Durability::None };
        self.write(durability, |t| {
            for (k, v) in batch {
                t.insert(k, v.as_slice()).unwrap();
            }
        });
    }
    fn scan(&self) -> usize {
        use redb::ReadableDatabase;
        let tx = self.0.begin_read().unwrap();
        let table = tx.open_table(TABLE).unwrap();
        redb::ReadableTable::iter(&table).unwrap().map(|r| r.unwrap().1.value().len()).filter(|&n| n > 0).count()
    }
}

struct Fjall {
    db: fjall::Database,
    messages: fjall::Keyspace,
}

impl Fjall {
    fn open(path: &Path) -> Self {
        let db = fjall::Database::builder(path.join("fjall")).open().unwrap();
        let messages = db.keyspace("messages", fjall::KeyspaceCreateOptions::default).unwrap();
        Fjall { db, messages }
    }
}

impl Store for Fjall {
    fn append(&mut self, batch: &[(u64, Vec<u8>)]) {
        let mut b = self.db.batch();
        for (k, v) in batch {
            b.insert(&self.messages, k.to_be_bytes(), v.as_slice());
        }
        b.commit().unwrap();
        self.db.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    fn remove(&mut self, keys: &[u64]) {
        let mut b = self.db.batch();
        for k in keys {
            b.remove(&self.messages, k.to_be_bytes());
        }
        b.commit().unwrap();
        self.db.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    fn load(&mut self, batch: &[(u64, Vec<u8>)], sync: bool) {
        let mut b = self.db.batch();
        for (k, v) in batch {
            b.insert(&self.messages, k.to_be_bytes(), v.as_slice());
        }
        b.commit().unwrap();
        if sync {
            self.db.persist(fjall::PersistMode::SyncAll).unwrap();
        }
    }
    fn scan(&self) -> usize {
        self.messages.iter().map(|kv| kv.into_inner().unwrap().1.len()).filter(|&n| n > 0).count()
    }
}

struct Sqlite(rusqlite::Connection);

impl Sqlite {
    fn open(path: &Path) -> Self {
        let c = rusqlite::Connection::open(path.join("store.sqlite")).unwrap();
        // WAL with synchronous=FULL: a commit is durable when it returns (SQLite's advice for
        // write-heavy use; the default rollback journal syncs more often).
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "synchronous", "FULL").unwrap();
        c.execute("CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)", []).unwrap();
        Sqlite(c)
    }
    fn write(&mut self, f: impl FnOnce(&rusqlite::Transaction)) {
        let tx = self.0.transaction().unwrap();
        f(&tx);
        tx.commit().unwrap();
    }
}

impl Store for Sqlite {
    fn append(&mut self, batch: &[(u64, Vec<u8>)]) {
        self.write(|tx| {
            let mut s = tx.prepare_cached("INSERT INTO messages (seq, body) VALUES (?1, ?2)").unwrap();
            for (k, v) in batch {
                s.execute(rusqlite::params![*k as i64, v]).unwrap();
            }
        });
    }
    fn remove(&mut self, keys: &[u64]) {
        self.write(|tx| {
            let mut s = tx.prepare_cached("DELETE FROM messages WHERE seq = ?1").unwrap();
            for k in keys {
                s.execute([*k as i64]).unwrap();
            }
        });
    }
    fn load(&mut self, batch: &[(u64, Vec<u8>)], sync: bool) {
        if !sync {
            self.0.pragma_update(None, "synchronous", "OFF").unwrap();
        }
        self.append(batch);
        self.0.pragma_update(None, "synchronous", "FULL").unwrap();
    }
    fn scan(&self) -> usize {
        let mut s = self.0.prepare("SELECT body FROM messages ORDER BY seq").unwrap();
        let rows = s.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
        rows.map(|r| r.unwrap().len()).filter(|&n| n > 0).count()
    }
}

fn open(engine: &str, path: &Path) -> Box<dyn Store> {
    match engine {
        "redb" => Box::new(Redb::open(path)),
        "fjall" => Box::new(Fjall::open(path)),
        _ => Box::new(Sqlite::open(path)),
    }
}

fn fresh_dir(base: &Path, name: &str) -> PathBuf {
    let dir = base.join(format!("store-candidates-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let messages = *args.first().unwrap_or(&20_000);
    let payload = *args.get(1).unwrap_or(&128) as usize;
    let recover = *args.get(2).unwrap_or(&1_000_000);
    let base = std::env::var_os("STORE_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let body = vec![0xA5u8; payload];
    println!("{messages} messages of {payload} B; recovery of {recover}; in {}", base.display());
    println!("| engine | batch | msgs/s (append + ack) | bytes written / msg | on disk after | recovery of {recover} | RSS of the open store |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let engines = std::env::var("ENGINES").unwrap_or_else(|_| "redb fjall sqlite".into());
    for engine in engines.split_whitespace() {
        for batch in [1u64, 64] {
            let dir = fresh_dir(&base, &format!("{engine}-{batch}"));
            let mut store = open(engine, &dir);
            let before = written_bytes();
            let start = Instant::now();
            let mut seq = 0;
            while seq < messages {
                let n = batch.min(messages - seq);
                let chunk: Vec<(u64, Vec<u8>)> = (seq..seq + n).map(|k| (k, body.clone())).collect();
                store.append(&chunk);
                let keys: Vec<u64> = chunk.iter().map(|(k, _)| *k).collect();
                store.remove(&keys);
                seq += n;
            }
            let elapsed = start.elapsed();
            let wrote = written_bytes() - before;
            drop(store);
            let on_disk = dir_size(&dir);
            let _ = std::fs::remove_dir_all(&dir);
            let recovery = if batch == 64 { measure_recovery(engine, &base, recover, &body) } else { None };
            println!(
                "| {engine} | {batch} | {:.0} | {:.0} | {:.1} MiB | {} | {} |",
                messages as f64 / elapsed.as_secs_f64(),
                wrote as f64 / messages as f64,
                on_disk as f64 / 1048576.0,
                recovery.map_or("".into(), |(d, _): (Duration, u64)| format!("{:.2} s", d.as_secs_f64())),
                recovery.map_or("".into(), |(_, rss): (Duration, u64)| format!("{:.1} MiB", rss as f64 / 1048576.0)),
            );
        }
    }
}

/// Time to open a store of `count` messages and read them all, and the RSS the open store
/// adds before reading (what a broker holding them idle pays).
fn measure_recovery(engine: &str, base: &Path, count: u64, body: &[u8]) -> Option<(Duration, u64)> {
    if count == 0 {
        return None;
    }
    let dir = fresh_dir(base, &format!("{engine}-recovery"));
    {
        let mut store = open(engine, &dir);
        let mut seq = 0;
        while seq < count {
            let n = 10_000.min(count - seq);
            let chunk: Vec<(u64, Vec<u8>)> = (seq..seq + n).map(|k| (k, body.to_vec())).collect();
            seq += n;
            store.load(&chunk, seq == count);
        }
    }
    let rss_before = rss_bytes();
    let start = Instant::now();
    let store = open(engine, &dir);
    let rss_open = rss_bytes().saturating_sub(rss_before);
    let found = store.scan();
    let elapsed = start.elapsed();
    assert_eq!(found as u64, count, "{engine} recovered {found} of {count}");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    Some((elapsed, rss_open))
}
