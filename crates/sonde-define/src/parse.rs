//! The definition language (docs/definitions.md): one definition per line,
//! `name = condition and condition … [key field]`, `#` starts a comment.

use std::net::IpAddr;

use crate::definition::{
    Association, Definition, Measures, ParseError, DEFAULT_IDLE_NS, DEFAULT_MAX_ARMED, DEFAULT_WITHIN_NS,
    MAX_NAME_BYTES, MAX_PATTERNS,
};
use crate::fields::{self, meta, Field, Needs};
use crate::pattern::{Anchor, Pattern, MAX_BITS};

/// Parses a file of definitions. Names must be distinct, of at most `max_name` bytes.
pub fn parse_definitions(text: &str, max_name: usize) -> Result<Vec<Definition>, ParseError> {
    let mut defs: Vec<Definition> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut p = Parser { line, at: 0, number: i + 1, max_name };
        if let Some(def) = p.definition_among(&defs)? {
            if defs.iter().any(|d| d.name == def.name) {
                return Err(p.error_at(0, format!("`{}` is defined twice", def.name)));
            }
            defs.push(def);
        }
    }
    Ok(defs)
}

/// Parses one definition line among `earlier` ones (which an association may name; its `from`
/// and `to` index that slice), its name of at most `max_name` bytes.
pub fn parse_definition_among(line: &str, earlier: &[Definition], max_name: usize) -> Result<Definition, ParseError> {
    let mut p = Parser { line, at: 0, number: 1, max_name };
    p.definition_among(earlier)?.ok_or_else(|| p.error_at(0, "no definition on this line".to_string()))
}

/// Parses one definition (a line without a definition is an error), its name of at most
/// [`MAX_NAME_BYTES`] bytes.
pub fn parse_definition(line: &str) -> Result<Definition, ParseError> {
    let mut p = Parser { line, at: 0, number: 1, max_name: MAX_NAME_BYTES };
    p.definition_among(&[])?.ok_or_else(|| p.error_at(0, "no definition on this line".to_string()))
}

struct Parser<'a> {
    line: &'a str,
    /// Byte offset of the next character.
    at: usize,
    number: usize,
    /// The longest name taken, in bytes.
    max_name: usize,
}

/// A condition's field: named, or raw bits of a layer.
struct FieldRef {
    anchor: Anchor,
    offset_bits: u32,
    bits: u32,
    needs: Needs,
    address: bool,
    /// `ip.src` / `ip.dst`: the family comes from the value or the chain.
    family_pending: Option<&'static str>,
}

impl<'a> Parser<'a> {
    fn error_at(&self, byte: usize, message: String) -> ParseError {
        let column = self.line[..byte.min(self.line.len())].chars().count() + 1;
        ParseError { line: self.number, column, message, source_line: self.line.to_string() }
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        self.error_at(self.at, message.into())
    }

