//! Flow records as typed Arrow rows: each worker's sink appends every record as the flow ends
//! to one builder per column, in the worker's thread.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, DurationNanosecondBuilder, StringDictionaryBuilder, TimestampNanosecondBuilder,
    UInt32Array, UInt64Builder,
};
use arrow::compute::{cast, concat_batches, take_record_batch};
use arrow::datatypes::{DataType, Int32Type, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use sonde_anon::Anonymizer;
use sonde_flow::{FlowRecord, FlowSink, RttSample, TcpRecord, UdpRecord};
use sonde_output::{
    anonymized_record, ip_text, mark_anonymized, order_key, tcp_columns, udp_columns, Column, Kind, OrderKey, Value,
};

use crate::schema::{tcp_schema, udp_schema};

/// Where an address is spelled out.
type Scratch = sonde_output::IpBuf;

/// Which flow log a batch belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// Rows of one flow log, in the order the flows ended.
#[derive(Debug, Clone)]
pub struct FlowBatch {
    pub protocol: Protocol,
    pub batch: RecordBatch,
}

/// One column's values so far.
enum Builder {
    Count(UInt64Builder),
    Text(StringDictionaryBuilder<Int32Type>),
    Flag(BooleanBuilder),
    Time(TimestampNanosecondBuilder),
    Duration(DurationNanosecondBuilder),
}

impl Builder {
    fn new(kind: Kind) -> Builder {
        match kind {
            Kind::Count => Builder::Count(UInt64Builder::new()),
            Kind::Address | Kind::Label => Builder::Text(StringDictionaryBuilder::new()),
            Kind::Flag => Builder::Flag(BooleanBuilder::new()),
            Kind::Time => Builder::Time(TimestampNanosecondBuilder::new().with_timezone("UTC")),
            Kind::Duration => Builder::Duration(DurationNanosecondBuilder::new()),
        }
    }

    /// Appends `value`; `scratch` is where an address is spelled out.
    #[inline]
    fn push(&mut self, value: Value, scratch: &mut Scratch) {
        match (self, value) {
            (Builder::Count(b), Value::Int(n)) => b.append_value(n),
            // ns since the epoch fit an i64 until 2262.
            (Builder::Time(b), Value::Ms(ns)) => b.append_value(ns as i64),
            (Builder::Duration(b), Value::Ms(ns)) => b.append_value(ns as i64),
            (Builder::Flag(b), Value::Bool(v)) => b.append_value(v),
            (Builder::Text(b), Value::Text(s)) => b.append_value(s),
            (Builder::Text(b), Value::Ip(ip)) => b.append_value(ip_text(ip, scratch)),
            (b, v) => {
                // Only "no value" and "no sample" reach here: a column whose kind does not
                // match its values is a bug the tests catch.
                debug_assert!(matches!(v, Value::Missing | Value::NoSample), "{v:?} in a column of another kind");
                b.append_null();
            }
        }
    }

    fn append_null(&mut self) {
        match self {
            Builder::Count(b) => b.append_null(),
            Builder::Text(b) => b.append_null(),
            Builder::Flag(b) => b.append_null(),
            Builder::Time(b) => b.append_null(),
            Builder::Duration(b) => b.append_null(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Count(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Flag(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::Duration(b) => Arc::new(b.finish()),
        }
    }
}

/// The rows of one flow log being built, with each row's output order.
struct Rows<R> {
    schema: SchemaRef,
    columns: Vec<Column<R>>,
    builders: Vec<Builder>,
    keys: Vec<OrderKey>,
}

impl<R> Rows<R> {
    fn new(schema: SchemaRef, columns: Vec<Column<R>>) -> Rows<R> {
        let builders = columns.iter().map(|c| Builder::new(c.kind)).collect();
        Rows { schema, columns, builders, keys: Vec::new() }
    }

    fn push(&mut self, key: OrderKey, record: &R, scratch: &mut Scratch) {
        for (column, builder) in self.columns.iter().zip(&mut self.builders) {
            builder.push((column.value)(record), scratch);
        }
        self.keys.push(key);
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    /// The rows so far as a batch (the builders start again, empty).
    fn finish(&mut self) -> Keyed {
        let columns = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), columns).expect("each builder gives its column's type");
        Keyed { keys: std::mem::take(&mut self.keys), batch }
    }
}

/// A batch and each row's output order.
#[derive(Debug)]
struct Keyed {
    keys: Vec<OrderKey>,
    batch: RecordBatch,
}

/// Both flow logs' rows of one worker.
struct Logs {
    tcp: Rows<TcpRecord>,
    udp: Rows<UdpRecord>,
    anon: Option<Anonymizer>,
    scratch: Scratch,
}

impl Logs {
    fn new(anon: Option<Anonymizer>) -> Logs {
        let (tcp, udp) = match anon {
            Some(_) => (mark_anonymized(tcp_columns()), mark_anonymized(udp_columns())),
            None => (tcp_columns(), udp_columns()),
        };
        Logs {
            tcp: Rows::new(tcp_schema(), tcp),
            udp: Rows::new(udp_schema(), udp),
            anon,
            scratch: [0; std::mem::size_of::<Scratch>()],
        }
    }

    /// Appends `record`; says which log took it.
    fn push(&mut self, record: &FlowRecord) -> Protocol {
        let shown;
        let record = match self.anon.as_mut() {
            Some(anon) => {
                shown = anonymized_record(record, anon);
                &shown
            }
            None => record,
        };
        let key = order_key(record);
        match record {
            FlowRecord::Tcp(t) => {
                self.tcp.push(key, t, &mut self.scratch);
                Protocol::Tcp
            }
            FlowRecord::Udp(u) => {
                self.udp.push(key, u, &mut self.scratch);
                Protocol::Udp
            }
        }
    }
}

/// A worker's sink of typed flow rows ([`sonde_engine::WorkerSink`]): the parts of all workers
/// make [`FlowTables`] in the order of the TSV logs.
pub struct ArrowSink {
    logs: Logs,
}

impl Default for ArrowSink {
    fn default() -> Self {
        ArrowSink::new()
    }
}

impl ArrowSink {
    pub fn new() -> ArrowSink {
        ArrowSink { logs: Logs::new(None) }
    }

    /// Shows every address through `anon` (with `*_iscrypto` set), as the TSV logs do.
    pub fn anonymized(self, anon: Option<Anonymizer>) -> ArrowSink {
        ArrowSink { logs: Logs::new(anon) }
    }
}

impl FlowSink for ArrowSink {
    fn flow(&mut self, record: &FlowRecord) {
        self.logs.push(record);
    }
    /// The logs hold each record's RTT summary, not its samples.
    fn rtt_sample(&mut self, _: &RttSample) {}
}

impl sonde_engine::WorkerSink for ArrowSink {
    type Part = FlowBatches;
    fn take(&mut self) -> FlowBatches {
        let mut part = FlowBatches::default();
        if self.logs.tcp.len() > 0 {
            part.tcp.push(self.logs.tcp.finish());
        }
        if self.logs.udp.len() > 0 {
            part.udp.push(self.logs.udp.finish());
        }
        part
    }
}

/// What the workers' sinks handed over: batches of rows with their output order.
#[derive(Debug, Default)]
pub struct FlowBatches {
    tcp: Vec<Keyed>,
    udp: Vec<Keyed>,
}

/// The flow logs as two tables, in the TSV logs' order (flow start, then protocol and tuple).
#[derive(Debug, Clone)]
pub struct FlowTables {
    pub tcp: RecordBatch,
    pub udp: RecordBatch,
}

impl sonde_engine::Part for FlowBatches {
    fn absorb(&mut self, other: FlowBatches) {
        self.tcp.extend(other.tcp);
        self.udp.extend(other.udp);
    }
    fn is_empty(&self) -> bool {
        self.tcp.is_empty() && self.udp.is_empty()
    }
}

impl FlowBatches {
    /// Rows handed over so far.
    pub fn len(&self) -> usize {
        self.tcp.iter().chain(&self.udp).map(|k| k.keys.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Both logs, each one table sorted into the output order: the same rows in the same order
    /// whatever the number of workers.
    pub fn into_tables(self) -> Result<FlowTables, ArrowError> {
        Ok(FlowTables { tcp: sorted(tcp_schema(), self.tcp)?, udp: sorted(udp_schema(), self.udp)? })
    }
}

fn sorted(schema: SchemaRef, parts: Vec<Keyed>) -> Result<RecordBatch, ArrowError> {
    let mut order: Vec<(OrderKey, u32)> = Vec::with_capacity(parts.iter().map(|k| k.keys.len()).sum());
    let mut batches = Vec::with_capacity(parts.len());
    for part in parts {
        let base = order.len();
        let row = |i: usize| u32::try_from(base + i).map_err(|_| ArrowError::ComputeError("over 4G rows".into()));
        for (i, key) in part.keys.into_iter().enumerate() {
            order.push((key, row(i)?));
        }
        batches.push(part.batch);
    }
    // Equal keys (the same tuple starting and ending at the same instants with the same
    // packet counts) are practically impossible; the sort is stable for them all the same.
    order.sort_by_key(|&(key, _)| key);
    // The anonymised logs mark `*_iscrypto`: their batches carry the schema they were built with.
    let schema = batches.first().map_or(schema, |b| b.schema());
    let several = batches.len() > 1;
    let all = concat_batches(&schema, &batches)?;
    let indices = UInt32Array::from_iter_values(order.into_iter().map(|(_, i)| i));
    let table = take_record_batch(&all, &indices)?;
    if several {
        unique_dictionaries(table)
    } else {
        Ok(table)
    }
}

/// Concatenated dictionary columns hold each part's dictionary one after the other, so a value
/// may appear in the dictionary twice (pandas refuses such a column as a Categorical): each is
/// encoded again, its dictionary unique.
fn unique_dictionaries(batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Dictionary(_, values) => cast(&cast(column, values)?, column.data_type()),
            _ => Ok(column.clone()),
        })
        .collect::<Result<Vec<ArrayRef>, ArrowError>>()?;
    RecordBatch::try_new(batch.schema(), columns)
}

/// A worker's sink that hands typed rows over as flows end ([`sonde_engine::WorkerSink`]):
/// a batch every `rows` flows of a log, and what is left at each drain and at the end. Its
/// parts are always empty. Memory stays bounded by `rows` per worker and the channel's bound.
/// The batches come in the order flows ended (with several workers, interleaved as they run).
pub struct StreamSink {
    logs: Logs,
    tx: SyncSender<FlowBatch>,
    rows: usize,
}

impl StreamSink {
    pub fn new(tx: SyncSender<FlowBatch>, rows: usize) -> StreamSink {
        StreamSink { logs: Logs::new(None), tx, rows: rows.max(1) }
    }

    /// Shows every address through `anon`, as [`ArrowSink::anonymized`].
    pub fn anonymized(self, anon: Option<Anonymizer>) -> StreamSink {
        StreamSink { logs: Logs::new(anon), ..self }
    }

    fn send(&mut self, protocol: Protocol) {
        let rows = match protocol {
            Protocol::Tcp => self.logs.tcp.finish(),
            Protocol::Udp => self.logs.udp.finish(),
        };
        // A receiver that went away wants no more rows: they are dropped.
        let _ = self.tx.send(FlowBatch { protocol, batch: rows.batch });
    }
}

impl FlowSink for StreamSink {
    fn flow(&mut self, record: &FlowRecord) {
        let protocol = self.logs.push(record);
        let len = match protocol {
            Protocol::Tcp => self.logs.tcp.len(),
            Protocol::Udp => self.logs.udp.len(),
        };
        if len >= self.rows {
            self.send(protocol);
        }
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
}

impl sonde_engine::WorkerSink for StreamSink {
    type Part = FlowBatches;
    fn take(&mut self) -> FlowBatches {
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let len = match protocol {
                Protocol::Tcp => self.logs.tcp.len(),
                Protocol::Udp => self.logs.udp.len(),
            };
            if len > 0 {
                self.send(protocol);
            }
        }
        FlowBatches::default()
    }
}
