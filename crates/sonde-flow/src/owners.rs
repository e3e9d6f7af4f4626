//! Who an address belongs to: its country and autonomous system, as the databases a run was
//! given say (`--geoip`, `--asn`; sonde-owners reads MaxMind's). A flow's two owners are looked
//! up once, when its record is made, through a per-tracker cache: a flow log shows them, the
//! per-packet path never sees them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// An address's owner. Every part is optional: a database may not know the address, or not
/// have been given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// ISO 3166-1 alpha-2 code, two ASCII capitals.
    pub country: Option<[u8; 2]>,
    /// Autonomous system number.
    pub asn: Option<u32>,
    /// The autonomous system's organisation, as the database spells it.
    pub as_org: Option<Arc<str>>,
}

impl Owner {
    /// The country code as text.
    pub fn country_code(&self) -> Option<&str> {
        self.country.as_ref().and_then(|c| std::str::from_utf8(c).ok())
    }
}

/// The owners of a flow's two ends: client, server.
pub type FlowOwners = [Owner; 2];

/// Looks up addresses. Shared by every worker (`Send + Sync`); lookups are pure, so a flow's
/// owners do not depend on which worker asked or when.
pub trait Owners: Send + Sync + std::fmt::Debug {
    fn owner(&self, ip: IpAddr) -> Owner;
}

/// What a tracker's cache of owners did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerStats {
    /// Addresses asked for.
    pub lookups: u64,
    /// Of them, answered from the cache.
    pub cached: u64,
    /// Times the cache was full and emptied.
    pub cache_resets: u64,
}

impl OwnerStats {
    pub fn add(&mut self, o: &OwnerStats) {
        self.lookups += o.lookups;
        self.cached += o.cached;
        self.cache_resets += o.cache_resets;
    }
}

/// A tracker's owners source with a bounded cache in front of it: an address's owner is
/// looked up in the databases once while it stays in the cache. At `limit` addresses the
/// cache is emptied and fills again (counted in `cache_resets`): the memory stays bounded and
/// busy addresses come back at once.
#[derive(Debug)]
pub(crate) struct OwnerCache {
    source: Arc<dyn Owners>,
    cache: HashMap<IpAddr, Owner, rustc_hash::FxBuildHasher>,
    limit: usize,
    pub stats: OwnerStats,
}

impl OwnerCache {
    pub fn new(source: Arc<dyn Owners>, limit: usize) -> OwnerCache {
        OwnerCache { source, cache: HashMap::default(), limit: limit.max(1), stats: OwnerStats::default() }
    }

    pub fn owner(&mut self, ip: IpAddr) -> Owner {
        self.stats.lookups += 1;
        if let Some(owner) = self.cache.get(&ip) {
            self.stats.cached += 1;
            return owner.clone();
        }
        let owner = self.source.owner(ip);
        if self.cache.len() >= self.limit {
            self.cache.clear();
            self.stats.cache_resets += 1;
        }
        self.cache.insert(ip, owner.clone());
        owner
    }

    pub fn pair(&mut self, client: IpAddr, server: IpAddr) -> Box<FlowOwners> {
        Box::new([self.owner(client), self.owner(server)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug, Default)]
    struct Counting(AtomicU64);

    impl Owners for Counting {
        fn owner(&self, ip: IpAddr) -> Owner {
            self.0.fetch_add(1, Ordering::Relaxed);
            let last = match ip {
                IpAddr::V4(a) => a.octets()[3],
                IpAddr::V6(a) => a.octets()[15],
            };
            Owner { country: Some(*b"SE"), asn: Some(u32::from(last)), as_org: None }
        }
    }

    #[test]
    fn the_cache_answers_again_and_stays_within_its_limit() {
        let source = Arc::new(Counting::default());
        let mut cache = OwnerCache::new(source.clone(), 2);
        let ip = |n: u8| IpAddr::from([192, 0, 2, n]);
        assert_eq!(cache.owner(ip(1)).asn, Some(1));
        assert_eq!(cache.owner(ip(1)).asn, Some(1));
        assert_eq!(source.0.load(Ordering::Relaxed), 1, "the second answer came from the cache");
        cache.owner(ip(2));
        assert_eq!(cache.cache.len(), 2);
        // Full: the third address empties the cache first.
        assert_eq!(cache.owner(ip(3)).asn, Some(3));
        assert_eq!(cache.cache.len(), 1);
        assert_eq!(cache.stats, OwnerStats { lookups: 4, cached: 1, cache_resets: 1 });
        assert_eq!(cache.owner(ip(1)).country_code(), Some("SE"));
        assert_eq!(source.0.load(Ordering::Relaxed), 4);
    }
}
