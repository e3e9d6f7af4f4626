//! The typed interval, RMON2-table and definition outputs keep their schemas: every column's
//! name and Arrow type (and, where it differs, its type in Parquet files), per output, as committed in `tests/table_schemas.txt` (regenerate with
//! `UPDATE_SCHEMA=1 cargo test -p sonde-arrow --test table_schemas` and review the diff: a
//! changed type breaks every reader of the Parquet files).

use std::path::{Path, PathBuf};

use sonde_arrow::{definition_tables, interval_tables, parquet_field};
use sonde_define::{parse_definitions, Counter};
use sonde_engine::Run;
use sonde_output::LineSink;

const DEFS: &str = "src = ip.version == 4 key ip4.src measure count,gap,length\n\
                    data = ip.version == 4 and payload[0:1] >= 0 key ip4.src, ip4.dst, tcp.sport, tcp.dport, tcp.nxt measure none\n\
                    ack = ip.version == 4 and tcp.flags & 0x10 == 0x10 key ip4.dst, ip4.src, tcp.dport, tcp.sport, tcp.ack measure none\n\
                    rtt = assoc data -> ack within 10s\n";

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/table_schemas.txt")
}

#[test]
fn typed_tables_keep_their_schemas() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    let cfg = sonde_stats::Config { interval_ns: 1_000_000_000, tables: true, ..sonde_stats::Config::default() };
    let counter =
        Counter::new(parse_definitions(DEFS, sonde_define::MAX_NAME_BYTES).unwrap(), Some(1_000_000_000), 1000);
    let run = Run::new().intervals(Some(cfg)).definitions(Some(counter));
    let result = run.analyze_file(&trace, &|| LineSink::new(sonde_output::Format::Tsv)).unwrap();
    let mut tables = interval_tables(result.intervals.as_ref().unwrap()).unwrap();
    tables.extend(definition_tables(result.definitions.as_ref().unwrap()).unwrap());
    let mut text = String::new();
    for (file, batch) in &tables {
        assert!(batch.num_rows() > 0, "{file}: no rows, so no cell was checked against its column");
        let schema = batch.schema();
        text.push_str(&format!("{file} {:?}\n", schema.metadata().get("sonde.output")));
        for field in schema.fields() {
            text.push_str(&format!("  {}: {} nullable={}", field.name(), field.data_type(), field.is_nullable()));
            let parquet = parquet_field(field);
            if parquet.data_type() != field.data_type() {
                text.push_str(&format!(" parquet={}", parquet.data_type()));
            }
            text.push('\n');
        }
    }
    assert_eq!(tables.len(), 17, "every interval, table and definition output:\n{text}");
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(committed(), &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(committed()).unwrap_or_default();
    assert!(
        want == text,
        "the typed tables' schemas changed: run `UPDATE_SCHEMA=1 cargo test -p sonde-arrow --test \
         table_schemas` and review the diff\n{text}"
    );
}
