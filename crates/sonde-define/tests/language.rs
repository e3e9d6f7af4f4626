//! The definition language: what each form compiles to, and where a refused line is wrong.

use sonde_define::fields::meta;
use sonde_define::{
    parse_definition, parse_definitions, Anchor, Change, ChangeError, Counter, Pattern, MAX_NAME_BYTES,
};

fn pattern(anchor: Anchor, offset_bits: u32, bits: u32, mask: u128, lo: u128, hi: u128) -> Pattern {
    Pattern { anchor, offset_bits, bits, mask, lo, hi }
}

fn meta_is(at: u32, v: u128) -> Pattern {
    pattern(Anchor::Meta, at * 8, 8, 0xff, v, v)
}

#[test]
fn the_examples_of_the_issue_compile_to_these_chains() {
    let defs = parse_definitions(
        "# the four examples\n\
         web  = ip.proto == 6 and tcp.dport in 80..88\n\
         syn  = tcp.flags & 0x12 == 0x02\n\
         cust = ip.src in 192.0.2.0/24 key ip.src\n\
         raw  = l4[13:1] & 0x3f == 0x02 key ip[12:4]   # SYN only, keyed by the IPv4 source\n",
        MAX_NAME_BYTES,
    )
    .unwrap();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["web", "syn", "cust", "raw"]);
    let tcp = meta_is(meta::IP_PROTO, 6);
    assert_eq!(defs[0].patterns, [tcp, pattern(Anchor::Transport, 16, 16, 0xffff, 80, 88)]);
    assert_eq!(defs[0].keys, [1]);
    assert_eq!(defs[1].patterns, [tcp, pattern(Anchor::Transport, 104, 8, 0x12, 2, 2)]);
    let v4 = meta_is(meta::IP_VERSION, 4);
    let net = 0xc000_0200;
    assert_eq!(
        defs[2].patterns,
        [
            v4,
            pattern(Anchor::Net, 96, 32, 0xffff_ff00, net, net),
            pattern(Anchor::Net, 96, 32, 0xffff_ffff, 0, 0xffff_ffff)
        ]
    );
    assert_eq!(defs[2].keys, [2]);
    assert_eq!(
        defs[3].patterns,
        [
            pattern(Anchor::Transport, 104, 8, 0x3f, 2, 2),
            pattern(Anchor::Net, 96, 32, u128::from(u32::MAX), 0, u128::from(u32::MAX))
        ]
    );
    assert_eq!(defs[3].keys, [1]);
    assert_eq!(defs[3].text, "raw  = l4[13:1] & 0x3f == 0x02 key ip[12:4]");
}

#[test]
fn comparisons_become_ranges() {
    let chain = |text: &str| parse_definition(text).unwrap().patterns.last().copied().unwrap();
    let dport = |mask, lo, hi| pattern(Anchor::Transport, 16, 16, mask, lo, hi);
    assert_eq!(chain("a = tcp.dport < 1024"), dport(0xffff, 0, 1023));
    assert_eq!(chain("a = tcp.dport <= 1024"), dport(0xffff, 0, 1024));
    assert_eq!(chain("a = tcp.dport > 1023"), dport(0xffff, 1024, 0xffff));
    assert_eq!(chain("a = tcp.dport >= 0x400"), dport(0xffff, 1024, 0xffff));
    assert_eq!(chain("a = tcp.dport in 443"), dport(0xffff, 443, 443));
    assert_eq!(chain("a = l4.bits[106:6] == 2"), pattern(Anchor::Transport, 106, 6, 0x3f, 2, 2));
    assert_eq!(
        chain("a = payload[0:4] == 0x47455420"),
        pattern(Anchor::Payload, 0, 32, 0xffff_ffff, 0x4745_5420, 0x4745_5420)
    );
    let v6 = parse_definition("a = ip.dst in 2001:db8::/32").unwrap();
    let prefix = u128::from(0x2001_0db8u32) << 96;
    assert_eq!(v6.patterns, [meta_is(meta::IP_VERSION, 6), pattern(Anchor::Net, 192, 128, !0 << 96, prefix, prefix)]);
    let range = parse_definition("a = ip.src in 10.0.0.1..10.0.0.9").unwrap();
    assert_eq!(range.patterns[1], pattern(Anchor::Net, 96, 32, 0xffff_ffff, 0x0a00_0001, 0x0a00_0009));
    // A key needing the family: given by an earlier condition.
    let keyed = parse_definition("a = ip.version == 6 and udp.dport == 53 key ip.src").unwrap();
    assert_eq!(keyed.patterns[keyed.keys[0]], pattern(Anchor::Net, 64, 128, u128::MAX, 0, u128::MAX));
    // The same condition twice is one pattern.
    assert_eq!(parse_definition("a = tcp.dport == 80 and tcp.dport == 80").unwrap().patterns.len(), 2);
}

