//! The typed schemas: one Arrow type per column kind (the flow logs' and the tables'), and each
//! flow log column's unit and definition taken from `docs/metrics.md` (the one place they are
//! written down).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use sonde_flow::features::FeaturesConfig;
use sonde_output::{icmp_columns, tcp_columns, tcp_columns_with, udp_columns, udp_columns_with, Column, Kind};

const METRICS_MD: &str = include_str!("../../../docs/metrics.md");
/// The ICMP log's columns are defined in docs/icmp.md.
const ICMP_MD: &str = include_str!("../../../docs/icmp.md");
/// The flow features' columns (`--features ml`) are defined in docs/features.md.
const FEATURES_MD: &str = include_str!("../../../docs/features.md");

/// The Arrow type of a column kind.
pub(crate) fn data_type(kind: Kind) -> DataType {
    match kind {
        Kind::Count => DataType::UInt64,
        Kind::Address | Kind::Label => text_type(),
        Kind::Flag => DataType::Boolean,
        Kind::Time => time_type(),
        Kind::Duration => DataType::Duration(TimeUnit::Nanosecond),
        Kind::Float => DataType::Float64,
        Kind::List => list_type(),
    }
}

/// A list of int64 (the SPLT's columns).
pub(crate) fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int64, true)))
}

pub(crate) fn text_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

pub(crate) fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// The schema's own metadata: sonde's version and which output it is.
pub(crate) fn schema_metadata(output: &str) -> HashMap<String, String> {
    HashMap::from([
        ("sonde.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("sonde.output".to_string(), output.to_string()),
    ])
}

/// A field with its definition and its unit in the TSV (`tsv_unit`; the typed value carries its
/// own) as metadata, when the docs give them.
pub(crate) fn field(name: &str, data_type: DataType, doc: Option<(&str, String)>) -> Field {
    let field = Field::new(name, data_type, true);
    match doc {
        Some((unit, text)) => field.with_metadata(HashMap::from([
            ("tsv_unit".to_string(), unit.to_string()),
            ("description".to_string(), text),
        ])),
        None => field,
    }
}

fn flow_schema<R>(protocol: &str, columns: &[Column<R>]) -> SchemaRef {
    let fields: Vec<Field> =
        columns.iter().map(|c| field(c.name, data_type(c.kind), definition(protocol, c.name))).collect();
    Arc::new(Schema::new_with_metadata(fields, schema_metadata(&format!("{protocol}_flows"))))
}

/// The TCP flow log's typed schema (the columns of `tcp_flows.tsv`, in order).
pub fn tcp_schema() -> SchemaRef {
    flow_schema("tcp", &tcp_columns())
}

/// The TCP flow log's typed schema with the flow features' columns when asked for.
pub fn tcp_schema_with(features: Option<FeaturesConfig>) -> SchemaRef {
    flow_schema("tcp", &tcp_columns_with(features))
}

/// The UDP flow log's typed schema with the flow features' columns when asked for.
pub fn udp_schema_with(features: Option<FeaturesConfig>) -> SchemaRef {
    flow_schema("udp", &udp_columns_with(features))
}

/// The UDP flow log's typed schema.
pub fn udp_schema() -> SchemaRef {
    flow_schema("udp", &udp_columns())
}

/// The ICMP log's typed schema (the columns of `icmp_flows.tsv`).
pub fn icmp_schema() -> SchemaRef {
    flow_schema("icmp", &icmp_columns())
}

/// The unit and one-line definition `docs/metrics.md` (docs/icmp.md for "icmp") gives a column
/// of the `protocol` ("tcp", "udp" or "icmp") flow log: the first sentence of its row, whose first cell names the column or a
/// `*_suffix` pattern that covers it.
pub fn definition(protocol: &str, column: &str) -> Option<(&'static str, String)> {
    if protocol != "icmp" {
        if let Some(found) = rows_definition(FEATURES_MD, column) {
            return Some(found);
        }
    }
    let heading = format!("## {}:", protocol.to_uppercase());
    // docs/icmp.md is the ICMP log's: every table row of it.
    let (doc, mut inside) = if protocol == "icmp" { (ICMP_MD, true) } else { (METRICS_MD, false) };
    for line in doc.lines() {
        if line.starts_with("## ") && protocol != "icmp" {
            inside = line.starts_with(&heading);
            continue;
        }
        if !inside || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let [names, unit, text, ..] = cells[..] else { continue };
        let covers = names.split('`').skip(1).step_by(2).any(|pattern| match pattern.strip_prefix('*') {
            Some(suffix) => column.len() > 2 && column[1..] == *suffix,
            None => pattern == column,
        });
        if covers {
            return Some((unit, first_sentence(text)));
        }
    }
    None
}

/// The definition of `column` in any table row of `doc` (by name or `*_suffix`, as above).
fn rows_definition(doc: &'static str, column: &str) -> Option<(&'static str, String)> {
    doc.lines().filter(|l| l.starts_with("| `")).find_map(|line| {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let [names, unit, text, ..] = cells[..] else { return None };
        let covers = names.split('`').skip(1).step_by(2).any(|pattern| pattern == column);
        covers.then(|| (unit, first_sentence(text)))
    })
}

fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map_or(text.len(), |i| i + 1);
    text[..end].replace('`', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flow_column_has_a_definition_from_the_docs() {
        for (protocol, names) in [
            ("tcp", tcp_columns().iter().map(|c| c.name).collect::<Vec<_>>()),
            ("udp", udp_columns().iter().map(|c| c.name).collect()),
            ("icmp", icmp_columns().iter().map(|c| c.name).collect()),
            ("tcp", tcp_columns_with(Some(FeaturesConfig::default())).iter().map(|c| c.name).collect()),
            ("udp", udp_columns_with(Some(FeaturesConfig::default())).iter().map(|c| c.name).collect()),
        ] {
            for name in names {
                let (unit, text) = definition(protocol, name).unwrap_or_else(|| panic!("{protocol}: {name}"));
                assert!(!unit.is_empty() && text.len() > 5, "{protocol}: {name}: {unit:?} {text:?}");
            }
        }
        assert_eq!(definition("tcp", "c_rtt_cnt").unwrap(), ("samples", "number of RTT samples".to_string()));
        // Per protocol: UDP's `first` is not TCP's row.
        assert_eq!(definition("udp", "c_pkts_all").unwrap().1, "datagrams");
        assert_eq!(definition("tcp", "nonexistent"), None);
    }

    #[test]
    fn schemas_carry_types_and_metadata() {
        let s = tcp_schema();
        assert_eq!(s.metadata()["sonde.version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(s.field_with_name("first").unwrap().data_type(), &time_type());
        assert_eq!(s.field_with_name("c_isint").unwrap().data_type(), &DataType::Boolean);
        assert_eq!(s.field_with_name("c_ip").unwrap().data_type(), &text_type());
        let rtt = s.field_with_name("c_rtt_avg").unwrap();
        assert_eq!(rtt.data_type(), &DataType::Duration(TimeUnit::Nanosecond));
        assert_eq!(rtt.metadata()["tsv_unit"], "ms");
        assert_eq!(udp_schema().field_with_name("c_first_abs").unwrap().data_type(), &time_type());
    }
}
