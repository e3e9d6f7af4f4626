//! `--config FILE`, `--print-config` and `outputs` (docs/config.md): a file written as the doc
//! describes gives exactly the outputs it names, each byte-identical to a run that writes every
//! output; the command line wins over the file; errors name the file's line; every option is
//! documented.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// The files a run left in `dir` (the lock aside).
fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".sonde.lock")
        .collect()
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("sonde.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The traces: the demo and, where the corpus is, captures with HTTP, TLS, QUIC, DNS, ICMP.
fn traces() -> Vec<PathBuf> {
    let mut traces = vec![repo("testdata/demo.pcap")];
    if let Some(shared) = shared_dir() {
        for rel in [
            "realistic/zeek+zeek/testing/btest/Traces/http/methods.pcap",
            "realistic/zeek+zeek/testing/btest/Traces/snap-tcp.pcap",
            "realistic/appneta+tcpreplay/test/test.pcap",
            "realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
        ] {
            let path = shared.join("traces").join(rel);
            if path.is_file() {
                traces.push(path);
            }
        }
    }
    traces
}

#[test]
fn outputs_are_exactly_those_named_and_the_same_bytes() {
    let cases: &[(&str, &[&str])] = &[
        // As docs/config.md's example: one flow log.
        ("outputs = [\"tcp_flows\"]\n", &["tcp_flows.tsv"]),
        // Interval outputs alone: no payload is read, the intervals are the same.
        (
            "outputs = [\"intervals\", \"quantiles\", \"histograms\"]\ninterval = 60\n",
            &["intervals.tsv", "quantiles.tsv", "histograms.tsv"],
        ),
        ("outputs = [\"udp_flows\", \"icmp_flows\"]\n", &["udp_flows.tsv", "icmp_flows.tsv"]),
        ("outputs = []\n", &[]),
        ("outputs = [\"tcp_flows\", \"al_top\"]\ntables = true\n", &["tcp_flows.tsv", "al_top.tsv"]),
    ];
    let scratch = tempfile::tempdir().unwrap();
    for trace in traces() {
        for (config, expect) in cases {
            // The same options without `outputs`: every output.
            let everything: String =
                config.lines().filter(|l| !l.starts_with("outputs")).map(|l| l.to_owned() + "\n").collect();
            let (all, o) = analyze(&trace, &["--config", write_config(scratch.path(), &everything).to_str().unwrap()]);
            assert!(o.status.success(), "{}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
            let (some, o) = analyze(&trace, &["--config", write_config(scratch.path(), config).to_str().unwrap()]);
            assert!(o.status.success(), "{} {config}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
            let mut want: BTreeSet<String> = expect.iter().map(|s| s.to_string()).collect();
            want.insert("summary.json".into());
            assert_eq!(files(some.path()), want, "{} with {config:?}", trace.display());
            for name in *expect {
                let (a, b) =
                    (std::fs::read(all.path().join(name)).unwrap(), std::fs::read(some.path().join(name)).unwrap());
                assert!(a == b, "{}: {name} differs from the run writing every output ({config:?})", trace.display());
            }
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(some.path().join("summary.json")).unwrap()).unwrap();
            let listed: BTreeSet<String> =
                summary["outputs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
            assert_eq!(listed, want, "summary.json's outputs");
        }
    }
}

#[test]
fn http_takes_no_outputs() {
    let (_, o) = analyze(&repo("testdata/demo.pcap"), &["--outputs", "tcp_flows", "--http", "127.0.0.1:0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--http serves every output of the run: it takes no --outputs"));
}

#[test]
fn typed_outputs_are_selected_too() {
    let trace = repo("testdata/demo.pcap");
    let (out, o) = analyze(&trace, &["--format", "parquet", "--outputs", "tcp_flows,intervals"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want: BTreeSet<String> = ["tcp_flows.parquet", "intervals.parquet", "summary.json"].map(String::from).into();
    assert_eq!(files(out.path()), want);
    // The rows of the logs not written are never built; those written are the same bytes.
    let (all, o) = analyze(&trace, &["--format", "parquet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for name in ["tcp_flows.parquet", "intervals.parquet"] {
        let (a, b) = (std::fs::read(all.path().join(name)).unwrap(), std::fs::read(out.path().join(name)).unwrap());
        assert!(a == b, "{name} differs from the run writing every output");
    }
}

/// An IPFIX-only run (`outputs = []`) reads no payload and formats no line, and exports the
/// same messages as a run that writes everything (one worker: with several, the records of
/// different workers interleave in the order their threads send them).
#[test]
fn an_ipfix_only_run_exports_the_same_records() {
    let scratch = tempfile::tempdir().unwrap();
    for trace in traces() {
        let export = |name: &str, extra: &[&str]| {
            let file = scratch.path().join(name);
            // One worker: several send their records as they end, in the threads' own order.
            let mut args = vec!["--threads", "1", "--ipfix", file.to_str().unwrap()];
            args.extend_from_slice(extra);
            let (out, o) = analyze(&trace, &args);
            assert!(o.status.success(), "{}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
            (std::fs::read(&file).unwrap(), files(out.path()))
        };
        let (all, _) = export("all.ipfix", &[]);
        let (only, written) = export("only.ipfix", &["--outputs="]);
        assert!(!all.is_empty() && all == only, "{}: the IPFIX export differs", trace.display());
        assert_eq!(written, BTreeSet::from(["summary.json".to_string()]));
    }
}

/// `--print-config` of `args` (after `sonde CMD`).
fn print_config(args: &[&str]) -> String {
    // Before the trailing filter's words.
    let o = sonde().arg(args[0]).arg("--print-config").args(&args[1..]).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn the_command_line_wins_and_print_config_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let trace = repo("testdata/demo.pcap");
    let config = write_config(
        dir.path(),
        "# site\ninterval = 60\ninternal = [\"10.0.0.0/8\", \"fd00::/8\"]\napp_packets = 4\nquiet = true\nfilter = \"tcp\"\n",
    );
    let r = trace.to_str().unwrap();
    let c = config.to_str().unwrap();
    let printed = print_config(&["analyze", "-r", r, "--config", c, "--interval", "30", "--internal", "192.0.2.0/24"]);
    for line in [
        "interval = 30\n",
        "internal = [\"192.0.2.0/24\"]\n",
        "app-packets = 4\n",
        "quiet = true\n",
        "filter = \"tcp\"\n",
    ] {
        assert!(printed.contains(line), "{line:?} not in:\n{printed}");
    }
    // What it prints is a configuration that gives the same settings.
    let again = dir.path().join("printed.toml");
    std::fs::write(&again, &printed).unwrap();
    assert_eq!(print_config(&["analyze", "--config", again.to_str().unwrap()]), printed);
    // A filter on the command line replaces the file's.
    let printed = print_config(&["analyze", "-r", r, "--config", c, "udp", "port", "53"]);
    assert!(printed.contains("filter = \"udp port 53\"\n"), "{printed}");
    // monitor reads the same files (and prints without capturing).
    let printed = print_config(&["monitor", "-i", "lo", "--config", c]);
    assert!(printed.contains("interface = [\"lo\"]\n") && printed.contains("interval = 60\n"), "{printed}");
}

#[test]
fn a_bad_file_names_its_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let trace = repo("testdata/demo.pcap");
    let cases = [
        ("interval = 60\n\n  app-packet = 3\n", ":3: unknown key 'app-packet': not an option of sonde analyze"),
        ("force = 3\n", ":1: 'force' is a flag: true or false"),
        ("interval = [1, 2]\n", ":1: 'interval' takes one value, not an array"),
        ("[kafka]\nqueue = 1\n", ":1: 'kafka' must be a string, number, boolean or array"),
        ("outputs = [\"tcp_flow\"]\n", "--outputs: 'tcp_flow' is not an output; the outputs are tcp_flows,"),
        ("interval = = 1\n", "TOML parse error at line 1, column 12"),
        ("interval = 0.0001\n", "--interval must be 0 (off) or at least 0.001 seconds"),
        // The tables are kept per interval: with none, they are refused, not silently left out.
        (
            "tables = true\ninterval = 0\n",
            "--tables needs intervals (it keeps its tables per interval), and --interval 0",
        ),
    ];
    for (text, message) in cases {
        let config = write_config(dir.path(), text);
        let out = dir.path().join("out");
        let o = sonde()
            .args(["analyze", "-q", "-r", trace.to_str().unwrap(), "-o", out.to_str().unwrap(), "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && stderr.contains(message), "{text:?}: {:?} {stderr}", o.status.code());
        assert!(!out.join("summary.json").exists(), "{text:?}: a refused configuration writes nothing");
    }
    let o = sonde().args(["analyze", "-r", "x.pcap", "--config", "/nonexistent/sonde.toml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--config /nonexistent/sonde.toml: "));
}

#[test]
fn the_shipped_example_runs_and_every_option_is_documented() {
    let trace = repo("testdata/demo.pcap");
    let (out, o) = analyze(&trace, &["--config", repo("examples/sonde.toml").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(files(out.path()).contains("tcp_flows.tsv"));
    let doc = std::fs::read_to_string(repo("docs/config.md")).unwrap();
    for cmd in ["analyze", "monitor"] {
        let help = sonde().args([cmd, "--help"]).output().unwrap().stdout;
        let help = String::from_utf8_lossy(&help);
        // An option's line: `  -r, --read <FILE>` or `      --interval <SECS>` (its help's
        // wrapped lines are indented further).
        let longs: Vec<&str> = help
            .lines()
            .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
            .filter_map(|l| {
                l.trim_start().split_once("--").filter(|(short, _)| short.is_empty() || short.ends_with(", "))
            })
            .filter_map(|(_, l)| l.split([' ', '=', '<']).next())
            .filter(|k| !["help", "version", "config", "print-config"].contains(k))
            .collect();
        assert!(longs.len() > 40, "{cmd}: {} options read from --help", longs.len());
        for key in longs {
            assert!(doc.contains(&format!("| `{key}` |")), "docs/config.md does not list `{key}` of sonde {cmd}");
        }
    }
}