#[test]
fn facts_that_are_zero_off_ip_check_for_ip_only_when_zero_would_match() {
    let chain = |text: &str| parse_definition(text).unwrap().patterns;
    let ip = pattern(Anchor::Meta, meta::IP_VERSION * 8, 8, 0xff, 4, 6);
    let ttl = |lo, hi| pattern(Anchor::Meta, meta::TTL * 8, 8, 0xff, lo, hi);
    // A non-IP packet's facts are zeros: `< 5` would match it, `> 60` cannot.
    assert_eq!(chain("a = ip.ttl < 5"), [ip, ttl(0, 4)]);
    assert_eq!(chain("a = ip.hlim > 60"), [ttl(61, 255)]);
    assert_eq!(chain("a = ip.dscp == 0"), [ip, pattern(Anchor::Meta, meta::TOS * 8, 6, 0x3f, 0, 0)]);
    // An explicit version already says IP.
    assert_eq!(chain("a = ip.ttl < 5 and ip.version == 6"), [meta_is(meta::IP_VERSION, 6), ttl(0, 4)]);
    // `ip.proto == 6` alone is the node `tcp.dport` needs: shared.
    assert_eq!(chain("a = ip.proto == 6"), [meta_is(meta::IP_PROTO, 6)]);
    // A key admits every value, 0 too.
    let d = parse_definition("a = ip.version in 0..6 key ip.len").unwrap();
    let len = pattern(Anchor::Meta, meta::IP_LEN * 8, 32, 0xffff_ffff, 0, 0xffff_ffff);
    assert_eq!(d.patterns, [pattern(Anchor::Meta, meta::IP_VERSION * 8, 8, 0xff, 0, 6), ip, len]);
    assert_eq!(d.keys, [2]);
    // 802.1Q: the tag's fields need an Ethernet frame and the tag's Ethernet type.
    let ethernet = meta_is(meta::ETHERNET, 1);
    let tagged = pattern(Anchor::Link, 96, 16, 0xffff, 0x8100, 0x8100);
    assert_eq!(chain("a = vlan.id == 100"), [ethernet, tagged, pattern(Anchor::Link, 116, 12, 0xfff, 100, 100)]);
    let pcp = pattern(Anchor::Link, 112, 3, 7, 5, 7);
    assert_eq!(chain("a = eth.type == 0x8100 and vlan.pcp >= 5"), [ethernet, tagged, pcp]);
    // The link fields read only Ethernet frames (not Linux cooked or raw IP captures).
    assert_eq!(chain("a = eth.type == 0x0806"), [ethernet, pattern(Anchor::Link, 96, 16, 0xffff, 0x806, 0x806)]);
}

#[test]
fn measurements_intervals_and_timeouts_are_chosen_per_definition() {
    let d = parse_definition("a = tcp.dport == 80 measure gap, length every 10ms idle 30s").unwrap();
    assert_eq!((d.measures.count, d.measures.gap, d.measures.length), (false, true, true));
    assert_eq!((d.every_ns, d.idle_ns), (Some(10_000_000), 30_000_000_000));
    let d = parse_definition("a = tcp.dport == 80 key tcp.sport idle 2m").unwrap();
    assert_eq!((d.measures.count, d.measures.gap, d.every_ns, d.idle_ns), (true, false, None, 120_000_000_000));
    assert_eq!(parse_definition("a = tcp.dport == 80").unwrap().idle_ns, sonde_define::DEFAULT_IDLE_NS);
}

#[test]
fn keys_of_several_fields_and_associations() {
    let defs = parse_definitions(
        "data = ip.version == 4 and payload[0:1] >= 0 key ip4.src, ip4.dst, tcp.sport, tcp.dport, tcp.nxt measure none\n\
         ack = ip.version == 4 and tcp.flags & 0x10 == 0x10 key ip4.dst, ip4.src, tcp.dport, tcp.sport, tcp.ack\n\
         rtt = assoc data -> ack within 2s max 500", MAX_NAME_BYTES,
    )
    .unwrap();
    let bits: Vec<u32> = defs[0].keys.iter().map(|&k| defs[0].patterns[k].bits).collect();
    assert_eq!(bits, [32, 32, 16, 16, 32]);
    assert!(!defs[0].measures.count);
    let a = defs[2].assoc.as_ref().unwrap();
    assert_eq!((a.from, a.to, a.within_ns, a.max_armed), (0, 1, 2_000_000_000, 500));
    assert!(defs[2].patterns.is_empty());
}