    fn rest(&self) -> &'a str {
        &self.line[self.at..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn at_end(&mut self) -> bool {
        self.skip_space();
        self.rest().is_empty() || self.rest().starts_with('#')
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    /// A keyword: `token` not followed by a name character.
    fn eat_word(&mut self, word: &str) -> bool {
        self.skip_space();
        let rest = self.rest();
        let after = rest.get(word.len()..).and_then(|s| s.chars().next());
        if rest.starts_with(word) && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    /// The longest run of characters allowed by `ok` (possibly empty).
    fn take(&mut self, ok: impl Fn(char) -> bool) -> &'a str {
        let rest = self.rest();
        let len = rest.find(|c: char| !ok(c)).unwrap_or(rest.len());
        self.at += len;
        &rest[..len]
    }

    fn name(&mut self) -> Result<&'a str, ParseError> {
        self.skip_space();
        let name = self.take(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return Err(self.error("a definition starts with its name (a letter, then letters, digits, _ or -)"));
        }
        if name.len() > self.max_name {
            let at = self.at - name.len();
            return Err(self.error_at(
                at,
                format!("a name of {} bytes: at most {} (--definition-name-max)", name.len(), self.max_name),
            ));
        }
        Ok(name)
    }

    /// One line; `earlier` are the file's definitions above it (an association names two).
    fn definition_among(&mut self, earlier: &[Definition]) -> Result<Option<Definition>, ParseError> {
        if self.at_end() {
            return Ok(None);
        }
        let start = self.at;
        let name = self.name()?;
        if !self.eat("=") {
            return Err(self.error("expected `=` after the definition's name"));
        }
        if self.eat_word("assoc") {
            return self.association(name, start, earlier).map(Some);
        }
        let mut chain: Vec<Pattern> = Vec::new();
        let last_condition = self.conditions(&mut chain)?;
        let keys = if self.eat_word("key") { self.keys(&mut chain)? } else { vec![last_condition] };
        let (measures, every_ns, idle_ns) = self.options()?;
        if !self.at_end() {
            return Err(self.error("expected `and`, `key`, `measure`, `every`, `idle` or the end of the line"));
        }
        let (chain, keys) = canonical(chain, &keys);
        let text = self.line[start..self.at].trim_end().to_string();
        Ok(Some(Definition {
            name: name.to_string(),
            patterns: chain,
            keys,
            text,
            measures,
            every_ns,
            idle_ns,
            assoc: None,
        }))
    }

    /// `CONDITION [and CONDITION]…` into `chain` (with the patterns each needs); the index of
    /// the last condition's pattern, the key when the line names none.
    fn conditions(&mut self, chain: &mut Vec<Pattern>) -> Result<usize, ParseError> {
        let mut last_condition = 0;
        loop {
            self.skip_space();
            let cond_at = self.at;
            let (needs, pattern) = self.condition()?;
            for p in needs.patterns() {
                push_unique(chain, Some(p));
            }
            last_condition = push_unique(chain, Some(pattern)).unwrap_or(last_condition);
            if chain.len() > MAX_PATTERNS {
                return Err(self.error_at(cond_at, format!("more than {MAX_PATTERNS} patterns in one definition")));
            }
            if !self.eat_word("and") {
                return Ok(last_condition);
            }
        }
    }

    /// `FIELD[, FIELD]…` after `key`: each field an extraction pattern in `chain` (with the
    /// patterns it needs); their indices in it.
    fn keys(&mut self, chain: &mut Vec<Pattern>) -> Result<Vec<usize>, ParseError> {
        let mut keys = Vec::new();
        let mut bits = 0;
        loop {
            self.skip_space();
            let key_at = self.at;
            let field = self.field_ref()?;
            let field = match field.family_pending {
                Some(name) => {
                    let Some(v) = chain_family(chain) else {
                        return Err(self.error_at(
                            key_at,
                            format!("`{name}` as a key needs the address family: write ip4.* or ip6.*, or add `ip.version == 4` (or 6)"),
                        ));
                    };
                    resolve(name, v).expect("ip.src and ip.dst exist for both families")
                }
                None => field,
            };
            bits += field.bits;
            if bits > MAX_BITS {
                return Err(
                    self.error_at(key_at, format!("a key is at most {MAX_BITS} bits; these fields make {bits}"))
                );
            }
            for p in field.needs.patterns() {
                push_unique(chain, Some(p));
            }
            let extract = Pattern {
                anchor: field.anchor,
                offset_bits: field.offset_bits,
                bits: field.bits,
                mask: Pattern::full_mask(field.bits),
                lo: 0,
                hi: Pattern::full_mask(field.bits),
            };
            keys.extend(push_unique(chain, Some(extract)));
            if chain.len() > MAX_PATTERNS {
                return Err(self.error_at(key_at, format!("more than {MAX_PATTERNS} patterns in one definition")));
            }
            if !self.eat(",") {
                return Ok(keys);
            }
        }
    }

    /// `measure …`, `every DURATION` and `idle DURATION`, in any order: what is measured, the
    /// interval and the idle time.
    fn options(&mut self) -> Result<(Measures, Option<u64>, u64), ParseError> {
        let mut measures = Measures { count: true, gap: false, length: false };
        let (mut every_ns, mut idle_ns) = (None, DEFAULT_IDLE_NS);
        loop {
            if self.eat_word("measure") {
                measures = self.measures()?;
            } else if self.eat_word("every") {
                let ns = self.duration()?;
                if ns < 1_000_000 {
                    return Err(self.error("an interval is at least 1ms"));
                }
                every_ns = Some(ns);
            } else if self.eat_word("idle") {
                idle_ns = self.duration()?;
            } else {
                return Ok((measures, every_ns, idle_ns));
            }
        }
    }

    /// `count`, `gap`, `length` or `none`, comma-separated, after `measure`.
    fn measures(&mut self) -> Result<Measures, ParseError> {
        let mut measures = Measures { count: false, gap: false, length: false };
        loop {
            self.skip_space();
            let at = self.at;
            match self.take(|c| c.is_ascii_alphabetic()) {
                "count" => measures.count = true,
                "gap" => measures.gap = true,
                "length" => measures.length = true,
                // Only an association's end: no output of its own.
                "none" => {}
                other => {
                    return Err(self.error_at(at, format!("`{other}` is not a measurement: count, gap, length or none")))
                }
            }
            if !self.eat(",") {
                return Ok(measures);
            }
        }
    }

    /// `assoc A -> B [within DURATION] [max N]`, after `name =`.
    fn association(&mut self, name: &str, start: usize, earlier: &[Definition]) -> Result<Definition, ParseError> {
        let end = |p: &mut Self| -> Result<usize, ParseError> {
            p.skip_space();
            let at = p.at;
            let n = p.name()?;
            match earlier.iter().position(|d| d.name == n) {
                Some(i) if earlier[i].assoc.is_none() => Ok(i),
                Some(_) => Err(p.error_at(at, format!("`{n}` is an association, not a definition"))),
                None => Err(p.error_at(at, format!("no definition `{n}` above this line"))),
            }
        };
        let from = end(self)?;
        if !self.eat("->") {
            return Err(self.error("expected `->` between the two definitions"));
        }
        let to = end(self)?;
        let (a, b) = (&earlier[from], &earlier[to]);
        let bits = |d: &Definition| d.keys.iter().map(|&k| d.patterns[k].bits).sum::<u32>();
        if bits(a) != bits(b) {
            return Err(self.error_at(
                start,
                format!(
                    "`{}` and `{}` have keys of {} and {} bits: an association pairs equal FIDs",
                    a.name,
                    b.name,
                    bits(a),
                    bits(b)
                ),
            ));
        }
        let mut assoc =
            Association { from, to, within_ns: DEFAULT_WITHIN_NS, max_armed: DEFAULT_MAX_ARMED, bound: None };
        loop {
            let above = self.eat_word("above");
            if above || self.eat_word("below") {
                let word = if above { "above" } else { "below" };
                let last = |d: &Definition| d.keys.last().map(|&k| d.patterns[k].bits);
                match (last(a), last(b), assoc.bound) {
                    (Some(x), Some(y), None) if x == y && x >= 2 => assoc.bound = Some(crate::Bound { bits: x, above }),
                    (.., Some(_)) => return Err(self.error("one of `above` and `below`, once")),
                    _ => {
                        return Err(self.error(format!(
                            "`{word}` needs the last key fields of `{}` and `{}` of one width (2 bits or more)",
                            a.name, b.name
                        )))
                    }
                }
            } else if self.eat_word("within") {
                assoc.within_ns = self.duration()?;
            } else if self.eat_word("max") {
                assoc.max_armed = self.small_number("a number of arms")?.max(1) as usize;
            } else {
                break;
            }
        }
        if !self.at_end() {
            return Err(self.error("expected `above`, `below`, `within`, `max` or the end of the line"));
        }
        Ok(Definition {
            name: name.to_string(),
            patterns: Vec::new(),
            keys: Vec::new(),
            text: self.line[start..self.at].trim_end().to_string(),
            measures: Measures { count: false, gap: false, length: false },
            every_ns: None,
            idle_ns: DEFAULT_IDLE_NS,
            assoc: Some(assoc),
        })
    }

    /// `field [& mask] op value`: the field's precondition and its pattern.
    fn condition(&mut self) -> Result<(Needs, Pattern), ParseError> {
        let mut field = self.field_ref()?;
        let mut mask = None;
        if self.eat("&") {
            self.skip_space();
            let mask_at = self.at;
            if let Some(name) = field.family_pending {
                return Err(self.error_at(mask_at, format!("`{name}` takes no mask: write ip4.* or ip6.*")));
            }
            let m = self.number()?;
            if m & !Pattern::full_mask(field.bits) != 0 {
                return Err(self.error_at(mask_at, format!("the mask has bits beyond the field's {}", field.bits)));
            }
            mask = Some(m);
        }
        self.skip_space();
        let op_at = self.at;
        let op = match ["==", "<=", ">=", "<", ">"].into_iter().find(|op| self.rest().starts_with(op)) {
            Some(op) => {
                self.at += op.len();
                op
            }
            None if self.eat_word("in") => "in",
            None if self.rest().starts_with("!=") => {
                return Err(
                    self.error("`!=` is not supported: a pattern is one range (write a range, or two definitions)")
                )
            }
            None => return Err(self.error("expected a comparison: ==, in, <, <=, > or >=")),
        };
        self.skip_space();
        let value_at = self.at;
        let word = self.take(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '/' | '_'));
        if word.is_empty() {
            return Err(self.error("expected a value"));
        }
        let err = |message: String| self.error_at(value_at, message);
        if let Some(name) = field.family_pending {
            // ip.src / ip.dst: the family of the address written decides.
            let family = match word.split("..").next().and_then(|a| a.split('/').next()?.parse::<IpAddr>().ok()) {
                Some(IpAddr::V4(_)) => 4,
                Some(IpAddr::V6(_)) => 6,
                None => return Err(err(format!("`{name}` is compared with an IPv4 or IPv6 address, not `{word}`"))),
            };
            field = resolve(name, family).expect("ip.src and ip.dst exist for both families");
        }
        let full = Pattern::full_mask(field.bits);
        let mask = mask.unwrap_or(full);
        let value = |text: &str| parse_value(text, &field).map_err(&err);
        let (mask, lo, hi) = match op {
            "in" => {
                if let Some((a, b)) = word.split_once("..") {
                    let (lo, hi) = (value(a)?, value(b)?);
                    if lo > hi {
                        return Err(err(format!("the range {word} is empty")));
                    }
                    (mask, lo, hi)
                } else if let Some((net, len)) = word.split_once('/') {
                    let len: u32 = len.parse().map_err(|_| err(format!("`{len}` is not a prefix length")))?;
                    if len > field.bits {
                        return Err(err(format!("a /{len} prefix is longer than the field's {} bits", field.bits)));
                    }
                    let prefix = full & !Pattern::full_mask(field.bits - len);
                    let net = value(net)? & prefix;
                    (mask & prefix, net, net)
                } else {
                    let v = value(word)?;
                    (mask, v, v)
                }
            }
            "==" => {
                let v = value(word)?;
                (mask, v, v)
            }
            "<" => match value(word)?.checked_sub(1) {
                Some(hi) => (mask, 0, hi),
                None => return Err(err("`< 0` never matches".to_string())),
            },
            "<=" => (mask, 0, value(word)?),
            ">" => (mask, value(word)?.saturating_add(1), mask),
            _ => (mask, value(word)?, mask),
        };
        if lo > hi || (lo == hi && lo & !mask != 0) {
            return Err(
                self.error_at(op_at, format!("this comparison can never match: the field is masked with {mask:#x}"))
            );
        }
        let pattern = Pattern { anchor: field.anchor, offset_bits: field.offset_bits, bits: field.bits, mask, lo, hi };
        // A decoder fact is 0 on a packet that is not IP: only a condition admitting 0 needs
        // the IP check (`ip.proto == 6` does not, and shares its node with `tcp.dport`).
        let needs = if field.needs == Needs::Ip && lo != 0 { Needs::Nothing } else { field.needs };
        Ok((needs, pattern))
    }

