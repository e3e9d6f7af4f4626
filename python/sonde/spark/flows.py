"""Flows across probes: the probes' flow records (the Kafka flow topic, docs/kafka.md "Flows")
merged into per-interval host and host-pair tables on Spark's own machinery (docs/spark.md,
"Flows across probes").

One Structured Streaming query: Spark's Kafka source on the flow topic → `from_json` with an
explicit schema → only ended TCP and UDP flows (interim records, ICMP entries and malformed
messages are counted through `observe`, not merged) → event time = the flow's `last` packet,
with a watermark of `--max-age` → each flow exploded into its host rows and its host-pair rows →
ONE stateful aggregation, `groupBy(window(last, --flow-interval), kind, a, b)` sums, its state
in Spark's state store (the RocksDB provider where the session sets it) → output mode `update`
→ `foreachBatch` appends the batch's updated keys, with `batch`, to the changelogs `hosts/` and
`pairs/` (sonde.spark.changelog: Spark's writer, files moved into place), compacted every
`--compact-every` batches. No row is brought to the driver.

What a flow adds is what sonde's own application-layer tables add for it (docs/rmon2.md,
`al_hosts.tsv`, `al_matrix.tsv`; `crates/sonde-stats/src/apps.rs`), summed over applications:
all its IP packets and bytes, charged to the interval of its last packet (the interval that
counts it closed): to each of its two hosts (sent, received, one flow; a host talking to itself
once, with both directions as sent and as received), and to each direction of the pair that
sent a packet (source → destination: packets, bytes, one flow).
"""

from __future__ import annotations

from typing import Any, Dict

HOSTS_KEY = ("start", "addr")
PAIRS_KEY = ("start", "src", "dst")
OBSERVED = "sonde_flows"

# The fields of a flow record the merge reads (docs/kafka.md "Flows"; docs/metrics.md): IP
# packets and IP bytes per direction, as the tables count them. `last` is ms since the epoch
# with three decimals (µs), read as an exact decimal.
_FIELDS = (("probe", "string"), ("proto", "string"), ("c_ip", "string"), ("s_ip", "string"),
           ("c_pkts_all", "long"), ("s_pkts_all", "long"), ("c_bytes_ip", "long"), ("s_bytes_ip", "long"),
           ("last", "decimal(20,3)"), ("end_reason", "string"))


def add_arguments(p) -> None:
    """The flow merge's options (added to the `merge` subcommand's)."""
    p.add_argument("--flow-topic", default="sonde-flows", metavar="T",
                   help='the probes\' --kafka-topic (flow records); "" merges no flows (default sonde-flows)')
    p.add_argument("--flow-interval", type=int, default=60, metavar="SECS",
                   help="the interval a flow is charged to, by its last packet (default 60; whole seconds)")


def schema():
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "long": T.LongType(), "decimal(20,3)": T.DecimalType(20, 3)}
    return T.StructType([T.StructField(name, kinds[kind]) for name, kind in _FIELDS])


def records(raw):
    """The Kafka source's rows as parsed flow records with their validity, counted through
    `observe` (per batch: records, interim, icmp, malformed, merged), and the merged ones only."""
    from pyspark.sql import functions as F

    f = F.from_json(F.col("value").cast("string"), schema()).alias("f")
    parsed = raw.select(f).select("f.*")
    counts = ("c_pkts_all", "s_pkts_all", "c_bytes_ip", "s_bytes_ip")
    well_formed = (F.col("proto").isin("tcp", "udp") & F.col("c_ip").isNotNull() & F.col("s_ip").isNotNull()
                   & F.col("last").isNotNull() & (F.col("last") >= 0) & F.col("end_reason").isNotNull())
    for c in counts:
        well_formed = well_formed & F.col(c).isNotNull() & (F.col(c) >= 0)
    icmp = F.col("proto").isin("icmp", "icmpv6")
    interim = well_formed & (F.col("end_reason") == "open")
    kind = (F.when(interim, F.lit("interim")).when(well_formed, F.lit("flow"))
            .when(icmp, F.lit("icmp")).otherwise(F.lit("malformed")))
    labelled = parsed.withColumn("_kind", F.coalesce(kind, F.lit("malformed")))
    n = lambda k: F.sum(F.when(F.col("_kind") == k, 1).otherwise(0)).cast("long")  # noqa: E731
    observed = labelled.observe(OBSERVED, F.count(F.lit(1)).alias("records"), n("flow").alias("flows"),
                                n("interim").alias("interim"), n("icmp").alias("icmp"),
                                n("malformed").alias("malformed"))
    flows = observed.where(F.col("_kind") == "flow")
    # The flow's last packet, in µs (exact: the record has three decimals of ms).
    last_us = (F.col("last") * 1000).cast("long")
    return flows.select("c_ip", "s_ip", *counts, F.timestamp_micros(last_us).alias("t"))