/// The error's line, column and message for `text`.
fn refused(text: &str) -> (usize, usize, String) {
    let e = parse_definitions(text, MAX_NAME_BYTES).unwrap_err();
    (e.line, e.column, e.message)
}

#[test]
fn a_refused_definition_says_where_it_is_wrong() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("web = ip.prto == 6", 1, 7, "unknown field `ip.prto`"),
        ("ok = tcp.dport == 80\nbad = tcp.dport == 80 or udp", 2, 23, "expected `and`, `key`"),
        ("a = tcp.dport == 80 measure size", 1, 29, "`size` is not a measurement"),
        ("a = tcp.dport == 80 every 10", 1, 27, "expected a duration"),
        ("a = tcp.dport == 80 every 500us", 1, 32, "at least 1ms"),
        ("a = tcp.dport == 80 idle 0s", 1, 26, "not a duration of at least 1us"),
        ("= tcp.dport == 80", 1, 1, "starts with its name"),
        ("a tcp.dport == 80", 1, 3, "expected `=`"),
        ("a = tcp.dport", 1, 14, "expected a comparison"),
        ("a = tcp.dport != 80", 1, 15, "`!=` is not supported"),
        ("a = tcp.dport == ", 1, 18, "expected a value"),
        ("a = tcp.dport == 70000", 1, 18, "does not fit in the field's 16 bits"),
        ("a = tcp.dport in 90..80", 1, 18, "is empty"),
        ("a = tcp.dport < 0", 1, 17, "never matches"),
        ("a = tcp.flags & 0x100 == 1", 1, 17, "mask has bits beyond"),
        ("a = tcp.flags & 0x10 == 0x02", 1, 22, "can never match"),
        ("a = ip.src == example", 1, 15, "compared with an IPv4 or IPv6 address"),
        ("a = ip4.src == 2001:db8::1", 1, 16, "not of the field's address family"),
        ("a = ip4.src in 10.0.0.0/33", 1, 16, "longer than the field's 32 bits"),
        ("a = l5[0:1] == 1", 1, 5, "`l5` is not a layer"),
        ("a = l4[0:17] == 1", 1, 5, "1 to 128 bits"),
        ("a = l4[0 1] == 1", 1, 10, "expected `:`"),
        ("a = l4[0:1 == 1", 1, 12, "expected `]`"),
        ("a = tcp.dport == 80 key ip.src", 1, 25, "needs the address family"),
        ("a = ip.src & 0xff == 1", 1, 14, "takes no mask"),
        ("a = == 1", 1, 5, "expected a field"),
        ("a = l4[x:1] == 1", 1, 8, "expected an offset"),
        ("a = l4[4294967295:1] == 1", 1, 5, "offset or length is too large"),
        ("a = tcp.flags & zz == 1", 1, 17, "expected a number, not `zz`"),
        ("a = ip4.src == 1.2.3", 1, 16, "`1.2.3` is not an address"),
        ("a = tcp.dport == abc", 1, 18, "`abc` is not a number"),
        ("a = ip4.src in 10.0.0.0/x", 1, 16, "`x` is not a prefix length"),
        ("a = tcp.dport == 80\na = udp.dport == 53", 2, 1, "defined twice"),
        ("a = tcp.dport == 80\nr = assoc a -> a soon", 2, 18, "expected `above`, `below`, `within`, `max`"),
        ("a = tcp.dport == 80\nr = assoc a -> a max lots", 2, 22, "expected a number of arms"),
        ("a = tcp.dport == 80\nr = assoc a -> b", 2, 16, "no definition `b` above"),
        ("a = tcp.dport == 80\nr = assoc a b", 2, 13, "expected `->`"),
        ("a = tcp.dport == 80\nr = assoc a -> a\ns = assoc r -> a", 3, 11, "`r` is an association"),
        ("a = tcp.dport == 80\nb = ip.version == 4 key ip4.src\nr = assoc a -> b", 3, 1, "keys of 16 and 32 bits"),
        ("a = ip.version == 6 key ip6.src, ip6.dst", 1, 34, "at most 128 bits"),
        (
            "a = tcp.dport == 80 key tcp.sport, tcp.dport\nb = ip.version == 4 key ip4.src\nr = assoc a -> b above",
            3,
            23,
            "`above` needs the last key fields",
        ),
        (
            "a = tcp.dport == 80 key tcp.sport, tcp.dport\nb = ip.version == 4 key ip4.src\nr = assoc a -> b below",
            3,
            23,
            "`below` needs the last key fields",
        ),
        ("a = tcp.dport == 80 key tcp.seq\nr = assoc a -> a above below", 2, 29, "one of `above` and `below`, once"),
    ];
    for (text, line, column, message) in cases {
        let (l, c, m) = refused(text);
        assert_eq!((l, c), (*line, *column), "{text:?}: {m}");
        assert!(m.contains(message), "{text:?}: {m}");
    }
    // The message shows the line with a caret under the column.
    let e = parse_definitions("web = ip.prto == 6", MAX_NAME_BYTES).unwrap_err();
    assert_eq!(e.to_string(), "line 1, column 7: unknown field `ip.prto` (see docs/definitions.md for the list)\n  web = ip.prto == 6\n        ^");
}

