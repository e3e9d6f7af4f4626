//! A flow definition's summary: what the HTTP API lists per definition, and what summary.json
//! writes per definition (the same fields, then how its FID tables fared).

use serde::Serialize;

/// One flow definition and what it counted so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DefinitionSummary {
    /// The definition's name.
    pub name: String,
    /// The definition's text, as given.
    pub definition: String,
    /// The set's version when it was added (1: the file the run started with).
    pub version: u64,
    /// Removed or replaced during the run: its figures cover the time before.
    pub retired: bool,
    /// Packets the definition counted.
    pub packets: u64,
    /// Bytes (original lengths on the wire) of those packets.
    pub bytes: u64,
}

/// One entry of summary.json's `definitions`: the [`DefinitionSummary`] fields, in the same
/// order and at the same level (flattened), followed by the FID table counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DefinitionEntry {
    #[serde(flatten)]
    pub summary: DefinitionSummary,
    /// Rows of definitions.tsv: distinct FIDs summed over the intervals.
    pub fid_rows: u64,
    /// Packets counted in an overflow row (their FID found the interval's table full).
    pub overflow_packets: u64,
    /// Packets `gap` and `length` did not follow (their table of FIDs was full).
    pub untracked_packets: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_the_summary_then_the_table_counts() {
        let summary = DefinitionSummary {
            name: "web".into(),
            definition: "web = tcp.dport == 80".into(),
            version: 1,
            retired: false,
            packets: 7,
            bytes: 700,
        };
        let entry =
            DefinitionEntry { summary: summary.clone(), fid_rows: 2, overflow_packets: 0, untracked_packets: 1 };
        let head =
            r#"{"name":"web","definition":"web = tcp.dport == 80","version":1,"retired":false,"packets":7,"bytes":700"#;
        assert_eq!(serde_json::to_string(&summary).unwrap(), format!("{head}}}"));
        assert_eq!(
            serde_json::to_string(&entry).unwrap(),
            format!(r#"{head},"fid_rows":2,"overflow_packets":0,"untracked_packets":1}}"#)
        );
        // summary.json is written pretty: the flattened entry must print as the one struct
        // of nine fields it replaced.
        #[derive(Serialize)]
        struct Before<'a> {
            name: &'a str,
            definition: &'a str,
            version: u64,
            retired: bool,
            packets: u64,
            bytes: u64,
            fid_rows: u64,
            overflow_packets: u64,
            untracked_packets: u64,
        }
        let before = Before {
            name: "web",
            definition: "web = tcp.dport == 80",
            version: 1,
            retired: false,
            packets: 7,
            bytes: 700,
            fid_rows: 2,
            overflow_packets: 0,
            untracked_packets: 1,
        };
        assert_eq!(serde_json::to_string_pretty(&[&entry]).unwrap(), serde_json::to_string_pretty(&[&before]).unwrap());
    }
}
