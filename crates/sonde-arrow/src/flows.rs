//! Flow records as typed Arrow rows: each worker's sink appends every record as the flow ends
//! to one builder per column, in the worker's thread.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, DurationNanosecondBuilder, Float64Builder, Int64Builder, ListBuilder,
    StringDictionaryBuilder, TimestampNanosecondBuilder, UInt64Builder,
};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Int32Type, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use sonde_anon::Anonymizer;
use sonde_flow::features::FeaturesConfig;
use sonde_flow::{FlowRecord, FlowSink, IcmpRecord, RttSample, TcpRecord, UdpRecord};
use sonde_output::{
    anonymized_record, icmp_columns, icmp_order_key, ip_text, mark_anonymized, order_key, shown_icmp, tcp_columns_with,
    udp_columns_with, Column, Kind, OrderKey, SortBuffer, Spilled, Value,
};

use crate::schema::{icmp_schema, tcp_schema_with, udp_schema_with};
use crate::sorted::{self, SortedRows};

/// Where an address is spelled out.
type Scratch = sonde_output::IpBuf;

/// Which flow log a batch belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
    /// `icmp_flows`: ICMP and ICMPv6 echo sessions and other messages (docs/icmp.md).
    Icmp,
}

/// Rows of one flow log, in the order the flows ended.
#[derive(Debug, Clone)]
pub struct FlowBatch {
    pub protocol: Protocol,
    pub batch: RecordBatch,
}

/// One column's values so far (a flow log's, or an interval or definition table's).
pub(crate) enum Builder {
    Count(UInt64Builder),
    Text(StringDictionaryBuilder<Int32Type>),
    Flag(BooleanBuilder),
    Time(TimestampNanosecondBuilder),
    Duration(DurationNanosecondBuilder),
    Float(Float64Builder),
    List(ListBuilder<Int64Builder>),
}

impl Builder {
    pub(crate) fn new(kind: Kind) -> Builder {
        match kind {
            Kind::Count => Builder::Count(UInt64Builder::new()),
            Kind::Address | Kind::Label => Builder::Text(StringDictionaryBuilder::new()),
            Kind::Flag => Builder::Flag(BooleanBuilder::new()),
            Kind::Time => Builder::Time(TimestampNanosecondBuilder::new().with_timezone("UTC")),
            Kind::Duration => Builder::Duration(DurationNanosecondBuilder::new()),
            Kind::Float => Builder::Float(Float64Builder::new()),
            Kind::List => {
                Builder::List(ListBuilder::new(Int64Builder::new()).with_field(arrow::datatypes::Field::new(
                    "item",
                    DataType::Int64,
                    true,
                )))
            }
        }
    }

    /// Appends `value`; `scratch` is where an address is spelled out.
    #[inline]
    fn push(&mut self, value: Value<'_>, scratch: &mut Scratch) {
        match (self, value) {
            (Builder::Count(b), Value::Int(n)) => b.append_value(n),
            // ns since the epoch fit an i64 until 2262.
            (Builder::Time(b), Value::Ms(ns)) => b.append_value(ns as i64),
            (Builder::Duration(b), Value::Ms(ns)) => b.append_value(ns as i64),
            (Builder::Flag(b), Value::Bool(v)) => b.append_value(v),
            (Builder::Text(b), Value::Text(s)) => b.append_value(s),
            (Builder::Text(b), Value::Str(s)) => b.append_value(s),
            (Builder::Text(b), Value::Owned(s)) => b.append_value(s),
            (Builder::Text(b), Value::Id(id)) => b.append_value(id.as_str()),
            (Builder::Text(b), Value::Uid(uid)) => b.append_value(uid.as_str()),
            (Builder::Text(b), Value::Ip(ip)) => b.append_value(ip_text(ip, scratch)),
            (Builder::Float(b), Value::Float(x)) => b.append_value(x),
            (Builder::List(b), Value::List(list)) => {
                b.values().append_slice(&list);
                b.append(true);
            }
            (b, v) => {
                // Only "no value" and "no sample" reach here: a column whose kind does not
                // match its values is a bug the tests catch.
                debug_assert!(matches!(v, Value::Missing | Value::NoSample), "{v:?} in a column of another kind");
                b.append_null();
            }
        }
    }

