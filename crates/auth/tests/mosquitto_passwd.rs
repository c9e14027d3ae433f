//! A password file written by Debian's `mosquitto_passwd` 2.0.11, used as it is
//! (`tests/fixtures/passwd`: alice and bob with the default `$7$` PBKDF2-SHA512, carol with
//! `-H sha512`, the older `$6$`).

use std::net::SocketAddr;
use std::path::PathBuf;

use tolk_auth::{AuthConfig, Users};
use tolk_core::Protocol;
use tolk_core::auth::{Authenticator, Credentials};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/passwd")
}

fn login(users: &Users, user: Option<&str>, password: Option<&str>) -> Result<(), String> {
    let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let credentials = Credentials {
        protocol: Protocol::Mqtt,
        username: user,
        password: password.map(str::as_bytes),
        client_id: Some("c"),
        peer,
        proven: false,
    };
    users.authenticate(&credentials)
}

#[test]
fn mosquitto_passwd_hashes_check_out() {
    let users =
        Users::load(AuthConfig { password_file: Some(fixture()), allow_anonymous: None, acl_file: None }).unwrap();
    assert_eq!(login(&users, Some("alice"), Some("wonder land")), Ok(()));
    assert_eq!(login(&users, Some("bob"), Some("b0b!")), Ok(()));
    assert_eq!(login(&users, Some("carol"), Some("c@rol")), Ok(()), "the older $6$ format");
    // Twice: the second time from the remembered success, and it must still check the password.
    assert_eq!(login(&users, Some("alice"), Some("wonder land")), Ok(()));
    assert!(login(&users, Some("alice"), Some("wonderland")).is_err());
    assert!(login(&users, Some("alice"), None).is_err());
    assert!(login(&users, Some("mallory"), Some("wonder land")).is_err());
    // A password file makes anonymous clients unwelcome unless allowed.
    assert!(login(&users, None, None).is_err());
    let open = Users::load(AuthConfig { password_file: Some(fixture()), allow_anonymous: Some(true), acl_file: None })
        .unwrap();
    assert_eq!(login(&open, None, None), Ok(()));
    assert!(login(&open, Some("alice"), Some("nope")).is_err(), "a wrong password stays wrong");
}

#[test]
fn a_reload_takes_new_passwords_and_keeps_the_old_users_on_error() {
    let dir = std::env::temp_dir().join(format!("tolk-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("passwd");
    std::fs::copy(fixture(), &path).unwrap();
    let users =
        Users::load(AuthConfig { password_file: Some(path.clone()), allow_anonymous: None, acl_file: None }).unwrap();
    assert_eq!(login(&users, Some("alice"), Some("wonder land")), Ok(()));

    // Only carol left: alice's remembered login must not outlive the reload.
    let carol =
        std::fs::read_to_string(fixture()).unwrap().lines().find(|l| l.starts_with("carol:")).unwrap().to_owned();
    std::fs::write(&path, format!("{carol}\n")).unwrap();
    assert_eq!(users.reload(), Ok("1 users".to_owned()));
    assert!(login(&users, Some("alice"), Some("wonder land")).is_err());
    assert_eq!(login(&users, Some("carol"), Some("c@rol")), Ok(()));

    std::fs::write(&path, "carol\n").unwrap();
    assert!(users.reload().unwrap_err().contains("line 1"));
    assert_eq!(login(&users, Some("carol"), Some("c@rol")), Ok(()), "the users in force stay");
    std::fs::remove_dir_all(&dir).unwrap();
}
