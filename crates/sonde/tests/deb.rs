//! The Debian package (packaging/deb.sh, `make deb`), built from this test's binary and
//! installed on the machine with `dpkg -i`: `sonde --version` runs from /usr/bin, the unit
//! `sonde@.service` passes `systemd-analyze verify` without a word, the service user exists,
//! the completions and manual pages are where bash, zsh, fish and man look. Removed (purged)
//! at the end. Needs root, dpkg-shlibdeps and systemd-analyze; an installed sonde package is
//! left alone (SKIPPED).

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

fn ok(cmd: &str, args: &[&str]) -> String {
    let o = run(cmd, args);
    assert!(o.status.success(), "{cmd} {args:?}: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Purges the package when the test ends, however it ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", "sonde"]);
    }
}

#[test]
fn the_package_installs_and_its_unit_verifies() {
    let root = run("id", &["-u"]).stdout == b"0\n";
    let tools = ["dpkg-deb", "dpkg-shlibdeps", "systemd-analyze"].iter().all(|t| run("which", &[t]).status.success());
    if !root || !tools {
        eprintln!("SKIPPED: needs root, dpkg-dev and systemd (root {root}, tools {tools})");
        return;
    }
    if run("dpkg-query", &["-W", "-f=${Status}", "sonde"]).stdout.ends_with(b" installed") {
        eprintln!("SKIPPED: a sonde package is installed on this machine; not replacing it");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/deb.sh");
    let deb = ok(script.to_str().unwrap(), &[env!("CARGO_BIN_EXE_sonde"), out.path().to_str().unwrap()]);
    let deb = deb.trim();
    let info = ok("dpkg-deb", &["--info", deb]);
    assert!(info.contains("Package: sonde") && info.contains("libpcap0.8"), "{info}");

    let _installed = Installed;
    ok("dpkg", &["-i", deb]);
    let want = ok(env!("CARGO_BIN_EXE_sonde"), &["--version"]);
    assert_eq!(ok("/usr/bin/sonde", &["--version"]), want);
    ok("id", &["sonde"]);
    let verify = run("systemd-analyze", &["verify", "/lib/systemd/system/sonde@.service"]);
    assert!(
        verify.status.success() && verify.stderr.is_empty() && verify.stdout.is_empty(),
        "systemd-analyze verify: {}\n{}{}",
        verify.status,
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let unit = std::fs::read_to_string("/lib/systemd/system/sonde@.service").unwrap();
    for line in [
        "ExecStart=/usr/bin/sonde monitor --config /etc/sonde/%i.toml",
        "User=sonde",
        "AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN",
        "CapabilityBoundingSet=CAP_NET_RAW CAP_NET_ADMIN",
    ] {
        assert!(unit.contains(line), "the unit lacks {line:?}");
    }
    // The example configuration is one `monitor` reads.
    ok("/usr/bin/sonde", &["monitor", "--config", "/etc/sonde/example.toml", "--print-config"]);
    for file in [
        "/usr/share/bash-completion/completions/sonde",
        "/usr/share/zsh/vendor-completions/_sonde",
        "/usr/share/fish/vendor_completions.d/sonde.fish",
        "/usr/share/man/man1/sonde.1.gz",
        "/usr/share/man/man1/sonde-monitor.1.gz",
    ] {
        assert!(Path::new(file).is_file(), "{file} not installed");
    }
    if run("which", &["man"]).status.success() {
        assert_eq!(ok("man", &["-w", "sonde-monitor"]).trim(), "/usr/share/man/man1/sonde-monitor.1.gz");
    }
}