    pub(crate) fn append_null(&mut self) {
        match self {
            Builder::Count(b) => b.append_null(),
            Builder::Text(b) => b.append_null(),
            Builder::Flag(b) => b.append_null(),
            Builder::Time(b) => b.append_null(),
            Builder::Duration(b) => b.append_null(),
            Builder::Float(b) => b.append_null(),
            Builder::List(b) => b.append_null(),
        }
    }

    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Count(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Flag(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::Duration(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::List(b) => Arc::new(b.finish()),
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

    /// The rows so far as a batch, with each row's order key (the builders start again, empty).
    fn finish(&mut self) -> (Vec<OrderKey>, RecordBatch) {
        let columns = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), columns).expect("each builder gives its column's type");
        (std::mem::take(&mut self.keys), batch)
    }

    /// The rows so far sorted into output order, keyed ([`sorted::keyed`]).
    fn finish_sorted(&mut self) -> Result<RecordBatch, ArrowError> {
        let (keys, batch) = self.finish();
        sorted::keyed(&keys, &batch)
    }

    /// Memory a row takes in the builders, about (a number per column, and its key).
    fn row_bytes(&self) -> usize {
        self.columns.len() * 9 + OrderKey::BYTES
    }
}

/// The flow logs' rows of one worker.
struct Logs {
    tcp: Rows<TcpRecord>,
    udp: Rows<UdpRecord>,
    icmp: Rows<IcmpRecord>,
    anon: Option<Anonymizer>,
    scratch: Scratch,
}

impl Logs {
    /// Rows of the logs' columns (with the flow features' when asked for), their addresses
    /// through `anon`.
    fn new(anon: Option<Anonymizer>, features: Option<FeaturesConfig>) -> Logs {
        let (tcp, udp, icmp) = (tcp_columns_with(features), udp_columns_with(features), icmp_columns());
        let (tcp, udp, icmp) = match anon {
            Some(_) => (mark_anonymized(tcp), mark_anonymized(udp), mark_anonymized(icmp)),
            None => (tcp, udp, icmp),
        };
        Logs {
            tcp: Rows::new(tcp_schema_with(features), tcp),
            udp: Rows::new(udp_schema_with(features), udp),
            icmp: Rows::new(icmp_schema(), icmp),
            anon,
            scratch: [0; std::mem::size_of::<Scratch>()],
        }
    }

    /// Rows of `log` being built.
    fn len(&self, log: Protocol) -> usize {
        match log {
            Protocol::Tcp => self.tcp.len(),
            Protocol::Udp => self.udp.len(),
            Protocol::Icmp => self.icmp.len(),
        }
    }

    /// Appends an ICMP record, its addresses through the anonymiser as the TSV log shows them.
    fn push_icmp(&mut self, record: &IcmpRecord) {
        let record = shown_icmp(record, self.anon.as_mut());
        self.icmp.push(icmp_order_key(&record), &record, &mut self.scratch);
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
    /// What was handed to disk since the last `take`, and where more goes.
    part: FlowBatches,
    /// Which records get rows (TCP, UDP, ICMP): those of the logs the run writes.
    rows: [bool; 3],
    anon: Option<Anonymizer>,
    features: Option<FeaturesConfig>,
}

impl Default for ArrowSink {
    fn default() -> Self {
        ArrowSink::new()
    }
}

impl ArrowSink {
    pub fn new() -> ArrowSink {
        ArrowSink {
            logs: Logs::new(None, None),
            part: FlowBatches::default(),
            rows: [true; 3],
            anon: None,
            features: None,
        }
    }