#[test]
fn too_many_patterns_are_refused_at_the_one_that_overflows() {
    // 33 conditions: the 33rd is refused.
    let long = (0..33).map(|i| format!("l4[{i}:1] == 1")).collect::<Vec<_>>().join(" and ");
    let text = format!("a = {long}");
    let column = text.find("l4[32:1]").unwrap() + 1;
    assert_eq!(refused(&text), (1, column, "more than 32 patterns in one definition".to_string()));
    // Three patterns, then one-bit keys: the 30th key makes 33.
    let keys = (0..31).map(|i| format!("l4.bits[{i}:1]")).collect::<Vec<_>>().join(", ");
    let text = format!("a = tcp.dport == 80 and ip.version == 4 key {keys}");
    let column = text.find("l4.bits[29:1]").unwrap() + 1;
    assert_eq!(refused(&text), (1, column, "more than 32 patterns in one definition".to_string()));
    // One line, parsed alone, must hold a definition.
    for empty in ["", "   ", "# only a comment"] {
        let e = parse_definition(empty).unwrap_err();
        assert_eq!((e.line, e.column, e.message.as_str()), (1, 1, "no definition on this line"));
    }
    // A file of nothing but comments is an empty set, not an error.
    assert_eq!(parse_definitions("# nothing\n\n   # here\n", MAX_NAME_BYTES).unwrap(), []);
}

#[test]
fn any_text_is_parsed_or_refused_without_panicking() {
    // xorshift: deterministic.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let alphabet: Vec<char> = "abcdeiklnoprstuyw0123456789.:/&=<>![]x# -_\u{e9}".chars().collect();
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let text: String = (0..len).map(|i| alphabet[((x >> (i % 50)) as usize + i * 7) % alphabet.len()]).collect();
        let _ = parse_definitions(&text, MAX_NAME_BYTES);
        let _ = parse_definitions(&format!("a = {text}"), MAX_NAME_BYTES);
        let _ = parse_definitions(&format!("a = tcp.dport {text}"), MAX_NAME_BYTES);
    }
}

/// Issue 38: a name longer than the limit is refused where it starts, in a file and in a change
/// made while running; a name at the limit is taken.
#[test]
fn names_longer_than_the_limit_are_refused_everywhere_they_enter() {
    let at_limit = format!("n{} = tcp.dport == 80", "a".repeat(MAX_NAME_BYTES - 1));
    assert_eq!(parse_definitions(&at_limit, MAX_NAME_BYTES).unwrap()[0].name.len(), MAX_NAME_BYTES);
    let long = format!("ok = ip.version == 4\n{} = tcp.dport == 80", "n".repeat(60_000));
    let e = parse_definitions(&long, MAX_NAME_BYTES).unwrap_err();
    assert_eq!((e.line, e.column), (2, 1));
    assert!(e.message.contains("60000 bytes: at most 128"), "{}", e.message);
    // The run's own limit.
    assert!(parse_definitions("abcdef = tcp.dport == 80", 5).is_err());
    assert!(parse_definitions("abcde = tcp.dport == 80", 5).is_ok());
    // A change while running is held to the counter's limit.
    let mut counter = Counter::new(parse_definitions("a = tcp.dport == 80", 5).unwrap(), None, 10);
    counter.set_max_name_bytes(5);
    let version = counter.version();
    let refused = counter.apply(version, &Change::Add("abcdef = udp.dport == 53".into()));
    assert!(matches!(refused, Err(ChangeError::Invalid(_))), "{refused:?}");
    assert!(counter.apply(version, &Change::Add("abcde = udp.dport == 53".into())).is_ok());
    assert!(counter.parse("abcdef = udp.dport == 53").is_err());
}
