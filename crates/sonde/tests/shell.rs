//! `sonde completions` and `sonde man`: generated from the command line's own definitions, so
//! every subcommand and option `--help` shows is in them; the scripts are run by their shells
//! (bash completes for real; zsh and fish check the syntax), the pages by groff.

mod common;

use std::process::Command;

use common::sonde;

fn stdout(args: &[&str]) -> String {
    let out = sonde().args(args).output().expect("run sonde");
    assert!(out.status.success(), "sonde {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The subcommands `sonde --help` lists (but `help`).
fn subcommands() -> Vec<String> {
    let help = stdout(&["--help"]);
    let listed = help.split("Commands:").nth(1).expect("a Commands: section").split("Options:").next().unwrap();
    let names: Vec<String> = listed
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 10 && names.iter().any(|n| n == "completions"), "{names:?}");
    names
}

/// The long options `sonde SUB --help` lists.
fn long_options(sub: &str) -> Vec<String> {
    let help = stdout(&[sub, "--help"]);
    // An option's line: `  -r, --read <FILE>` or `      --interval <SECS>`; its help's lines
    // are indented further.
    let mut names: Vec<String> = help
        .lines()
        .filter(|l| l.len() - l.trim_start().len() < 8)
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split([' ', ',', '=']).find(|w| w.starts_with("--")).map(str::to_string))
        .filter(|n| n != "--help")
        .collect();
    names.dedup();
    names
}

/// Runs `shell` on `script` (the script on stdin after `prelude`); its stdout.
fn run_shell(shell: &str, args: &[&str], script: &str) -> Option<String> {
    let done = match Command::new(shell)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
            child.wait_with_output().unwrap()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: {shell} not installed (make test-deps installs it)");
            return None;
        }
        Err(e) => panic!("{shell}: {e}"),
    };
    assert!(
        done.status.success() && done.stderr.is_empty(),
        "{shell} {args:?}: {}\n{}",
        done.status,
        String::from_utf8_lossy(&done.stderr)
    );
    Some(String::from_utf8(done.stdout).unwrap())
}

#[test]
fn bash_completes_every_subcommand_and_option() {
    let script = stdout(&["completions", "bash"]);
    // Completes as bash does on TAB: the words so far, the function the script registered.
    let complete = |words: &[&str]| -> Vec<String> {
        let call = format!(
            "{script}\nCOMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; \
             COMP_POINT=${{#COMP_LINE}}; _sonde sonde \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            words = words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
            cword = words.len() - 1,
        );
        run_shell("bash", &[], &call).expect("bash").lines().map(str::to_string).collect()
    };
    let offered = complete(&["sonde", ""]);
    for sub in subcommands() {
        assert!(offered.contains(&sub), "`sonde <TAB>` lacks {sub}: {offered:?}");
    }
    for sub in ["analyze", "monitor", "serve"] {
        let offered = complete(&["sonde", sub, "--"]);
        for option in long_options(sub) {
            assert!(offered.contains(&option), "`sonde {sub} --<TAB>` lacks {option}");
        }
    }
    assert_eq!(complete(&["sonde", "completions", "fi"]), ["fish"]);
}

#[test]
fn zsh_and_fish_read_their_scripts() {
    let analyze_options = long_options("analyze");
    for (shell, check) in [("zsh", &["-n"][..]), ("fish", &["--no-execute"][..])] {
        let script = stdout(&["completions", shell]);
        for sub in subcommands() {
            assert!(script.contains(&sub), "{shell}: no {sub}");
        }
        for option in &analyze_options {
            let bare = option.trim_start_matches('-');
            assert!(script.contains(bare), "{shell}: no {option}");
        }
        run_shell(shell, check, &script);
    }
}

#[test]
fn man_pages_render_and_name_every_option() {
    let page = stdout(&["man"]);
    assert!(page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH sonde 1"), "{}", &page[..200.min(page.len())]);
    let dir = tempfile::tempdir().unwrap();
    stdout(&["man", "--dir", dir.path().to_str().unwrap()]);
    let mut expected: Vec<String> = subcommands().iter().map(|s| format!("sonde-{s}.1")).collect();
    expected.extend(["sonde.1".to_string(), "sonde-ts-export.1".to_string()]);
    for name in &expected {
        assert!(dir.path().join(name).is_file(), "no {name}");
    }
    // Each page as `man` shows it (groff, its input read as UTF-8 as man's preconv does), with
    // every warning on: none given.
    let analyze = dir.path().join("sonde-analyze.1");
    let text = run_shell("groff", &["-k", "-man", "-Tutf8", "-ww", analyze.to_str().unwrap()], "").unwrap_or_default();
    for option in long_options("analyze") {
        // groff may hyphenate; the option's name is whole in the source.
        let source = std::fs::read_to_string(&analyze).unwrap();
        assert!(source.contains(&option.replace('-', "\\-")), "sonde-analyze.1 lacks {option}");
    }
    if !text.is_empty() {
        assert!(text.contains("sonde-analyze"), "{}", &text[..200.min(text.len())]);
    }
}
