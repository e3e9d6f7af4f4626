//! IPFIX messages (RFC 7011 §3) from flow records: a 16-byte header, then sets. Records of one
//! template that follow each other share a data set; a message closes when the next record
//! would take it past the MTU. Sonde's records have fixed lengths, so sets need no padding and
//! none is added.

use sonde_flow::{FlowRecord, IcmpRecord};

use crate::elements::{self, Record, Template};

pub const VERSION: u16 = 10;
pub const HEADER_LEN: usize = 16;
pub const SET_HEADER_LEN: usize = 4;
pub const TEMPLATE_SET_ID: u16 = 2;

/// How messages are made.
#[derive(Debug, Clone)]
pub struct EncoderConfig {
    /// Observation domain id, in every message header.
    pub domain: u32,
    /// Largest message in bytes (UDP: the path MTU less the IP and UDP headers).
    pub mtu: usize,
    /// Re-send the templates before the data message that follows this many messages since they
    /// were last sent (UDP; `None`: once, at the start).
    pub refresh_messages: Option<u64>,
    /// … or once this much packet time (ns of the records' end times) has passed.
    pub refresh_ns: Option<u64>,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig { domain: 1, mtu: 1400, refresh_messages: Some(4096), refresh_ns: Some(600_000_000_000) }
    }
}

/// Builds the message stream of one observation domain.
pub struct Encoder {
    cfg: EncoderConfig,
    templates: Vec<Template>,
    /// Data records in the messages finished so far (the next message's sequence number,
    /// modulo 2^32).
    records_done: u64,
    /// The message being filled: header space reserved, sets appended.
    msg: Vec<u8>,
    /// Records in `msg`.
    msg_records: u64,
    /// The open data set in `msg`: its template id and where its header starts.
    set: Option<(u16, usize)>,
    /// Latest record end time seen, ns: the export time (packet time, never the wall clock).
    clock_ns: u64,
    /// Messages finished since the templates were last sent, and the packet time they were sent
    /// at; `None`: not sent yet.
    since_templates: Option<(u64, u64)>,
}

impl Encoder {
    /// Fails when the MTU cannot hold a template or a single data record.
    pub fn new(cfg: EncoderConfig) -> Result<Encoder, crate::Error> {
        let templates = elements::templates();
        let need =
            templates.iter().map(|t| t.spec_len().max(t.record_len)).max().unwrap_or(0) + HEADER_LEN + SET_HEADER_LEN;
        if cfg.mtu < need || cfg.mtu > usize::from(u16::MAX) {
            let refused = format!("the IPFIX message size must be from {need} to 65535 bytes, not {}", cfg.mtu);
            return Err(crate::Error::Settings(refused));
        }
        Ok(Encoder {
            cfg,
            templates,
            records_done: 0,
            msg: Vec::new(),
            msg_records: 0,
            set: None,
            clock_ns: 0,
            since_templates: None,
        })
    }

    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// Data records in the messages finished so far.
    pub fn records(&self) -> u64 {
        self.records_done
    }

    /// Adds `r`; messages it completes (templates first when due) are appended to `out`.
    pub fn push(&mut self, r: &FlowRecord, out: &mut Vec<Vec<u8>>) {
        self.push_record(Record::Flow(r), out);
    }

    /// Adds an ICMP entry's record, as [`Encoder::push`] a flow's.
    pub fn push_icmp(&mut self, r: &IcmpRecord, out: &mut Vec<Vec<u8>>) {
        self.push_record(Record::Icmp(r), out);
    }

    fn push_record(&mut self, r: Record<'_>, out: &mut Vec<Vec<u8>>) {
        // The export time is packet time: the latest end seen, this record's included.
        self.clock_ns = self.clock_ns.max(r.last_ns());
        let (tid, addrs) = elements::template_for(r);
        let Some(t) = self.templates.iter().position(|t| t.id == tid) else { return };
        let len = self.templates[t].record_len;
        let new_set = self.set.map(|(id, _)| id) != Some(tid);
        if !self.msg.is_empty() && self.msg.len() + len + if new_set { SET_HEADER_LEN } else { 0 } > self.cfg.mtu {
            self.flush(out);
        }
        if self.msg.is_empty() {
            // Templates go out before the first data message, and again when due.
            if self.templates_due() {
                let seq = self.records_done;
                out.extend(self.template_messages(seq));
                self.since_templates = Some((0, self.clock_ns));
            }
            self.msg.resize(HEADER_LEN, 0);
        }
        if self.set.map(|(id, _)| id) != Some(tid) {
            self.close_set();
            self.set = Some((tid, self.msg.len()));
            self.msg.extend_from_slice(&tid.to_be_bytes());
            self.msg.extend_from_slice(&[0, 0]);
        }
        elements::write_record(&self.templates[t], r, addrs, &mut self.msg);
        self.msg_records += 1;
    }