    /// Builds rows only for the flow logs `outputs` writes; the other records are dropped as
    /// they come.
    pub fn only(self, outputs: &sonde_output::Outputs) -> ArrowSink {
        use sonde_output::{Format, OutputFile};
        let logs =
            [OutputFile::TcpFlows(Format::Tsv), OutputFile::UdpFlows(Format::Tsv), OutputFile::IcmpFlows(Format::Tsv)];
        ArrowSink { rows: logs.map(|f| outputs.wants(f)), ..self }
    }

    /// Shows every address through `anon` (with `*_iscrypto` set), as the TSV logs do.
    pub fn anonymized(self, anon: Option<Anonymizer>) -> ArrowSink {
        ArrowSink { logs: Logs::new(anon.clone(), self.features), anon, ..self }
    }

    /// Adds the columns of NFStream's flow features (`--features ml`) after the logs' own.
    pub fn features(self, features: Option<FeaturesConfig>) -> ArrowSink {
        ArrowSink {
            logs: Logs::new(self.anon.clone(), features),
            part: FlowBatches { features, ..self.part },
            features,
            ..self
        }
    }

    /// Holds at most `sort`'s budget of rows in memory, the rest in sorted runs on disk
    /// (without, every row until taken).
    pub fn sorted_in(self, sort: Option<Arc<SortBuffer>>) -> ArrowSink {
        ArrowSink { part: FlowBatches { features: self.features, ..FlowBatches::new(sort) }, ..self }
    }

    fn held_bytes(&self) -> usize {
        let l = &self.logs;
        l.tcp.len() * l.tcp.row_bytes() + l.udp.len() * l.udp.row_bytes() + l.icmp.len() * l.icmp.row_bytes()
    }

    /// The rows being built, sorted, into the part.
    fn finish_into_part(&mut self) {
        let part = &mut self.part;
        finish_into(&mut self.logs.tcp, &mut part.tcp, &mut part.spilled);
        finish_into(&mut self.logs.udp, &mut part.udp, &mut part.spilled);
        finish_into(&mut self.logs.icmp, &mut part.icmp, &mut part.spilled);
    }
}

fn finish_into<R>(rows: &mut Rows<R>, sorted: &mut SortedRows, spilled: &mut Spilled) {
    if rows.len() == 0 {
        return;
    }
    match rows.finish_sorted() {
        Ok(batch) => sorted.push(batch),
        // Sorting a batch of the builders' own columns does not fail; if it did, the rows
        // would be lost, and the summary would say so.
        Err(e) => {
            spilled.failure.get_or_insert(format!("sorting flow rows: {e}"));
        }
    }
}

impl ArrowSink {
    /// Over the memory budget, the rows built go to disk.
    fn bound(&mut self) {
        if self.part.sort.as_ref().is_some_and(|sort| self.held_bytes() > sort.bytes) {
            self.finish_into_part();
            self.part.spill();
        }
    }
}

impl FlowSink for ArrowSink {
    fn flow(&mut self, record: &FlowRecord) {
        if self.rows[matches!(record, FlowRecord::Udp(_)) as usize] {
            self.logs.push(record);
            self.bound();
        }
    }
    fn icmp(&mut self, record: &IcmpRecord) {
        if self.rows[2] {
            self.logs.push_icmp(record);
            self.bound();
        }
    }
    /// The logs hold each record's RTT summary, not its samples.
    fn rtt_sample(&mut self, _: &RttSample) {}
    /// The logs hold flows that ended.
    fn interim(&mut self, _: &FlowRecord) {}
}

impl sonde_engine::WorkerSink for ArrowSink {
    type Part = FlowBatches;
    fn take(&mut self) -> FlowBatches {
        self.finish_into_part();
        let fresh = FlowBatches { features: self.features, ..FlowBatches::new(self.part.sort.clone()) };
        std::mem::replace(&mut self.part, fresh)
    }
}

/// What the workers' sinks handed over: the logs' sorted rows, in memory and on disk.
#[derive(Debug, Default)]
pub struct FlowBatches {
    tcp: SortedRows,
    udp: SortedRows,
    icmp: SortedRows,
    sort: Option<Arc<SortBuffer>>,
    spilled: Spilled,
    /// The flow features' columns the rows have (their schema's when there are none).
    features: Option<FeaturesConfig>,
}

/// The flow logs as tables, in the TSV logs' order (flow start, then protocol and tuple).
#[derive(Debug, Clone)]
pub struct FlowTables {
    pub tcp: RecordBatch,
    pub udp: RecordBatch,
    /// `icmp_flows`: echo sessions and other ICMP messages.
    pub icmp: RecordBatch,
}

impl sonde_engine::Part for FlowBatches {
    fn absorb(&mut self, other: FlowBatches) {
        FlowBatches::absorb(self, other);
    }
    fn is_empty(&self) -> bool {
        FlowBatches::is_empty(self)
    }
}

impl FlowBatches {
    /// No rows yet; beyond `sort`'s budget they go to disk.
    pub fn new(sort: Option<Arc<SortBuffer>>) -> FlowBatches {
        FlowBatches { sort, ..FlowBatches::default() }
    }

