//! Memory per DN-Hunter entry (issue 33: at most 200 bytes), measured with a counting global
//! allocator: every heap byte a full cache holds (its ring, its index, the answers and their
//! names) divided by its entries. The answers are the common case: a response with one A
//! record for a name of 20 characters (`host-00001.example.com`), each to another client, so
//! that no two entries share an answer (the cache's worst case: a response with several
//! addresses shares its answer between their entries).
//! `SONDE_MEMORY_ENTRIES=1000000 cargo test -p sonde-l7 --release --test memory -- --nocapture`
//! measures other sizes.

use std::net::IpAddr;
use std::sync::Arc;

use sonde_l7::{dns_response_addresses, DnsCache, Resolved};

#[global_allocator]
static ALLOC: sonde_heap::Counting = sonde_heap::Counting;

/// A response for `host-NNNNN.example.com` A with one address.
fn response(i: u32, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(b"\x12\x34\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00");
    let label = format!("host-{:05}", i % 100_000);
    buf.push(label.len() as u8);
    buf.extend_from_slice(label.as_bytes());
    buf.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    buf.extend_from_slice(b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04");
    buf.extend_from_slice(&(0x5db8_0000 | i).to_be_bytes());
}

/// Heap bytes per entry of a cache of `entries` filled with as many answers, and the entries
/// it held.
fn bytes_per_entry(entries: u32) -> (f64, usize) {
    let before = sonde_heap::live_bytes();
    let mut cache = DnsCache::new(entries as usize);
    let resolver: IpAddr = "192.0.2.53".parse().unwrap();
    let mut buf = Vec::with_capacity(128);
    let mut evicted = 0;
    for i in 0..entries {
        response(i, &mut buf);
        let client = IpAddr::from((0x0a00_0000 | i).to_be_bytes());
        let (name, addresses) = dns_response_addresses(&buf).expect("a response");
        let resolved =
            Arc::new(Resolved { name: name.into_boxed_str(), resolver, answer_ns: u64::from(i), query_ns: 0 });
        for address in addresses {
            evicted += u32::from(cache.insert(client, address, Arc::clone(&resolved)));
        }
    }
    drop(buf);
    assert_eq!(evicted, 0);
    let held = sonde_heap::live_bytes() - before;
    let live = cache.len();
    let last = IpAddr::from((0x0a00_0000 | (entries - 1)).to_be_bytes());
    let address = IpAddr::from((0x5db8_0000 | (entries - 1)).to_be_bytes());
    assert_eq!(cache.lookup(last, address).map(|r| r.name.len()), Some(22));
    (held as f64 / live as f64, live)
}

/// The bound this layout keeps: 141 B per entry at 100 k (a 48-byte slot, the index's 4-byte
/// slot numbers and control bytes, the shared answer: 64 bytes in its `Arc` and the name at its
/// length); 144 at 1 M. Before the ring (a map of (client, address) → (answer, insertion
/// number) and a queue of insertion numbers for the order) it was 242 B at 100 k and 274 at
/// 1 M. One test function, so that no other test allocates while the counter is read.
#[test]
fn bytes_per_dn_hunter_entry_stay_under_the_bound() {
    let entries = std::env::var("SONDE_MEMORY_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let (per_entry, live) = bytes_per_entry(entries);
    println!("{live} DN-Hunter entries: {per_entry:.0} B/entry");
    assert_eq!(live, entries as usize);
    assert!(per_entry <= 150.0, "{per_entry:.0} bytes per entry");
}