def rows(flows):
    """Each flow as its host rows and pair rows, as sonde's apps.rs counts it:
    (kind, a, b, pkts_in, bytes_in, pkts_out, bytes_out, flows, t); a pair row's packets and bytes
    are in the `_out` columns (what its source sent)."""
    from pyspark.sql import functions as F

    c, s = F.col("c_ip"), F.col("s_ip")
    cp, cb, sp, sb = (F.col(n) for n in ("c_pkts_all", "c_bytes_ip", "s_pkts_all", "s_bytes_ip"))
    zero, one, none = F.lit(0).cast("long"), F.lit(1).cast("long"), F.lit(None).cast("string")
    self_talk = c == s
    bp, bb = cp + sp, cb + sb

    def row(keep, kind, a, b, pin, bin_, pout, bout):
        return F.struct(keep.alias("keep"), F.lit(kind).alias("kind"), a.alias("a"), b.alias("b"),
                        pin.alias("pkts_in"), bin_.alias("bytes_in"), pout.alias("pkts_out"),
                        bout.alias("bytes_out"))

    every = F.lit(True)
    made = F.array(
        # Two hosts, or one talking to itself (both directions sent and received).
        row(every, "host", c, none, F.when(self_talk, bp).otherwise(sp), F.when(self_talk, bb).otherwise(sb),
            F.when(self_talk, bp).otherwise(cp), F.when(self_talk, bb).otherwise(cb)),
        row(~self_talk, "host", s, none, cp, cb, sp, sb),
        # Each direction that sent a packet; a host to itself: one row of both directions.
        row(self_talk | (cp > 0), "pair", c, s, zero, zero, F.when(self_talk, bp).otherwise(cp),
            F.when(self_talk, bb).otherwise(cb)),
        row(~self_talk & (sp > 0), "pair", s, c, zero, zero, sp, sb),
    )
    return (flows.select(F.explode(made).alias("r"), "t").where(F.col("r.keep"))
            .select("r.kind", "r.a", "r.b", "r.pkts_in", "r.bytes_in", "r.pkts_out", "r.bytes_out",
                    one.alias("flows"), "t"))


def aggregate(raw, interval_s: int, max_age_s: float):
    """The one stateful aggregation: per (interval, kind, a, b), the sums; state kept while the
    interval's end is within `max_age_s` of the newest `last` seen (the watermark)."""
    from pyspark.sql import functions as F

    exploded = rows(records(raw)).withWatermark("t", f"{int(max_age_s * 1000)} milliseconds")
    sums = [F.sum(c).cast("long").alias(c) for c in ("pkts_in", "bytes_in", "pkts_out", "bytes_out", "flows")]
    return (exploded.groupBy(F.window("t", f"{interval_s} seconds").alias("w"), "kind", "a", "b").agg(*sums)
            .select((F.unix_micros(F.col("w.start")) / 1e6).alias("start"),
                    (F.unix_micros(F.col("w.end")) / 1e6).alias("end"), "kind", "a", "b", "pkts_in", "bytes_in",
                    "pkts_out", "bytes_out", "flows"))