    /// Adds `other`'s rows (and takes its sort buffer if this has none and never failed to
    /// write a run).
    pub fn absorb(&mut self, other: FlowBatches) {
        self.tcp.absorb(other.tcp);
        self.udp.absorb(other.udp);
        self.icmp.absorb(other.icmp);
        self.spilled.add(&other.spilled);
        self.features = self.features.or(other.features);
        if self.sort.is_none() && self.spilled.failure.is_none() {
            self.sort = other.sort;
        }
        let Some(sort) = self.sort.clone() else { return };
        // Over the budget, the rows in memory go to disk; the runs are merged so that no level,
        // and no final merge, reads too many at once.
        let over = self.tcp.held_bytes() + self.udp.held_bytes() + self.icmp.held_bytes() > sort.bytes;
        let spilled = &mut self.spilled;
        let done = [&mut self.tcp, &mut self.udp, &mut self.icmp].into_iter().try_for_each(|rows| {
            match over {
                true => rows.spill(&sort, spilled)?,
                false => rows.compact(&sort, spilled)?,
            }
            rows.narrow(&sort, spilled)
        });
        self.failed(&sort, done);
    }

    /// Sends the rows in memory to disk. A run that cannot be written leaves its rows in
    /// memory, says why in [`FlowBatches::spilled`], and ends the spilling.
    fn spill(&mut self) {
        if let Some(sort) = self.sort.clone() {
            let done = [&mut self.tcp, &mut self.udp, &mut self.icmp]
                .into_iter()
                .try_for_each(|r| r.spill(&sort, &mut self.spilled));
            self.failed(&sort, done);
        }
    }

    fn failed(&mut self, sort: &SortBuffer, done: Result<(), ArrowError>) {
        if let Err(e) = done {
            self.spilled.failure = Some(format!("writing a sorted run in {}: {e}", sort.dir.display()));
            self.sort = None;
        }
    }