    /// A named field, `ANCHOR[byte:len]` or `ANCHOR.bits[bit:len]`.
    fn field_ref(&mut self) -> Result<FieldRef, ParseError> {
        self.skip_space();
        let at = self.at;
        let name = self.take(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
        if name.is_empty() {
            return Err(self.error("expected a field (e.g. tcp.dport, l4[13:1])"));
        }
        if self.rest().starts_with('[') {
            let (base, in_bits) = match name.strip_suffix(".bits") {
                Some(base) => (base, true),
                None => (name, false),
            };
            let anchor = match base {
                "link" => Anchor::Link,
                "l3" | "ip" => Anchor::Net,
                "l4" => Anchor::Transport,
                "payload" => Anchor::Payload,
                _ => return Err(self.error_at(at, format!("`{base}` is not a layer: link, l3 (or ip), l4 or payload"))),
            };
            self.at += 1;
            let offset = self.small_number("an offset")?;
            if !self.eat(":") {
                return Err(self.error("expected `:` between the offset and the length"));
            }
            let len = self.small_number("a length")?;
            if !self.eat("]") {
                return Err(self.error("expected `]`"));
            }
            let scale = if in_bits { 1 } else { 8 };
            let (offset_bits, bits) = (offset.checked_mul(scale), len.checked_mul(scale));
            let (Some(offset_bits), Some(bits)) = (offset_bits, bits) else {
                return Err(self.error_at(at, "the offset or length is too large".to_string()));
            };
            if bits == 0 || bits > MAX_BITS {
                return Err(self.error_at(at, format!("a field is 1 to {MAX_BITS} bits long, not {bits}")));
            }
            return Ok(FieldRef {
                anchor,
                offset_bits,
                bits,
                needs: Needs::Nothing,
                address: false,
                family_pending: None,
            });
        }
        if let Some(pending) = ["ip.src", "ip.dst"].into_iter().find(|n| *n == name) {
            let mut f =
                FieldRef::from(fields::by_name(&pending.replace("ip.", "ip4."), None).expect("ip4 fields exist"));
            f.family_pending = Some(pending);
            return Ok(f);
        }
        match fields::by_name(name, None) {
            Some(f) => Ok(FieldRef::from(f)),
            None => Err(self.error_at(at, format!("unknown field `{name}` (see docs/definitions.md for the list)"))),
        }
    }

    /// A duration: a whole number and `us`, `ms`, `s`, `m` or `h`; in nanoseconds, at least 1 µs.
    fn duration(&mut self) -> Result<u64, ParseError> {
        self.skip_space();
        let at = self.at;
        let digits = self.take(|c| c.is_ascii_digit());
        let unit = self.take(|c| c.is_ascii_alphabetic());
        let scale = match unit {
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(self.error_at(at, "expected a duration: a number and us, ms, s, m or h".to_string())),
        };
        match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
            Some(ns) if ns > 0 => Ok(ns),
            _ => Err(self.error_at(at, format!("`{digits}{unit}` is not a duration of at least 1us"))),
        }
    }

