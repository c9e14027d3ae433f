//! Cost of one login against a mosquitto_passwd file: the first (a PBKDF2-HMAC-SHA512 run of
//! mosquitto_passwd's 101 rounds, the older $6$ digest, or `tolk passwd --argon2id`) and a
//! repeat served from the memory of successes, which is what a reconnect storm costs. The file
//! is the one written by Debian's mosquitto_passwd for the tolk-auth tests. Then the cost of
//! the access-control checks a publish and a delivery make, against the interop ACL.

use std::net::SocketAddr;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use tolk_auth::password_file::PasswordHash;
use tolk_auth::{AuthConfig, Users};
use tolk_core::Protocol;
use tolk_core::access::Access;
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
    let argon2id = PasswordHash::new_argon2id(b"dora's pw").unwrap();
    c.bench_function("auth_verify_argon2id_7MiB_t5", |b| b.iter(|| assert!(argon2id.verify(b"dora's pw"))));

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

fn acl(c: &mut Criterion) {
    let acl = tolk_auth::acl::AclFile::read(&fixture().with_file_name("acl")).unwrap();
    let bob = tolk_auth::acl::Acl::new(acl).client(Some("bob"), Some("bob-1"));
    c.bench_function("acl_may_publish", |b| b.iter(|| assert!(bob.may_publish("sensors/bob/room1/temp"))));
    c.bench_function("acl_may_read_denied", |b| b.iter(|| assert!(!bob.may_read("sensors/secret/key"))));
    c.bench_function("acl_may_subscribe", |b| b.iter(|| assert!(bob.may_subscribe("sensors/+/temp"))));
}

criterion_group!(benches, login, acl);
criterion_main!(benches);