    /// Finishes the message being filled, if any, into `out`.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        if self.msg.is_empty() {
            return;
        }
        self.close_set();
        let mut msg = std::mem::take(&mut self.msg);
        self.header(&mut msg, self.records_done);
        out.push(msg);
        self.records_done += self.msg_records;
        self.msg_records = 0;
        if let Some((n, _)) = self.since_templates.as_mut() {
            *n += 1;
        }
    }

    /// Every template, in as few messages as the MTU allows, each with sequence number `seq`
    /// (template messages carry no data records, so the next data message has the same).
    pub fn template_messages(&self, seq: u64) -> Vec<Vec<u8>> {
        let mut msgs = Vec::new();
        let mut msg: Vec<u8> = Vec::new();
        for t in &self.templates {
            if !msg.is_empty() && msg.len() + t.spec_len() > self.cfg.mtu {
                msgs.push(self.finish_template_message(msg, seq));
                msg = Vec::new();
            }
            if msg.is_empty() {
                msg.resize(HEADER_LEN, 0);
                msg.extend_from_slice(&TEMPLATE_SET_ID.to_be_bytes());
                msg.extend_from_slice(&[0, 0]);
            }
            msg.extend_from_slice(&t.id.to_be_bytes());
            msg.extend_from_slice(&(t.elements.len() as u16).to_be_bytes());
            for e in &t.elements {
                let id = if e.pen == 0 { e.id } else { e.id | 0x8000 };
                msg.extend_from_slice(&id.to_be_bytes());
                msg.extend_from_slice(&e.len.to_be_bytes());
                if e.pen != 0 {
                    msg.extend_from_slice(&e.pen.to_be_bytes());
                }
            }
        }
        if !msg.is_empty() {
            msgs.push(self.finish_template_message(msg, seq));
        }
        msgs
    }

    fn finish_template_message(&self, mut msg: Vec<u8>, seq: u64) -> Vec<u8> {
        let set_len = (msg.len() - HEADER_LEN) as u16;
        msg[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&set_len.to_be_bytes());
        self.header(&mut msg, seq);
        msg
    }

    fn templates_due(&self) -> bool {
        match self.since_templates {
            None => true,
            Some((messages, at_ns)) => {
                self.cfg.refresh_messages.is_some_and(|n| messages >= n)
                    || self.cfg.refresh_ns.is_some_and(|t| self.clock_ns.saturating_sub(at_ns) >= t)
            }
        }
    }

    fn close_set(&mut self) {
        if let Some((_, start)) = self.set.take() {
            let len = (self.msg.len() - start) as u16;
            self.msg[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    /// Writes the message header into the first 16 bytes of `msg`.
    fn header(&self, msg: &mut [u8], seq: u64) {
        let export_s = u32::try_from(self.clock_ns / 1_000_000_000).unwrap_or(u32::MAX);
        let len = msg.len() as u16;
        msg[0..2].copy_from_slice(&VERSION.to_be_bytes());
        msg[2..4].copy_from_slice(&len.to_be_bytes());
        msg[4..8].copy_from_slice(&export_s.to_be_bytes());
        // RFC 7011: the sequence number is modulo 2^32.
        msg[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
        msg[12..16].copy_from_slice(&self.cfg.domain.to_be_bytes());
    }
}

/// A message's sequence number field.
pub fn sequence_of(msg: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(msg.get(8..12)?.try_into().ok()?))
}

/// Whether `msg` holds templates (its first set is a template set).
pub fn is_template_message(msg: &[u8]) -> bool {
    msg.get(16..18) == Some(&TEMPLATE_SET_ID.to_be_bytes()[..])
}
