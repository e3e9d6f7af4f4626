//! Addresses written as text inside what a flow carried: an HTTP Host or URL naming an IP
//! literal, a TLS name that is one, a reverse-DNS query (`4.3.2.1.in-addr.arpa`). An anonymised
//! log must not show them in clear beside the mapped endpoints.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::Anonymizer;

impl Anonymizer {
    /// `text` with the address it names mapped, when it names one: an IP literal (`a.b.c.d`,
    /// `a.b.c.d:port`, `v6`, `[v6]`, `[v6]:port`), a URL whose authority is one, or a reverse
    /// name under `in-addr.arpa` / `ip6.arpa`. `None` when `text` names no address.
    pub fn host(&mut self, text: &str) -> Option<String> {
        if let Some((scheme, rest)) = text.split_once("://") {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(end);
            let (user, hostport) = authority.rsplit_once('@').map_or(("", authority), |(u, h)| (u, h));
            let at = if user.is_empty() && !authority.contains('@') { "" } else { "@" };
            return self.host_port(hostport).map(|h| format!("{scheme}://{user}{at}{h}{path}"));
        }
        self.host_port(text).or_else(|| self.reverse_name(text))
    }

    fn host_port(&mut self, text: &str) -> Option<String> {
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Some(self.ip(ip).to_string());
        }
        if let Some(inner) = text.strip_prefix('[') {
            let (v6, port) = inner.split_once(']')?;
            let ip: Ipv6Addr = v6.parse().ok()?;
            return Some(format!("[{}]{port}", Ipv6Addr::from(self.ipv6(ip.octets()))));
        }
        let (v4, port) = text.rsplit_once(':')?;
        let ip: Ipv4Addr = v4.parse().ok()?;
        Some(format!("{}:{port}", Ipv4Addr::from(self.ipv4(ip.octets()))))
    }

    /// A PTR query's name: the address's labels in reverse order (RFC 1035 §3.5, RFC 3596 §2.5).
    fn reverse_name(&mut self, text: &str) -> Option<String> {
        let name = text.strip_suffix('.').unwrap_or(text);
        let lower = name.to_ascii_lowercase();
        if let Some(labels) = lower.strip_suffix(".in-addr.arpa") {
            let mut octets = [0u8; 4];
            let parts: Vec<&str> = labels.split('.').collect();
            if parts.len() != 4 {
                return None;
            }
            for (i, p) in parts.iter().rev().enumerate() {
                octets[i] = p.parse().ok()?;
            }
            let [a, b, c, d] = self.ipv4(octets);
            return Some(format!("{d}.{c}.{b}.{a}.in-addr.arpa"));
        }
        let labels = lower.strip_suffix(".ip6.arpa")?;
        let nibbles: Vec<u8> = labels
            .split('.')
            .map(|n| u8::from_str_radix(n, 16).ok().filter(|_| n.len() == 1))
            .collect::<Option<_>>()?;
        if nibbles.len() != 32 {
            return None;
        }
        let mut octets = [0u8; 16];
        for (i, pair) in nibbles.rchunks(2).enumerate() {
            octets[i] = pair[1] << 4 | pair[0];
        }
        let shown = self.ipv6(octets);
        let mut out = String::with_capacity(72);
        for byte in shown.iter().rev() {
            out.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
        }
        Some(out + "ip6.arpa")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Key, Mode};

    fn anon() -> Anonymizer {
        Anonymizer::new(Mode::CryptoPan, &Key::from_bytes([7; 32]))
    }

    fn shown(a: &mut Anonymizer, ip: &str) -> String {
        a.ip(ip.parse().unwrap()).to_string()
    }

    #[test]
    fn literals_with_and_without_ports_are_mapped() {
        let mut a = anon();
        let v4 = shown(&mut a, "10.77.0.2");
        let v6 = shown(&mut a, "2001:db8::1");
        assert_eq!(a.host("10.77.0.2").unwrap(), v4);
        assert_eq!(a.host("10.77.0.2:8080").unwrap(), format!("{v4}:8080"));
        assert_eq!(a.host("2001:db8::1").unwrap(), v6);
        assert_eq!(a.host("[2001:db8::1]:443").unwrap(), format!("[{v6}]:443"));
        assert_eq!(a.host("http://10.77.0.2:8080/a?b").unwrap(), format!("http://{v4}:8080/a?b"));
        assert_eq!(a.host("http://u@10.77.0.2/").unwrap(), format!("http://u@{v4}/"));
    }

    #[test]
    fn names_are_left_alone() {
        let mut a = anon();
        for text in ["example.com", "example.com:80", "/index.html", "http://example.com/", "1.2.3.in-addr.arpa", ""] {
            assert_eq!(a.host(text), None, "{text}");
        }
    }

    #[test]
    fn reverse_names_map_the_address_they_spell() {
        let mut a = anon();
        let [w, x, y, z]: [u8; 4] = a.ipv4([10, 77, 0, 2]);
        assert_eq!(a.host("2.0.77.10.in-addr.arpa").unwrap(), format!("{z}.{y}.{x}.{w}.in-addr.arpa"));
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let name: String = v6.octets().iter().rev().map(|b| format!("{:x}.{:x}.", b & 0xf, b >> 4)).collect();
        let mapped = Ipv6Addr::from(a.ipv6(v6.octets()));
        let want: String = mapped.octets().iter().rev().map(|b| format!("{:x}.{:x}.", b & 0xf, b >> 4)).collect();
        assert_eq!(a.host(&format!("{name}ip6.arpa")).unwrap(), format!("{want}ip6.arpa"));
    }
}