    /// Rows handed over so far.
    pub fn len(&self) -> usize {
        self.tcp.len() + self.udp.len() + self.icmp.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What went to disk.
    pub fn spilled(&self) -> &Spilled {
        &self.spilled
    }

    /// Every log, each one table sorted into the output order: the same rows in the same order
    /// whatever the number of workers.
    pub fn into_tables(self) -> Result<FlowTables, ArrowError> {
        Ok(FlowTables {
            tcp: table(tcp_schema_with(self.features), &self.tcp)?,
            udp: table(udp_schema_with(self.features), &self.udp)?,
            icmp: table(icmp_schema(), &self.icmp)?,
        })
    }

    /// The schema of `log`'s rows.
    pub fn schema(&self, log: Protocol) -> SchemaRef {
        match log {
            Protocol::Tcp => tcp_schema_with(self.features),
            Protocol::Udp => udp_schema_with(self.features),
            Protocol::Icmp => icmp_schema(),
        }
    }

    /// Calls `out` with a log's rows in output order, in batches of a few thousand rows, each
    /// with unique dictionaries.
    pub fn for_each_batch(
        &self,
        log: Protocol,
        mut out: impl FnMut(RecordBatch) -> Result<(), ArrowError>,
    ) -> Result<(), ArrowError> {
        let rows = match log {
            Protocol::Tcp => &self.tcp,
            Protocol::Udp => &self.udp,
            Protocol::Icmp => &self.icmp,
        };
        SortedRows::merged(&[rows], sorted::MERGED_ROWS, |batch| out(unique_dictionaries(sorted::unkeyed(&batch)?)?))
    }
}

/// All of `rows` as one table in output order (empty: of `schema`).
fn table(schema: SchemaRef, rows: &SortedRows) -> Result<RecordBatch, ArrowError> {
    let mut batches = Vec::new();
    SortedRows::merged(&[rows], usize::MAX, |batch| {
        batches.push(sorted::unkeyed(&batch)?);
        Ok(())
    })?;
    match batches.len() {
        0 => Ok(RecordBatch::new_empty(schema)),
        1 => unique_dictionaries(batches.pop().expect("one")),
        _ => unique_dictionaries(concat_batches(&batches[0].schema(), &batches)?),
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
    /// Whether ICMP entries are streamed too ([`Protocol::Icmp`] batches).
    icmp: bool,
    anon: Option<Anonymizer>,
    features: Option<FeaturesConfig>,
}

impl StreamSink {
    pub fn new(tx: SyncSender<FlowBatch>, rows: usize) -> StreamSink {
        StreamSink { logs: Logs::new(None, None), tx, rows: rows.max(1), icmp: false, anon: None, features: None }
    }

    /// Streams the ICMP entries too, as [`Protocol::Icmp`] batches (off by default: a reader of
    /// the TCP and UDP logs is not handed a third kind of batch it did not ask for).
    pub fn with_icmp(self, icmp: bool) -> StreamSink {
        StreamSink { icmp, ..self }
    }

    /// Shows every address through `anon`, as [`ArrowSink::anonymized`].
    pub fn anonymized(self, anon: Option<Anonymizer>) -> StreamSink {
        StreamSink { logs: Logs::new(anon.clone(), self.features), anon, ..self }
    }

    /// Adds the columns of NFStream's flow features, as [`ArrowSink::features`].
    pub fn features(self, features: Option<FeaturesConfig>) -> StreamSink {
        StreamSink { logs: Logs::new(self.anon.clone(), features), features, ..self }
    }

    fn send(&mut self, protocol: Protocol) {
        let (_, batch) = match protocol {
            Protocol::Tcp => self.logs.tcp.finish(),
            Protocol::Udp => self.logs.udp.finish(),
            Protocol::Icmp => self.logs.icmp.finish(),
        };
        // A receiver that went away wants no more rows: they are dropped.
        let _ = self.tx.send(FlowBatch { protocol, batch });
    }
}

impl FlowSink for StreamSink {
    fn flow(&mut self, record: &FlowRecord) {
        let protocol = self.logs.push(record);
        if self.logs.len(protocol) >= self.rows {
            self.send(protocol);
        }
    }
    fn icmp(&mut self, record: &IcmpRecord) {
        if self.icmp {
            self.logs.push_icmp(record);
            if self.logs.icmp.len() >= self.rows {
                self.send(Protocol::Icmp);
            }
        }
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
    /// The logs hold flows that ended.
    fn interim(&mut self, _: &FlowRecord) {}
}

impl sonde_engine::WorkerSink for StreamSink {
    type Part = FlowBatches;
    fn take(&mut self) -> FlowBatches {
        for protocol in [Protocol::Tcp, Protocol::Udp, Protocol::Icmp] {
            if self.logs.len(protocol) > 0 {
                self.send(protocol);
            }
        }
        FlowBatches::default()
    }
}