def write_batch(spark, files, df, batch: int, compact_every: int) -> None:
    """A micro-batch's updated keys as the `hosts/` and `pairs/` changelogs' rows (Spark's
    writer), then the compaction when due."""
    from pyspark.sql import functions as F

    from sonde.spark import changelog

    df = df.withColumn("batch", F.lit(batch).cast("long")).persist()
    try:
        hosts = df.where(F.col("kind") == "host").select(
            "start", "end", F.col("a").alias("addr"), "pkts_in", "bytes_in", "pkts_out", "bytes_out", "flows", "batch")
        pairs = df.where(F.col("kind") == "pair").select(
            "start", "end", F.col("a").alias("src"), F.col("b").alias("dst"), F.col("pkts_out").alias("packets"),
            F.col("bytes_out").alias("bytes"), "flows", "batch")
        changelog.write(files, hosts, "hosts", batch)
        changelog.write(files, pairs, "pairs", batch)
    finally:
        df.unpersist()
    changelog.compact(spark, files, "hosts", HOSTS_KEY, compact_every)
    changelog.compact(spark, files, "pairs", PAIRS_KEY, compact_every)


def start(spark, args, out: str, checkpoint: str):
    """Starts the flow query (`args`: the merge's options: kafka, starting_offsets, trigger,
    max_age, max_messages_per_batch, compact_every, flow_topic, flow_interval); returns the
    StreamingQuery. `checkpoint` is its own (Spark's offsets and the aggregation's state)."""
    from sonde.spark import changelog
    from sonde.spark.session import kafka_stream

    if args.flow_interval < 1:
        raise ValueError(f"--flow-interval must be a whole number of seconds ≥ 1, not {args.flow_interval}")
    raw = kafka_stream(spark, args, [args.flow_topic])
    files = changelog.Files(spark, out)
    compact_every = args.compact_every
    merged = aggregate(raw, args.flow_interval, args.max_age)
    return (merged.writeStream.outputMode("update").queryName("sonde-flows")
            .foreachBatch(lambda df, batch: write_batch(spark, files, df, batch, compact_every))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{args.trigger} seconds").start())


_TOTALS: Dict[str, Dict[str, Any]] = {}


def status(query) -> Dict[str, Any]:
    """What the flow query has done since this process started it, for `_job.json`: batches,
    records read, flows merged, interim records, ICMP entries and malformed messages skipped,
    `late` (rows Spark dropped behind the watermark: a row is a flow's host or pair row), the
    state's rows and memory now, and the newest batch's durations. Folds the query's recent
    progress reports (each batch counted once: batch ids increase, the newest counted is kept)."""
    key = str(query.id)
    t = _TOTALS.setdefault(key, {"counted": -1, "batches": 0, "records": 0, "flows": 0, "interim": 0,
                                 "icmp": 0, "malformed": 0, "late_rows": 0})
    latest = None
    for p in query.recentProgress:
        latest = p
        if p["batchId"] <= t["counted"] or not p.get("numInputRows") and not p.get("observedMetrics"):
            continue
        t["counted"] = p["batchId"]
        t["batches"] += 1
        m = (p.get("observedMetrics") or {}).get(OBSERVED) or {}
        if hasattr(m, "asDict"):  # a Row in the progress PySpark hands back
            m = m.asDict()
        for name in ("records", "flows", "interim", "icmp", "malformed"):
            t[name] += int(m.get(name) or 0)
        for op in p.get("stateOperators") or []:
            t["late_rows"] += int(op.get("numRowsDroppedByWatermark") or 0)
    out = {k: v for k, v in t.items() if k != "counted"}
    if latest is not None:
        ops = latest.get("stateOperators") or []
        out["state_rows"] = sum(int(op.get("numRowsTotal") or 0) for op in ops)
        out["state_memory_bytes"] = sum(int(op.get("memoryUsedBytes") or 0) for op in ops)
        out["latest_batch"] = latest["batchId"]
        out["latest_duration_ms"] = latest.get("durationMs")
        out["watermark"] = (latest.get("eventTime") or {}).get("watermark")
    out["active"] = query.isActive
    return out
