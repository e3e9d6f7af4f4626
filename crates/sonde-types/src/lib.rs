//! sonde-types: the words every sonde crate shares, each defined once. It sits below every other
//! crate (it depends on none of them, only on serde), so a decoder, the statistics, the
//! output writers, the figures and the HTTP API count, classify and write time with the same
//! types and the same text, and the outputs that are tables are made once as typed rows
//! ([`table`]) that every format renders.
//!
//! What it guarantees: plain data (no I/O, no clock, no allocation on the counting path), and
//! text that round-trips: [`time::seconds_9`] is read back exactly by
//! [`time::parse_seconds_9`], the names of [`Net`] and [`Proto`] by their `from_name`.
//!
//! ```
//! use sonde_types::{time, Net, Traffic};
//! let mut t = Traffic::default();
//! t.add(1500);
//! assert_eq!((t.packets, t.bytes), (1, 1500));
//! assert_eq!(Net::of(false, true).name(), "in");
//! assert_eq!(time::seconds_6(1_700_000_000_123_456_789), "1700000000.123456");
//! assert_eq!(time::utc(0), "1970-01-01 00:00:00 UTC");
//! ```
#![forbid(unsafe_code)]

pub mod class;
pub mod definition;
pub mod table;
pub mod text;
pub mod time;
pub mod traffic;

pub use class::{Net, Proto};
pub use definition::{DefinitionEntry, DefinitionSummary};
pub use traffic::{Traffic, TrafficRow};

/// Makes a newtype over a message (`struct E(String)`) an error: `Display` writes the message
/// as it is, and it is a `std::error::Error`. The errors whose whole content is a sentence for
/// the user (a config file's line, a setting, an undecodable message) share this shape.
#[macro_export]
macro_rules! message_error {
    ($name:ident) => {
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::error::Error for $name {}
    };
}
