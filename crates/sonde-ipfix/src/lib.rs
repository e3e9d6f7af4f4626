//! IPFIX export of sonde's flow records (RFC 7011): biflow records (RFC 5103) with IANA's
//! elements for what IANA defines and sonde's TCP metrics as enterprise-specific elements
//! ([`elements`]), built into messages within an MTU ([`encoder`]) and sent by one exporting
//! thread over UDP, TCP or to a file (RFC 5655) ([`export`]). docs/ipfix.md lists every element.

pub mod decode;
pub mod elements;
pub mod encoder;
pub mod export;

pub use decode::DecodeError;
pub use elements::{REVERSE_PEN, SONDE_PEN};
pub use encoder::{Encoder, EncoderConfig};
pub use export::{Error, ExportOptions, ExportSink, ExportStats, Exporter, FullQueue, LiveStats, Target};
