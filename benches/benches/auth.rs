//! Cost of one login against a mosquitto_passwd file: the first (a PBKDF2-HMAC-SHA512 run of
//! mosquitto_passwd's 101 rounds, or the older $6$ digest) and a repeat served from the memory
//! of successes, which is what a reconnect storm costs. The file is the one written by Debian's
//! mosquitto_passwd for the tolk-auth tests.

use std::net::SocketAddr;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use tolk_auth::password_file::PasswordHash;
use tolk_auth::{AuthConfig, Users};
use tolk_core::Protocol;
use tolk_core::auth::{Authenticator, Credentials};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/auth/tests/fixtures/passwd")
}

fn login(c: &mut Criterion) {
    let hashes = tolk_auth::password_file::read(&fixture()).unwrap();
    let pbkdf2: &PasswordHash = &hashes["alice"];
    let sha512: &PasswordHash = &hashes["carol"];
    c.bench_function("auth_verify_pbkdf2_sha512_101", |b| b.iter(|| assert!(pbkdf2.verify(b"wonder land"))));
    c.bench_function("auth_verify_sha512", |b| b.iter(|| assert!(sha512.verify(b"c@rol"))));

    let users =
        Users::load(AuthConfig { password_file: Some(fixture()), allow_anonymous: None, acl_file: None }).unwrap();
    let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let credentials = Credentials {
        protocol: Protocol::Mqtt,
        username: Some("alice"),
        password: Some(b"wonder land"),
        client_id: Some("c"),
        peer,
        proven: false,
    };
    users.authenticate(&credentials).unwrap();
    c.bench_function("auth_login_remembered", |b| b.iter(|| users.authenticate(&credentials).unwrap()));
}

criterion_group!(benches, login);
criterion_main!(benches);
