//! How traffic is classed: Tstat's directions relative to the internal networks ([`Net`]) and
//! the protocols interval counters are kept for ([`Proto`]). Their names are the `net` and
//! `proto` columns of every interval file.

/// Tstat's traffic directions, by whether each end is in an internal network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Net {
    /// External → internal.
    In,
    /// Internal → external.
    Out,
    /// Internal ↔ internal.
    Loc,
    /// Neither end internal (everything, when no internal networks are given).
    Ext,
}

impl Net {
    pub const ALL: [Net; 4] = [Net::In, Net::Out, Net::Loc, Net::Ext];

    pub fn of(src_internal: bool, dst_internal: bool) -> Net {
        match (src_internal, dst_internal) {
            (false, true) => Net::In,
            (true, false) => Net::Out,
            (true, true) => Net::Loc,
            (false, false) => Net::Ext,
        }
    }

    pub fn name(self) -> &'static str {
        ["in", "out", "loc", "ext"][self as usize]
    }

    /// The direction a [`Net::name`] names.
    pub fn from_name(name: &str) -> Option<Net> {
        Net::ALL.into_iter().find(|n| n.name() == name)
    }
}

/// The protocols interval counters are kept for. `Tcp` and `Udp` are exactly the packets counted
/// in TCP and UDP flows; IP fragments after the first and TCP/UDP headers cut short are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
    Other,
}

impl Proto {
    pub const ALL: [Proto; 4] = [Proto::Tcp, Proto::Udp, Proto::Icmp, Proto::Other];

    pub fn name(self) -> &'static str {
        ["tcp", "udp", "icmp", "other"][self as usize]
    }

    /// The protocol a [`Proto::name`] names.
    pub fn from_name(name: &str) -> Option<Proto> {
        Proto::ALL.into_iter().find(|p| p.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for net in Net::ALL {
            assert_eq!(Net::from_name(net.name()), Some(net));
        }
        for proto in Proto::ALL {
            assert_eq!(Proto::from_name(proto.name()), Some(proto));
        }
        assert_eq!(Net::from_name("inbound"), None);
        assert_eq!(Net::of(true, false), Net::Out);
    }
}
