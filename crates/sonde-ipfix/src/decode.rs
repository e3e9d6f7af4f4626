//! A small IPFIX reader: enough to check what the encoder wrote (tests, `--ipfix FILE`), not a
//! collector. It checks every length it reads and returns an error, never panics, on bad input.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::encoder::{HEADER_LEN, SET_HEADER_LEN, TEMPLATE_SET_ID, VERSION};

/// A message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub length: u16,
    pub export_s: u32,
    pub sequence: u32,
    pub domain: u32,
}

/// A data record: its template and each element's bytes, keyed by (enterprise number, id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRecord {
    pub template: u16,
    pub fields: Vec<((u32, u16), Vec<u8>)>,
}

impl DataRecord {
    pub fn bytes(&self, pen: u32, id: u16) -> Option<&[u8]> {
        self.fields.iter().find(|(k, _)| *k == (pen, id)).map(|(_, v)| v.as_slice())
    }

    /// An unsigned element's value.
    pub fn uint(&self, pen: u32, id: u16) -> Option<u64> {
        let b = self.bytes(pen, id)?;
        (b.len() <= 8).then(|| b.iter().fold(0u64, |v, &x| v << 8 | u64::from(x)))
    }

    /// An address element (4 or 16 bytes).
    pub fn addr(&self, id: u16) -> Option<IpAddr> {
        let b = self.bytes(0, id)?;
        match b.len() {
            4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(b).ok()?))),
            16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?))),
            _ => None,
        }
    }
}

/// A message read: header, template set ids defined in it, data records.
#[derive(Debug, Clone)]
pub struct Message {
    pub header: Header,
    pub templates: Vec<u16>,
    /// Lengths of every set, in order (headers included).
    pub set_lengths: Vec<usize>,
    pub records: Vec<DataRecord>,
}

/// Keeps the templates of one stream (one observation domain).
#[derive(Debug, Default)]
pub struct Decoder {
    templates: HashMap<u16, Vec<(u32, u16, u16)>>,
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, String> {
    b.get(at..at + 2).map(|x| u16::from_be_bytes([x[0], x[1]])).ok_or_else(|| format!("truncated at byte {at}"))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
    b.get(at..at + 4)
        .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
        .ok_or_else(|| format!("truncated at byte {at}"))
}

/// A message that does not read as IPFIX (or as what this reader handles): the message says
/// where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

sonde_types::message_error!(DecodeError);

/// Splits a stream of messages (a file, a TCP stream) by their length fields.
pub fn split_stream(bytes: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    split(bytes).map_err(DecodeError)
}

fn split(mut bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut msgs = Vec::new();
    while !bytes.is_empty() {
        let len = usize::from(u16_at(bytes, 2)?);
        if len < HEADER_LEN || len > bytes.len() {
            return Err(format!("message length {len} with {} bytes left", bytes.len()));
        }
        msgs.push(&bytes[..len]);
        bytes = &bytes[len..];
    }
    Ok(msgs)
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Reads one whole message.
    pub fn message(&mut self, b: &[u8]) -> Result<Message, DecodeError> {
        self.read(b).map_err(DecodeError)
    }

    fn read(&mut self, b: &[u8]) -> Result<Message, String> {
        if u16_at(b, 0)? != VERSION {
            return Err(format!("version {} is not IPFIX", u16_at(b, 0)?));
        }
        let header =
            Header { length: u16_at(b, 2)?, export_s: u32_at(b, 4)?, sequence: u32_at(b, 8)?, domain: u32_at(b, 12)? };
        if usize::from(header.length) != b.len() {
            return Err(format!("header says {} bytes, the message has {}", header.length, b.len()));
        }
        let mut msg = Message { header, templates: Vec::new(), set_lengths: Vec::new(), records: Vec::new() };
        let mut at = HEADER_LEN;
        while at < b.len() {
            let (set_id, set_len) = (u16_at(b, at)?, usize::from(u16_at(b, at + 2)?));
            if set_len < SET_HEADER_LEN || at + set_len > b.len() {
                return Err(format!("set of {set_len} bytes at byte {at} in a message of {}", b.len()));
            }
            msg.set_lengths.push(set_len);
            let body = &b[at + SET_HEADER_LEN..at + set_len];
            match set_id {
                TEMPLATE_SET_ID => msg.templates.extend(self.template_set(body)?),
                id if id >= 256 => msg.records.extend(self.data_set(id, body)?),
                id => return Err(format!("set id {id} is not handled")),
            }
            at += set_len;
        }
        Ok(msg)
    }

    fn template_set(&mut self, b: &[u8]) -> Result<Vec<u16>, String> {
        let mut ids = Vec::new();
        let mut at = 0;
        // Fewer than 4 bytes left: padding.
        while at + 4 <= b.len() {
            let (id, count) = (u16_at(b, at)?, u16_at(b, at + 2)?);
            at += 4;
            let mut fields = Vec::new();
            for _ in 0..count {
                let (raw, len) = (u16_at(b, at)?, u16_at(b, at + 2)?);
                at += 4;
                let pen = if raw & 0x8000 != 0 {
                    at += 4;
                    u32_at(b, at - 4)?
                } else {
                    0
                };
                if len == 0xffff {
                    return Err("variable-length elements are not handled".into());
                }
                fields.push((pen, raw & 0x7fff, len));
            }
            self.templates.insert(id, fields);
            ids.push(id);
        }
        Ok(ids)
    }

    fn data_set(&self, id: u16, b: &[u8]) -> Result<Vec<DataRecord>, String> {
        let fields = self.templates.get(&id).ok_or_else(|| format!("data set {id} before its template"))?;
        let len: usize = fields.iter().map(|f| usize::from(f.2)).sum();
        if len == 0 {
            return Err(format!("template {id} has no field"));
        }
        let mut records = Vec::new();
        let mut at = 0;
        while at + len <= b.len() {
            let mut rec = DataRecord { template: id, fields: Vec::with_capacity(fields.len()) };
            for &(pen, fid, flen) in fields {
                rec.fields.push(((pen, fid), b[at..at + usize::from(flen)].to_vec()));
                at += usize::from(flen);
            }
            records.push(rec);
        }
        Ok(records)
    }
}