    fn small_number(&mut self, what: &str) -> Result<u32, ParseError> {
        self.skip_space();
        let digits = self.take(|c| c.is_ascii_digit());
        digits.parse().map_err(|_| self.error(format!("expected {what} (a number)")))
    }

    /// A decimal or 0x-hexadecimal number.
    fn number(&mut self) -> Result<u128, ParseError> {
        let at = self.at;
        let word = self.take(|c| c.is_ascii_alphanumeric());
        parse_number(word).ok_or_else(|| self.error_at(at, format!("expected a number, not `{word}`")))
    }
}

impl From<Field> for FieldRef {
    fn from(f: Field) -> FieldRef {
        FieldRef {
            anchor: f.anchor,
            offset_bits: f.offset_bits,
            bits: f.bits,
            needs: f.needs,
            address: f.address,
            family_pending: None,
        }
    }
}

fn resolve(name: &str, family: u8) -> Option<FieldRef> {
    fields::by_name(name, Some(family)).map(FieldRef::from)
}

fn parse_number(word: &str) -> Option<u128> {
    match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        Some(hex) => u128::from_str_radix(hex, 16).ok(),
        None => word.parse().ok(),
    }
}

/// A value for `field`: a number, or an address for an address field.
fn parse_value(text: &str, field: &FieldRef) -> Result<u128, String> {
    let v = if field.address && text.contains(['.', ':']) {
        match (text.parse::<IpAddr>(), field.bits) {
            (Ok(IpAddr::V4(a)), 32) => u128::from(u32::from(a)),
            (Ok(IpAddr::V6(a)), 128) => u128::from(a),
            (Ok(_), _) => return Err(format!("{text} is not of the field's address family")),
            (Err(_), _) => return Err(format!("`{text}` is not an address")),
        }
    } else {
        parse_number(text).ok_or_else(|| format!("`{text}` is not a number"))?
    };
    if v > Pattern::full_mask(field.bits) {
        return Err(format!("{text} does not fit in the field's {} bits", field.bits));
    }
    Ok(v)
}

