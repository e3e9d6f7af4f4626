//! sonde-anon: IP address anonymisation, applied to addresses on their way to an output.
//!
//! Three modes ([`Mode`]):
//! - [`Mode::CryptoPan`]: Crypto-PAn (Xu, Fan, Ammar, Moon), prefix preserving: two addresses
//!   sharing their first k bits map to two addresses sharing exactly their first k bits. It
//!   reproduces the reference implementation's published sample bit for bit (IPv4), and the
//!   published IPv6 vectors of the Go, Python, C and C# implementations;
//! - [`Mode::KeyedHash`]: a keyed pseudorandom function of the address, not prefix preserving;
//! - [`Mode::Zero`]: every address becomes `0.0.0.0` or `::` (the family is kept);
//! - [`Mode::Tcpdpriv`]: tcpdpriv's prefix-preserving table method (see [`tcpdpriv`]): images
//!   drawn at random, bit by bit consistent with the addresses seen before, so they depend on
//!   the order addresses are first seen. IPv6 by the same rule over 128 bits.
//!
//! The 32-byte [`Key`] comes from a key file ([`Key::load_or_create`]). The same key gives the
//! same mapping in every run, thread and file, so anonymised results can be joined; the library
//! does no I/O after the key is loaded and keeps no global state.
//!
//! An [`Anonymizer`] is meant to be owned by one worker thread: Crypto-PAn keeps a bounded
//! per-worker prefix cache (see [`cache`]), so it takes `&mut self`. Cloning is cheap: it copies
//! the AES round keys and starts an empty cache. tcpdpriv's table is the exception: clones share
//! it (behind a lock), so that every output of a run maps an address alike; the caller decides
//! the order addresses first reach it.
//!
//! ```
//! use sonde_anon::{Anonymizer, Key, Mode};
//! use std::net::{IpAddr, Ipv4Addr};
//!
//! // The key published with the reference implementation's sample.
//! let key = Key::from_bytes([
//!     21, 34, 23, 141, 51, 164, 207, 128, 19, 10, 91, 22, 73, 144, 125, 16,
//!     216, 152, 143, 131, 121, 121, 101, 39, 98, 87, 76, 45, 42, 132, 34, 2,
//! ]);
//! let mut anon = Anonymizer::new(Mode::CryptoPan, &key);
//! assert_eq!(anon.ipv4([128, 11, 68, 132]), [135, 242, 180, 132]);
//! let out = anon.ip(IpAddr::V4(Ipv4Addr::new(64, 39, 15, 238)));
//! assert_eq!(out, IpAddr::V4(Ipv4Addr::new(0, 219, 7, 41)));
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

pub mod cache;
mod cryptopan;
mod hash;
mod key;
pub mod tcpdpriv;
mod text;

use std::sync::{Arc, Mutex, MutexGuard};

pub use cache::CacheStats;
pub use cryptopan::CryptoPan;
pub use hash::KeyedHash;
pub use key::{Key, KeyError, KeyFormatError, LoadedKey};
pub use tcpdpriv::{TableStats, Tcpdpriv};

/// How addresses are anonymised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Crypto-PAn: prefix preserving, one-to-one.
    CryptoPan,
    /// Keyed pseudorandom function: no structure kept.
    KeyedHash,
    /// All-zero address of the same family.
    Zero,
    /// tcpdpriv's table method: prefix preserving, one-to-one, order dependent.
    Tcpdpriv,
}

impl Mode {
    /// The names [`FromStr`] accepts and [`Display`](fmt::Display) prints.
    pub const NAMES: [&'static str; 4] = ["cryptopan", "hash", "zero", "tcpdpriv"];

    pub fn name(self) -> &'static str {
        match self {
            Mode::CryptoPan => "cryptopan",
            Mode::KeyedHash => "hash",
            Mode::Zero => "zero",
            Mode::Tcpdpriv => "tcpdpriv",
        }
    }

    /// Whether an address's image depends on the order addresses are first seen (tcpdpriv): the
    /// caller must then feed addresses in a fixed order (the packets') to stay reproducible.
    pub fn order_dependent(self) -> bool {
        self == Mode::Tcpdpriv
    }

