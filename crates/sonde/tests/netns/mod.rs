//! The live tests' harness (`monitor.rs`, `live_faults.rs`): a network namespace with veth
//! pairs, tcpreplay sending into it, and a `sonde monitor` capturing in it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A network namespace (its loopback up, and the veth pair `va`, where sonde captures, ↔ `vb`,
/// where tcpreplay sends), deleted with its interfaces when dropped, whatever happened.
pub struct Netns {
    name: String,
}

impl Netns {
    /// `None` (SKIPPED printed) when this machine cannot run the test: not root, or `ip` or
    /// one of `tools` missing (make deps installs iproute2 and tcpreplay).
    pub fn new(tools: &[&str]) -> Option<Netns> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: not root (network namespaces and raw sockets need it)");
            return None;
        }
        for tool in tools.iter().chain(&["ip"]) {
            let found = Command::new(tool).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
            if !found {
                eprintln!("SKIPPED: {tool} is missing (make deps installs iproute2 and tcpreplay)");
                return None;
            }
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("sonde-t{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        if !run_ok(Command::new("ip").args(["netns", "add", &name])) {
            eprintln!("SKIPPED: cannot create a network namespace");
            return None;
        }
        let ns = Netns { name };
        // Jumbo MTU: a trace's frames may be longer than 1,500 bytes. IPv6 off, so the
        // interfaces send nothing of their own (router solicitations, DAD) into the capture.
        let sysctl = ns.exec(Path::new("sysctl")).args(["-qw", "net.ipv6.conf.default.disable_ipv6=1"]).status();
        assert!(sysctl.is_ok_and(|s| s.success()), "sysctl in {}", ns.name);
        for args in [
            "link set lo up",
            "link add va type veth peer name vb",
            "link set va mtu 9000",
            "link set vb mtu 9000",
            "link set va up",
            "link set vb up",
        ] {
            ns.ip(args);
        }
        Some(ns)
    }

    /// The namespace's name (for `ip netns exec`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME args…`, which must succeed.
    pub fn ip(&self, args: &str) {
        assert!(run_ok(Command::new("ip").args(["-n", &self.name]).args(args.split(' '))), "ip {args}");
    }

    /// `program` run in the namespace.
    pub fn exec(&self, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// A second pair, `vc` ↔ `vd`.
    pub fn add_pair(&self) {
        for args in ["link add vc type veth peer name vd", "link set vc up", "link set vd up"] {
            self.ip(args);
        }
    }

    /// Replays `trace` on `vb` at `pps` packets per second, or as fast as it can (0).
    pub fn replay(&self, trace: &Path, pps: u32) {
        self.replay_on("vb", trace, pps);
    }

    /// Replays `trace` on `interface` at `pps` packets per second, or as fast as it can (0).
    pub fn replay_on(&self, interface: &str, trace: &Path, pps: u32) {
        let out = self.tcpreplay(interface, trace, pps).output().expect("run tcpreplay");
        assert!(out.status.success(), "tcpreplay: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Replays `trace` on `vb` at `pps`, in the background.
    pub fn spawn_replay(&self, trace: &Path, pps: u32) -> Child {
        let mut cmd = self.tcpreplay("vb", trace, pps);
        cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("run tcpreplay")
    }

    fn tcpreplay(&self, interface: &str, trace: &Path, pps: u32) -> Command {
        let rate = if pps == 0 { vec!["--topspeed".to_string()] } else { vec!["--pps".to_string(), pps.to_string()] };
        let mut cmd = self.exec(Path::new("tcpreplay"));
        cmd.args(["-q", "-i", interface]).args(rate).arg(trace);
        cmd
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

pub fn run_ok(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// A running `sonde monitor`; killed if the test ends without stopping it.
pub struct Monitor {
    child: Option<Child>,
}

impl Monitor {
    /// Starts it on `va` and waits until it captures (`extra` must not hold -q: the wait is for
    /// the line saying so).
    pub fn start(ns: &Netns, out: &Path, extra: &[&str]) -> Monitor {
        Monitor::start_on(ns, "va", out, extra)
    }

    /// The same on `interface`.
    pub fn start_on(ns: &Netns, interface: &str, out: &Path, extra: &[&str]) -> Monitor {
        let mut child = ns
            .exec(Path::new(env!("CARGO_BIN_EXE_sonde")))
            .args(["monitor", "-i", interface, "--force", "-o"])
            .arg(out)
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sonde monitor");
        // `ip netns exec` execs sonde: the child is sonde. Its first line says it captures.
        let mut first = String::new();
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        stderr.read_line(&mut first).expect("read sonde's stderr");
        assert!(first.contains(&format!("capturing on {interface}")), "sonde monitor: {first}");
        // Keep draining stderr so that sonde never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Monitor { child: Some(child) }
    }

    /// Starts it on `va` serving HTTP on the namespace's loopback (`--http 127.0.0.1:0`);
    /// returns it with the URL it serves (its first line on stdout).
    pub fn start_serving(ns: &Netns, out: &Path, extra: &[&str]) -> (Monitor, String) {
        let mut child = ns
            .exec(Path::new(env!("CARGO_BIN_EXE_sonde")))
            .args(["monitor", "-i", "va", "--force", "--http", "127.0.0.1:0", "-o"])
            .arg(out)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sonde monitor");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read sonde's stdout");
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("the URL line").to_string();
        (Monitor { child: Some(child) }, url)
    }

    pub fn signal(&self, sig: libc::c_int) {
        let child = self.child.as_ref().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    }

    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// SIGINT, then the exit status must be success.
    pub fn stop(self) {
        self.stop_with(libc::SIGINT);
    }

    /// `sig`, then the exit status must be success.
    pub fn stop_with(mut self, sig: libc::c_int) {
        self.signal(sig);
        let status = self.child.take().unwrap().wait().expect("wait for sonde");
        assert!(status.success(), "sonde monitor exited with {status}");
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
