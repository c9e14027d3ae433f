//! Users and their rights for every protocol. The `[auth]` section names a password file in
//! Mosquitto's `mosquitto_passwd` format (see [`password_file`]) and an access-control list in
//! its `acl_file` format (see [`acl`]). [`Users`] is the broker's [`Authenticator`]: every front
//! end asks it, so a client logs in with the same user name and password, and is held to the
//! same rules, whatever protocol it speaks.
//!
//! A hash is checked once per connection. Successes are remembered (a keyed SHA-256 of the
//! password, never the password), so that a reconnect storm on a Pi costs one digest per
//! client instead of a PBKDF2 run; a reload forgets them.

pub mod acl;
pub mod password_file;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use tolk_core::access::Rights;
use tolk_core::auth::{Authenticator, Credentials};

use acl::{Acl, AclFile};

use password_file::{PasswordHash, constant_time_eq};

/// Most remembered successes; the memory is dropped and filled afresh beyond it.
const CACHE_LIMIT: usize = 10_000;

/// The `[auth]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// A password file made by `mosquitto_passwd` (or `tolk passwd`).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Whether a client that presents no user name may connect. Default: no once a password
    /// file is set, yes without one (as Mosquitto).
    #[serde(default)]
    pub allow_anonymous: Option<bool>,
    /// An access-control list in Mosquitto's `acl_file` format (see [`acl`]). Without one, a
    /// client that may connect may do anything.
    #[serde(default)]
    pub acl_file: Option<PathBuf>,
}

impl AuthConfig {
    /// `allow_anonymous` with its default applied.
    pub fn anonymous_allowed(&self) -> bool {
        self.allow_anonymous.unwrap_or(self.password_file.is_none())
    }
}

/// The broker's users and their rights, reloadable.
pub struct Users {
    config: AuthConfig,
    acl: Option<Arc<Acl>>,
    hashes: RwLock<HashMap<String, PasswordHash>>,
    /// User name → keyed digest of the password that last logged in.
    remembered: Mutex<HashMap<String, [u8; 32]>>,
    key: [u8; 32],
}

impl Users {
    /// Reads the password file, if one is set.
    pub fn load(config: AuthConfig) -> Result<Users, String> {
        let hashes = match &config.password_file {
            Some(path) => password_file::read(path).map_err(|e| format!("[auth] password_file: {e}"))?,
            None => HashMap::new(),
        };
        let acl = match &config.acl_file {
            Some(path) => Some(Acl::new(read_acl(path)?)),
            None => None,
        };
        let mut key = [0u8; 32];
        SystemRandom::new().fill(&mut key).map_err(|_| "no system randomness for the password cache".to_owned())?;
        Ok(Users { config, acl, hashes: RwLock::new(hashes), remembered: Mutex::default(), key })
    }

    /// Reads the password file and the ACL again (SIGHUP); the new rules apply to connected
    /// clients from their next operation. A file with an error is not taken: what is in force
    /// stays, and the error says which file and line.
    pub fn reload(&self) -> Result<String, String> {
        let mut done = Vec::new();
        if let Some(path) = &self.config.password_file {
            let hashes = password_file::read(path).map_err(|e| format!("[auth] password_file: {e}"))?;
            done.push(format!("{} users", hashes.len()));
            *self.hashes.write().unwrap_or_else(|e| e.into_inner()) = hashes;
            self.remembered.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        if let (Some(acl), Some(path)) = (&self.acl, &self.config.acl_file) {
            acl.replace(read_acl(path)?);
            done.push("the ACL".to_owned());
        }
        Ok(done.join(" and "))
    }

    fn digest(&self, user: &str, password: &[u8]) -> [u8; 32] {
        let mut context = digest::Context::new(&digest::SHA256);
        context.update(&self.key);
        context.update(user.as_bytes());
        context.update(&[0]);
        context.update(password);
        let mut out = [0u8; 32];
        out.copy_from_slice(context.finish().as_ref());
        out
    }

    fn remembered(&self, user: &str, digest: &[u8; 32]) -> bool {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        remembered.get(user).is_some_and(|known| constant_time_eq(known, digest))
    }

    fn remember(&self, user: &str, digest: [u8; 32]) {
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        if remembered.len() >= CACHE_LIMIT {
            remembered.clear();
        }
        remembered.insert(user.to_owned(), digest);
    }
}

fn read_acl(path: &Path) -> Result<AclFile, String> {
    AclFile::read(path).map_err(|e| format!("[auth] acl_file {}: {e}", path.display()))
}

impl Authenticator for Users {
    fn verifies_users(&self) -> bool {
        self.config.password_file.is_some()
    }

    fn access(&self, username: Option<&str>, client_id: Option<&str>) -> Rights {
        let acl = self.acl.as_ref()?;
        Some(Arc::new(acl.client(username, client_id)))
    }

    fn authenticate(&self, credentials: &Credentials<'_>) -> Result<(), String> {
        let Some(user) = credentials.username else {
            return if self.config.anonymous_allowed() {
                Ok(())
            } else {
                Err("anonymous clients are not allowed: log in with a user name and password".into())
            };
        };
        if credentials.proven {
            // Named by a verified certificate or by configuration: nothing more to check.
            return Ok(());
        }
        if self.config.password_file.is_none() {
            // Users are not configured: a name is only a label.
            return if self.config.anonymous_allowed() { Ok(()) } else { Err("no users are configured".into()) };
        }
        // The same answer for an unknown user and a wrong password: names are not disclosed.
        let refused = || Err(format!("bad user name or password for {user:?}"));
        let password = credentials.password.unwrap_or_default();
        let digest = self.digest(user, password);
        if self.remembered(user, &digest) {
            return Ok(());
        }
        let verified = {
            let hashes = self.hashes.read().unwrap_or_else(|e| e.into_inner());
            hashes.get(user).is_some_and(|hash| hash.verify(password))
        };
        if !verified {
            return refused();
        }
        self.remember(user, digest);
        Ok(())
    }
}