    /// Whether the mode needs a key (zeroing does not).
    pub fn needs_key(self) -> bool {
        self != Mode::Zero
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`Mode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown anonymisation mode {:?} (expected one of: {})", self.0, Mode::NAMES.join(", "))
    }
}

impl std::error::Error for UnknownMode {}

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cryptopan" | "crypto-pan" => Ok(Mode::CryptoPan),
            "hash" | "keyed-hash" => Ok(Mode::KeyedHash),
            "zero" => Ok(Mode::Zero),
            "tcpdpriv" => Ok(Mode::Tcpdpriv),
            _ => Err(UnknownMode(s.to_owned())),
        }
    }
}

/// Anonymises addresses in one [`Mode`] under one key. One per worker thread.
#[derive(Debug, Clone)]
pub struct Anonymizer {
    engine: Engine,
}

#[derive(Debug, Clone)]
enum Engine {
    CryptoPan {
        pan: CryptoPan,
        cache: Option<Box<cache::PrefixCache>>,
    },
    KeyedHash(KeyedHash),
    Zero,
    /// Shared by every clone.
    Tcpdpriv(Arc<Mutex<Tcpdpriv>>),
}

impl Anonymizer {
    /// An anonymizer with a prefix cache (Crypto-PAn); the key is ignored by [`Mode::Zero`];
    /// tcpdpriv's table holds at most [`tcpdpriv::DEFAULT_MAX_ADDRESSES`].
    pub fn new(mode: Mode, key: &Key) -> Self {
        let engine = match mode {
            Mode::CryptoPan => Engine::CryptoPan { pan: CryptoPan::new(key), cache: Some(Box::default()) },
            Mode::KeyedHash => Engine::KeyedHash(KeyedHash::new(key)),
            Mode::Zero => Engine::Zero,
            Mode::Tcpdpriv => return Anonymizer::tcpdpriv(key, tcpdpriv::DEFAULT_MAX_ADDRESSES),
        };
        Anonymizer { engine }
    }

    /// tcpdpriv's table method, the table bounded to `max_addresses` distinct addresses.
    pub fn tcpdpriv(key: &Key, max_addresses: usize) -> Self {
        Anonymizer { engine: Engine::Tcpdpriv(Arc::new(Mutex::new(Tcpdpriv::new(key, max_addresses)))) }
    }

    /// The shared table (a panic elsewhere while holding it leaves it consistent: every
    /// change is one map insert).
    fn table(table: &Mutex<Tcpdpriv>) -> MutexGuard<'_, Tcpdpriv> {
        table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The tcpdpriv table's figures (`None` in other modes).
    pub fn table_stats(&self) -> Option<TableStats> {
        match &self.engine {
            Engine::Tcpdpriv(table) => Some(Self::table(table).stats()),
            _ => None,
        }
    }

    /// Crypto-PAn computing every bit of every address (for measurement and cross-checks).
    pub fn uncached(key: &Key) -> Self {
        Anonymizer { engine: Engine::CryptoPan { pan: CryptoPan::new(key), cache: None } }
    }

    /// The zeroing anonymizer, which needs no key.
    pub fn zero() -> Self {
        Anonymizer { engine: Engine::Zero }
    }

    pub fn mode(&self) -> Mode {
        match self.engine {
            Engine::CryptoPan { .. } => Mode::CryptoPan,
            Engine::KeyedHash(_) => Mode::KeyedHash,
            Engine::Zero => Mode::Zero,
            Engine::Tcpdpriv(_) => Mode::Tcpdpriv,
        }
    }

    /// How the prefix cache has served so far (all zero for other modes or without a cache).
    pub fn cache_stats(&self) -> CacheStats {
        match &self.engine {
            Engine::CryptoPan { cache: Some(cache), .. } => cache.stats(),
            _ => CacheStats::default(),
        }
    }

    pub fn ipv4(&mut self, addr: [u8; 4]) -> [u8; 4] {
        match &mut self.engine {
            Engine::CryptoPan { pan, cache: Some(cache) } => cache.ipv4(pan, addr),
            Engine::CryptoPan { pan, cache: None } => pan.ipv4(addr),
            Engine::KeyedHash(hash) => hash.ipv4(addr),
            Engine::Zero => [0; 4],
            Engine::Tcpdpriv(table) => Self::table(table).ipv4(addr),
        }
    }

    pub fn ipv6(&mut self, addr: [u8; 16]) -> [u8; 16] {
        match &mut self.engine {
            Engine::CryptoPan { pan, cache: Some(cache) } => cache.ipv6(pan, addr),
            Engine::CryptoPan { pan, cache: None } => pan.ipv6(addr),
            Engine::KeyedHash(hash) => hash.ipv6(addr),
            Engine::Zero => [0; 16],
            Engine::Tcpdpriv(table) => Self::table(table).ipv6(addr),
        }
    }

    /// Anonymises either family; the family is kept (an IPv4-mapped IPv6 address is treated as
    /// the IPv6 address it is, so it does not map like its IPv4 form).
    pub fn ip(&mut self, addr: IpAddr) -> IpAddr {
        match addr {
            IpAddr::V4(a) => IpAddr::from(self.ipv4(a.octets())),
            IpAddr::V6(a) => IpAddr::from(self.ipv6(a.octets())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_round_trip() {
        for name in Mode::NAMES {
            assert_eq!(name.parse::<Mode>().unwrap().to_string(), name);
        }
        let err = "rot13".parse::<Mode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown anonymisation mode \"rot13\" (expected one of: cryptopan, hash, zero, tcpdpriv)"
        );
    }

    #[test]
    fn zero_keeps_the_family() {
        let mut anon = Anonymizer::zero();
        assert_eq!(anon.ip("192.0.2.1".parse().unwrap()), "0.0.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(anon.ip("2001:db8::1".parse().unwrap()), "::".parse::<IpAddr>().unwrap());
        assert_eq!(anon.mode(), Mode::Zero);
        assert!(!Mode::Zero.needs_key());
    }

    #[test]
    fn anonymizer_is_send_and_clone_starts_an_empty_cache() {
        fn is_send<T: Send>() {}
        is_send::<Anonymizer>();
        let mut anon = Anonymizer::new(Mode::CryptoPan, &Key::from_bytes([3; 32]));
        anon.ipv4([10, 0, 0, 1]);
        assert_eq!(anon.cache_stats().misses, 1);
        let clone = anon.clone();
        assert_eq!(clone.cache_stats().lookups(), 0);
    }

    #[test]
    fn tcpdpriv_clones_share_the_table() {
        let mut anon = Anonymizer::tcpdpriv(&Key::from_bytes([3; 32]), 100);
        let mut clone = anon.clone();
        let x = clone.ip("192.0.2.1".parse().unwrap());
        // Seen first by the clone, mapped alike by the original, and counted once.
        assert_eq!(anon.ip("192.0.2.1".parse().unwrap()), x);
        assert_eq!(anon.table_stats().map(|s| s.addresses), Some(1));
        assert_eq!(anon.mode(), Mode::Tcpdpriv);
        assert!(Mode::Tcpdpriv.order_dependent() && Mode::Tcpdpriv.needs_key());
    }
}
