//! The key file: created 0600 when absent, reloaded to the same mapping, rejected clearly when
//! malformed.

use std::fs;

use sonde_anon::{Anonymizer, Key, KeyError, Mode};

#[test]
fn created_private_and_reloaded_to_the_same_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anon.key");
    let created = Key::load_or_create(&path).unwrap();
    assert!(created.created);
    assert_eq!(created.loose_mode, None);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // Hex and a newline; no temporary file left beside it.
    let content = fs::read_to_string(&path).unwrap();
    assert_eq!(content, format!("{}\n", created.key.to_hex()));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);

    let reloaded = Key::load_or_create(&path).unwrap();
    assert!(!reloaded.created);
    assert_eq!(reloaded.key, created.key);
    let mut first = Anonymizer::new(Mode::CryptoPan, &created.key);
    let mut second = Anonymizer::new(Mode::CryptoPan, &reloaded.key);
    for addr in ["192.0.2.1", "198.51.100.77", "2001:db8::1"] {
        let addr = addr.parse().unwrap();
        assert_eq!(first.ip(addr), second.ip(addr));
    }

    // Another fresh key file gets another key.
    let other = Key::load_or_create(&dir.path().join("other.key")).unwrap();
    assert_ne!(other.key, created.key);
}

#[test]
fn raw_binary_key_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raw.key");
    let bytes: [u8; 32] = std::array::from_fn(|i| (255 - i) as u8);
    fs::write(&path, bytes).unwrap();
    let loaded = Key::load_or_create(&path).unwrap();
    assert!(!loaded.created);
    assert_eq!(loaded.key.as_bytes(), &bytes);
}

#[cfg(unix)]
#[test]
fn readable_by_others_is_flagged_not_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loose.key");
    fs::write(&path, format!("{}\n", "0f".repeat(32))).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let loaded = Key::load(&path).unwrap();
    assert_eq!(loaded.loose_mode, Some(0o644));
    assert_eq!(loaded.key.as_bytes(), &[0x0f; 32]);
}

#[test]
fn malformed_key_file_gives_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.key");
    fs::write(&path, "not a key\n").unwrap();
    let err = Key::load_or_create(&path).unwrap_err();
    assert!(matches!(err, KeyError::Format { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with(&format!("key file {}: not a key: 10 bytes;", path.display())), "{message}");
    assert!(message.contains("32 raw bytes or 64 hex digits"), "{message}");
    // The malformed file is left as it was, never replaced by a new key.
    assert_eq!(fs::read_to_string(&path).unwrap(), "not a key\n");

    fs::write(&path, format!("{}zz\n", "ab".repeat(31))).unwrap();
    let message = Key::load(&path).unwrap_err().to_string();
    assert!(message.ends_with("not a key: byte 62 is not a hex digit"), "{message}");
}

#[test]
fn missing_directory_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/anon.key");
    let err = Key::load_or_create(&path).unwrap_err();
    assert!(matches!(err, KeyError::Io { action: "create", .. }), "{err:?}");
    assert!(err.to_string().contains("anon.key: create:"), "{err}");
}