/// `chain` in one canonical order, and where the `keys` went in it. AND does not care about
/// order, so chains with the same conditions share their whole prefix whatever order they were
/// written in: the decoder's facts first, then the other tests by layer and offset, then the
/// patterns that only read a key (they filter nothing, and keys differ most).
fn canonical(mut chain: Vec<Pattern>, keys: &[usize]) -> (Vec<Pattern>, Vec<usize>) {
    let key_patterns: Vec<Pattern> = keys.iter().map(|&k| chain[k]).collect();
    // `ip.version == 4` (or 6) implies the packet is IP: the weaker check goes.
    if chain_family(&chain).is_some() {
        let ip = Needs::Ip.pattern();
        chain.retain(|p| Some(*p) != ip || key_patterns.contains(p));
    }
    chain.sort_by_key(|p| {
        let class = if p.anchor == Anchor::Meta {
            0
        } else if p.is_extraction() {
            2
        } else {
            1
        };
        (class, p.anchor, p.offset_bits, p.bits, p.mask, p.lo, p.hi)
    });
    let keys = key_patterns.iter().map(|k| chain.iter().position(|p| p == k).expect("a key is in the chain")).collect();
    (chain, keys)
}

/// Appends `p` unless the chain has it; returns its index.
fn push_unique(chain: &mut Vec<Pattern>, p: Option<Pattern>) -> Option<usize> {
    let p = p?;
    Some(chain.iter().position(|q| *q == p).unwrap_or_else(|| {
        chain.push(p);
        chain.len() - 1
    }))
}

/// The IP version the chain requires, if it requires one.
fn chain_family(chain: &[Pattern]) -> Option<u8> {
    chain.iter().find_map(|p| {
        let version = p.anchor == Anchor::Meta && p.offset_bits == meta::IP_VERSION * 8 && p.mask == 0xff;
        (version && p.lo == p.hi && (p.lo == 4 || p.lo == 6)).then_some(p.lo as u8)
    })
}
