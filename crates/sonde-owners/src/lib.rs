//! sonde-owners: who an address belongs to, from MaxMind DB files (GeoIP2 / GeoLite2 Country
//! or City for the country, GeoLite2 ASN for the autonomous system), for the flow logs'
//! `c_country`, `s_country`, `c_asn`, `s_asn`, `c_as_org` and `s_as_org` (docs/owners.md).
//!
//! A database is read into memory and checked whole when it is opened ([`maxminddb::Reader::verify`]:
//! its search tree, every pointer and value), so a damaged file is refused before the run
//! starts rather than answered wrongly in the middle of it; its kind is checked too (a City
//! database given as `--asn` is refused). Lookups are pure: the flow layer caches them per
//! worker ([`sonde_flow::Owners`]).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use maxminddb::{geoip2, PathElement, Reader};
use sonde_flow::{Owner, Owners};

/// Why a database cannot be used: one sentence naming the file.
#[derive(Debug)]
pub struct Error(pub String);

sonde_types::message_error!(Error);

/// What a database is for: the country (`--geoip`) or the autonomous system (`--asn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Country,
    Asn,
}

impl Use {
    fn flag(self) -> &'static str {
        match self {
            Use::Country => "--geoip",
            Use::Asn => "--asn",
        }
    }

    /// Whether a database of `kind` (its metadata's `database_type`) has what this use reads.
    fn accepts(self, kind: &str) -> bool {
        match self {
            // GeoIP2-Country, GeoIP2-City, GeoLite2-*, GeoIP2-Enterprise, DBIP-*-Lite …: every
            // database with `country` records says "Country", "City" or "Enterprise".
            Use::Country => ["Country", "City", "Enterprise"].iter().any(|k| kind.contains(k)),
            Use::Asn => kind.contains("ASN") || kind.contains("ISP"),
        }
    }
}

/// Reads the database at `path`, checked whole and of the kind `usage` reads.
fn open(path: &Path, usage: Use) -> Result<Reader<Vec<u8>>, Error> {
    let fail = |why: String| Error(format!("{}: {why}", path.display()));
    let reader = Reader::open_readfile(path).map_err(|e| fail(format!("not a MaxMind DB file ({e})")))?;
    reader.verify().map_err(|e| fail(format!("damaged MaxMind DB file ({e})")))?;
    let kind = &reader.metadata().database_type;
    if !usage.accepts(kind) {
        return Err(fail(format!(
            "a {kind} database has no {} for {}",
            match usage {
                Use::Country => "countries",
                Use::Asn => "autonomous systems",
            },
            usage.flag()
        )));
    }
    Ok(reader)
}

/// The databases a run was given, as one [`Owners`] source.
#[derive(Debug, Default)]
pub struct MaxMind {
    country: Option<Reader<Vec<u8>>>,
    asn: Option<Reader<Vec<u8>>>,
}

impl MaxMind {
    /// Opens the databases given; `None` when neither was.
    pub fn open(country: Option<&Path>, asn: Option<&Path>) -> Result<Option<Arc<MaxMind>>, Error> {
        if country.is_none() && asn.is_none() {
            return Ok(None);
        }
        Ok(Some(Arc::new(MaxMind {
            country: country.map(|p| open(p, Use::Country)).transpose()?,
            asn: asn.map(|p| open(p, Use::Asn)).transpose()?,
        })))
    }

    /// The country of `ip`: where the database places it, else where its block is registered.
    fn country(&self, ip: IpAddr) -> Option<[u8; 2]> {
        let lookup = self.country.as_ref()?.lookup(ip).ok()?;
        let code = |field: &'static str| -> Option<[u8; 2]> {
            let code: Option<&str> =
                lookup.decode_path(&[PathElement::Key(field), PathElement::Key("iso_code")]).ok().flatten();
            match code?.as_bytes() {
                &[a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => Some([a, b]),
                _ => None,
            }
        };
        code("country").or_else(|| code("registered_country"))
    }

    fn asn(&self, ip: IpAddr) -> (Option<u32>, Option<Arc<str>>) {
        let Some(db) = &self.asn else { return (None, None) };
        match db.lookup(ip).ok().and_then(|l| l.decode::<geoip2::Asn>().ok().flatten()) {
            Some(a) => (a.autonomous_system_number, a.autonomous_system_organization.map(Arc::from)),
            None => (None, None),
        }
    }
}

impl Owners for MaxMind {
    fn owner(&self, ip: IpAddr) -> Owner {
        let (asn, as_org) = self.asn(ip);
        Owner { country: self.country(ip), asn, as_org }
    }
}
